// Categories of memory and the dictionary the semantic passes fill.
//
// A category can be attached at three granularities, looked up in this
// order (PyTorch's CategoryDict): by tensor id (every storage and version of
// the logical tensor), by key (one storage, every version), by (key, version).
// Passes write only through CategoryWriter; exporters only read.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "core/model/flat_map.h"
#include "core/model/ids.h"

namespace memtl {

// Declaration order is PyTorch's Category enum order.
enum class Category : uint8_t {
  kInput,
  kTemporary,
  kActivation,
  kGradient,
  kAutogradDetail,
  kParameter,
  kOptimizerState,
};
inline constexpr int kNumCategories = 7;

// Index in exports (PyTorch's _CATEGORY_TO_INDEX): PARAMETER=0,
// OPTIMIZER_STATE=1, INPUT=2, TEMPORARY=3, ACTIVATION=4, GRADIENT=5,
// AUTOGRAD_DETAIL=6, unknown=7.
inline constexpr int kUnknownIndex = 7;
int ExportIndex(std::optional<Category> c);
std::string_view CategoryName(std::optional<Category> c);  // "PARAMETER", ..., "unknown"
// Colours of the plot, by export index.
inline constexpr std::array<std::string_view, 8> kExportIndexNames = {
    "PARAMETER",  "OPTIMIZER_STATE", "INPUT",           "TEMPORARY",
    "ACTIVATION", "GRADIENT",        "AUTOGRAD_DETAIL", "Unknown"};

struct KeyVersionHash {
  size_t operator()(const std::pair<TensorKey, int32_t>& p) const {
    return static_cast<size_t>(Mix64(TensorKeyHash()(p.first) + static_cast<uint64_t>(p.second)));
  }
};
using KeyVersion = std::pair<TensorKey, int32_t>;
using KeyVersionSet = FlatMap<KeyVersion, char, KeyVersionHash>;

class CategoryDict {
 public:
  std::optional<Category> Get(const TensorKey& key, int32_t version) const;
  // Keys ever set by id (PyTorch's _by_id_keyset), in insertion order.
  const std::vector<TensorKey>& by_id_keys() const { return by_id_keys_; }

 private:
  friend class CategoryWriter;
  FlatMap<uint64_t, Category, U64Hash> by_id_;
  FlatMap<TensorKey, Category, TensorKeyHash> by_key_;
  FlatMap<KeyVersion, Category, KeyVersionHash> by_version_;
  std::vector<TensorKey> by_id_keys_;
  FlatMap<TensorKey, bool, TensorKeyHash> by_id_key_seen_;
};

// The only way passes change categories.
class CategoryWriter {
 public:
  explicit CategoryWriter(CategoryDict& dict) : d_(dict) {}
  void SetById(const TensorKey& key, Category c);
  void SetByKey(const TensorKey& key, Category c) { d_.by_key_[key] = c; }
  void SetByVersion(const TensorKey& key, int32_t version, Category c) {
    d_.by_version_[{key, version}] = c;
  }
  void SetDefaultByVersion(const TensorKey& key, int32_t version, Category c) {
    d_.by_version_.try_emplace({key, version}, c);
  }
  std::optional<Category> Get(const TensorKey& key, int32_t version) const {
    return d_.Get(key, version);
  }
  const CategoryDict& dict() const { return d_; }

 private:
  CategoryDict& d_;
};

}  // namespace memtl

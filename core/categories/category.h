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
// The names every output gives, by export index: PyTorch's enum names, and
// "unknown" in lower case for bytes no rule categorized (not a category:
// PyTorch's None), in the text, the JSON, the report and the plot alike.
// PyTorch's own figure says "Unknown", but none of the files memtl matches
// byte for byte holds a name (its exports hold indices); docs/categories.md.
inline constexpr std::array<std::string_view, 8> kExportIndexNames = {
    "PARAMETER",  "OPTIMIZER_STATE", "INPUT",           "TEMPORARY",
    "ACTIVATION", "GRADIENT",        "AUTOGRAD_DETAIL", "unknown"};
inline std::string_view ExportCategoryName(int index) { return kExportIndexNames[index]; }

// Categories are kept in arrays indexed by key slot (KeyTable), tensor
// id slot and tensor version (the data-flow graph's value numbering), so a
// lookup is three array reads. Reset() sizes them; a dict never Reset (or a
// key or version outside the numbering) answers "no category".
class CategoryDict {
 public:
  CategoryDict() = default;

  // id_slot: per key slot, the dense index of its tensor id (num_ids of
  // them); value_begin: per key slot (plus one), its first value index.
  // The dict keeps its own copy of both (the key table's and the graph's
  // numbering: 8 bytes per key), so that it lives on after those stages'
  // results are gone, as an export needs, and refers to nothing of theirs.
  void Reset(const std::vector<uint32_t>& id_slot, uint32_t num_ids,
             const std::vector<uint32_t>& value_begin);

  std::optional<Category> Get(KeySlot key, Version version) const {
    if (!key.valid() || key.value() >= by_key_.size()) return std::nullopt;
    if (uint8_t c = by_id_[id_slot_[key.value()]]; c != kNone) return static_cast<Category>(c);
    if (uint8_t c = by_key_[key.value()]; c != kNone) return static_cast<Category>(c);
    const uint32_t v = Value(key, version);
    if (v != kNoValue && by_version_[v] != kNone) return static_cast<Category>(by_version_[v]);
    return std::nullopt;
  }
  // Whether a key was ever set by id (PyTorch's _by_id_keyset).
  bool set_by_id(KeySlot key) const {
    return key.value() < by_id_key_.size() && by_id_key_[key.value()];
  }

 private:
  friend class CategoryWriter;
  static constexpr uint8_t kNone = 0xff;
  static constexpr uint32_t kNoValue = 0xffffffffu;
  uint32_t Value(KeySlot key, Version version) const {
    const uint32_t v = value_begin_[key.value()] + static_cast<uint32_t>(version.value());
    return version.valid() && v < value_begin_[key.value() + 1] ? v : kNoValue;
  }
  std::vector<uint32_t> id_slot_;      // per key slot
  std::vector<uint32_t> value_begin_;  // per key slot, plus one
  std::vector<uint8_t> by_id_;         // per tensor id slot
  std::vector<uint8_t> by_key_;        // per key slot
  std::vector<uint8_t> by_version_;    // per value
  std::vector<bool> by_id_key_;        // per key slot
};

// The only way passes change categories. Keys are slots of the key table.
class CategoryWriter {
 public:
  explicit CategoryWriter(CategoryDict& dict) : d_(dict) {}
  void SetById(KeySlot key, Category c) {
    d_.by_id_[d_.id_slot_[key.value()]] = static_cast<uint8_t>(c);
    d_.by_id_key_[key.value()] = true;
  }
  void SetByKey(KeySlot key, Category c) { d_.by_key_[key.value()] = static_cast<uint8_t>(c); }
  void SetDefaultByVersion(KeySlot key, Version version, Category c) {
    const uint32_t v = d_.Value(key, version);
    if (v != CategoryDict::kNoValue && d_.by_version_[v] == CategoryDict::kNone)
      d_.by_version_[v] = static_cast<uint8_t>(c);
  }
  std::optional<Category> Get(KeySlot key, Version version) const { return d_.Get(key, version); }
  const CategoryDict& dict() const { return d_; }

 private:
  CategoryDict& d_;
};

}  // namespace memtl

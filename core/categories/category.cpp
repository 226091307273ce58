// Category lookup with PyTorch's precedence: by id, then by key, then by
// (key, version).
#include "core/categories/category.h"

namespace memtl {

int ExportIndex(std::optional<Category> c) {
  if (!c) return kUnknownIndex;
  switch (*c) {
    case Category::kParameter:
      return 0;
    case Category::kOptimizerState:
      return 1;
    case Category::kInput:
      return 2;
    case Category::kTemporary:
      return 3;
    case Category::kActivation:
      return 4;
    case Category::kGradient:
      return 5;
    case Category::kAutogradDetail:
      return 6;
  }
  return kUnknownIndex;
}

std::string_view CategoryName(std::optional<Category> c) {
  return c ? kExportIndexNames[ExportIndex(c)] : std::string_view("unknown");
}

std::optional<Category> CategoryDict::Get(const TensorKey& key, int32_t version) const {
  if (const Category* c = by_id_.find(static_cast<uint64_t>(key.id.value()))) return *c;
  if (const Category* c = by_key_.find(key)) return *c;
  if (const Category* c = by_version_.find({key, version})) return *c;
  return std::nullopt;
}

void CategoryWriter::SetById(const TensorKey& key, Category c) {
  d_.by_id_[static_cast<uint64_t>(key.id.value())] = c;
  if (d_.by_id_key_seen_.try_emplace(key, true).second) d_.by_id_keys_.push_back(key);
}

}  // namespace memtl

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
  return kExportIndexNames[ExportIndex(c)];
}

void CategoryDict::Reset(const std::vector<uint32_t>& id_slot, uint32_t num_ids,
                         const std::vector<uint32_t>& value_begin) {
  const size_t num_keys = id_slot.size();
  id_slot_ = id_slot;
  if (value_begin.size() == num_keys + 1) {
    value_begin_ = value_begin;
  } else {  // no graph values: every key has none
    value_begin_.assign(num_keys + 1, 0);
  }
  by_id_.assign(num_ids, kNone);
  by_key_.assign(num_keys, kNone);
  by_version_.assign(value_begin_[num_keys], kNone);
  by_id_key_.assign(num_keys, false);
}

}  // namespace memtl

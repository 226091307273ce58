// The op tree (PyTorch's OpTree): the trace's events in depth-first pre-order
// and sorted by start time, plus per-op schema facts (which overloads match,
// which inputs are written) computed once and shared by later stages.
#pragma once

#include <vector>

#include "core/model/trace.h"
#include "core/schema/schema.h"

namespace memtl {

// The key slot (trace.key_table) of a tensor observation or an allocation
// event, kNone32 when identity gave it no key.
inline uint32_t SlotOfTensor(const Trace& trace, uint32_t tensor) {
  return tensor == kNone32 ? kNone32 : trace.key_table.of_tensor[tensor];
}
inline uint32_t SlotOfAlloc(const Trace& trace, uint32_t alloc) {
  return trace.key_table.of_alloc[alloc];
}

class OpTree {
 public:
  OpTree(const Trace& trace, const SchemaRegistry& schemas);
  // The tree's shape only (orders, subtree sizes, backward flags): it needs
  // no tensor identity, so it can be built while identity runs. The schema
  // facts need the key table: AddSchemaFacts adds them afterwards.
  explicit OpTree(const Trace& trace);
  void AddSchemaFacts(const SchemaRegistry& schemas);

  const Trace& trace() const { return trace_; }
  // Event indices in depth-first pre-order; the subtree of preorder()[p]
  // is preorder()[p .. p + subtree_size(preorder()[p])).
  const std::vector<uint32_t>& preorder() const { return preorder_; }
  uint32_t position(uint32_t event) const { return position_[event]; }
  uint32_t subtree_size(uint32_t event) const { return subtree_size_[event]; }
  // Every event, stably sorted by start time over pre-order (the pre-order
  // array itself when it is already in that order, as it nearly always is).
  const std::vector<uint32_t>& sorted() const { return sorted_is_preorder_ ? preorder_ : sorted_; }

  // Schema facts of an op event: number of matching overloads (saturating
  // at 255) and, per input, 1 written / 0 not / -1 unknown.
  size_t num_matches(uint32_t event) const { return num_matches_[event]; }
  // Per input of an op event (empty for other events).
  std::pair<const int8_t*, size_t> mutability(uint32_t event) const {
    return {mutability_pool_.data() + mutability_begin_[event],
            mutability_begin_[event + 1] - mutability_begin_[event]};
  }
  // True when the event or one of its ancestors is a backward function.
  bool in_backward(uint32_t event) const { return in_backward_[event]; }

 private:
  const Trace& trace_;
  std::vector<uint32_t> preorder_;
  std::vector<uint32_t> position_;
  std::vector<uint32_t> subtree_size_;
  std::vector<uint32_t> sorted_;
  bool sorted_is_preorder_ = false;
  std::vector<uint8_t> num_matches_;
  std::vector<uint32_t> mutability_begin_;  // CSR offsets into mutability_pool_
  std::vector<int8_t> mutability_pool_;
  std::vector<bool> in_backward_;
};

}  // namespace memtl

// Bytes per tensor key, as PyTorch's SizeMap computes them: the largest
// extent seen in any strided observation (max over dims of size * stride,
// times the element size), overridden by the allocation's byte count when an
// allocation event carries the key.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/graph/op_tree.h"
#include "core/model/key_table.h"
#include "core/model/status.h"

namespace memtl {

class SizeMap {
 public:
  // `records`: the tensor observations (TakeTensorRecords), read here for
  // the last time.
  SizeMap(const OpTree& tree, const KeyTable& keys, const TensorRecords& records);
  // Bytes of a key slot; 0 for a key never sized (PyTorch would raise
  // KeyError; memtl counts it).
  int64_t operator[](KeySlot key) const { return std::max<int64_t>(values_[key], 0); }
  bool contains(KeySlot key) const { return values_[key] >= 0; }

 private:
  void Observe(const TensorRecords& records, const KeyTable& keys, uint32_t tensor);
  PerKey<int64_t> values_;  // by key slot; -1: never sized
};

// Per allocation record, for those with no key (PyTorch keys them by
// pointer and device instead): whether that (pointer, device) was live among
// such allocations just before it, in the tree's pre-order, as PyTorch's
// timeline walks them (in start-time order where the reader says so:
// TraceHeader::pairs_in_time_order). An allocation that was live is a new version of it;
// a free that was not also adds a pre-existing allocation. Reads the
// addresses (records.alloc_ptrs), which go before the timeline: the pipeline
// keeps the result (Analysis::untracked_live) and hands it to
// BuildTimeline. An error, not a guess, when the addresses are missing.
Expected<std::vector<bool>> UntrackedAllocationsLive(const OpTree& tree, const KeyTable& keys,
                                                     const TensorRecords& records);

}  // namespace memtl

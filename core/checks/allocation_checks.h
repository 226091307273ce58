// Consistency checks of a trace's allocation events, run right after reading.
// Defects that do not invalidate the analysis are counted as diagnostics:
// a double free (a pointer freed twice after being allocated in the window),
// a free whose size differs from its allocation. A free of memory allocated
// before profiling began is not a defect: it is pre-existing memory.
//
// The checks walk the events in time order (the op tree's start-time order),
// the order in which the allocator saw them. The op tree's pre-order is not
// that order when several threads allocate (on a GPU the backward pass runs
// on the autograd engine's device thread, whose roots interleave in time
// with the main thread's): in pre-order a real CUDA training step shows
// double frees and mismatched sizes that did not happen. Where the
// timeline, which pairs allocations without a tensor in pre-order as
// PyTorch does, gets a row below zero from such a disagreement, it says so
// itself (BuildTimeline).
#pragma once

#include "core/graph/op_tree.h"
#include "core/model/diagnostics.h"

namespace memtl {

struct AllocationSummary {
  size_t allocations = 0;
  size_t frees = 0;
  size_t preexisting_frees = 0;
};

// `records`: the allocations' addresses (TakeTensorRecords).
AllocationSummary CheckAllocations(const OpTree& tree, const TensorRecords& records,
                                   Diagnostics& diag);

}  // namespace memtl

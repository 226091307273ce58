// Consistency checks of a trace's allocation events, run right after reading.
// Defects that do not invalidate the analysis are counted as diagnostics:
// a double free (a pointer freed twice after being allocated in the window),
// a free whose size differs from its allocation, a free whose time precedes
// its allocation's (the timeline, in time order, would free before it
// allocates). A free of memory allocated before profiling began is not a
// defect: it is pre-existing memory.
//
// The checks walk the op tree's pre-order, the order in which the timeline
// matches allocations with frees (BuildTimeline), not the file's: in a file
// whose records are not in pre-order the two differ, and a free the file's
// order calls pre-existing can be the timeline's free of a later record's
// allocation, larger than it or before it in time.
#pragma once

#include "core/graph/op_tree.h"
#include "core/model/diagnostics.h"

namespace memtl {

struct AllocationSummary {
  size_t allocations = 0;
  size_t frees = 0;
  size_t preexisting_frees = 0;
};

AllocationSummary CheckAllocations(const OpTree& tree, Diagnostics& diag);

}  // namespace memtl

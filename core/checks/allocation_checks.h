// Consistency checks of a trace's allocation events, run right after reading.
// Defects that do not invalidate the analysis are counted as diagnostics:
// a double free (a pointer freed twice after being allocated in the window),
// a free whose size differs from its allocation, a free whose time precedes
// its allocation's (the timeline, in time order, would free before it
// allocates). A free of memory allocated before profiling began is not a
// defect: it is pre-existing memory.
#pragma once

#include "core/model/diagnostics.h"
#include "core/model/trace.h"

namespace memtl {

struct AllocationSummary {
  size_t allocations = 0;
  size_t frees = 0;
  size_t preexisting_frees = 0;
};

AllocationSummary CheckAllocations(const Trace& trace, Diagnostics& diag);

}  // namespace memtl

// The activity the CUPTI collector gathered (cupti_activity.h) as one memtl
// trace (docs/trace-format.md), which every memtl command reads:
//   - NVTX ranges are `op` records (scope user_scope), nested by time;
//   - kernels and copies are `other` records (type cuda_kernel,
//     cuda_memcpy) in the innermost range around their start on the device;
//   - allocations and releases are `alloc` records on `cuda:N` (host memory
//     on `cpu`), in the innermost range around them, with the device's
//     allocated total after each and its reserved total (what cudaMalloc
//     holds plus the memory pools' sizes).
// The tree is by time alone: CUPTI says which host thread an NVTX range
// ran on but not which thread allocated, and a kernel runs after its launch.
// No tensors: every byte is unknown, as for any program that is not PyTorch.
#pragma once

#include <functional>
#include <string_view>

#include "collect/cupti/cupti_activity.h"

namespace memtl_cupti {

// Writes the trace in pieces of whole lines to `write`.
void WriteTrace(const Activity& a, std::string_view producer,
                const std::function<void(std::string_view)>& write);

}  // namespace memtl_cupti

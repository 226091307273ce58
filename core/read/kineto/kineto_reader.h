// Reads a Kineto (Chrome) trace, as export_chrome_trace and
// tensorboard_trace_handler write it, into memtl's Trace, so that the
// pipeline runs on it unchanged:
//
// - cpu_op, user_annotation and python_function events become op, op
//   (user scope) and python-call events, nested by time on their thread
//   (Kineto records no parents), roots in start-time order;
// - "[memory]" instant events become allocation events under the
//   innermost op or python call around them on their thread, on the device
//   that "Device Type" and "Device Id" name (cuda:N per event).
//
// Kineto records no tensors, so every allocation is untracked: the
// timeline counts it as unknown memory, attributed to its op and modules
// in the report's tables. Memory allocated before the profile and never
// freed in it is not in the events; where the trace has the allocator's
// "Total Allocated", it is added as one allocation at the device's first
// event, so that the timeline's total is the allocator's. Then memtl's total
// is checked against "Total Allocated" after every event: a difference is a
// counted diagnostic. Traces without "Addr" (before PyTorch 1.10) pair each
// free with the latest live allocation of its size on its device. Memory
// events pair in time order, the allocator's, not in the tree's pre-order
// (roots of two threads overlap in time on a GPU, where the backward pass
// runs on the autograd engine's device thread): the reader replays them so
// and sets TraceHeader::pairs_in_time_order for the timeline.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/diagnostics.h"
#include "core/model/status.h"
#include "core/model/trace.h"
#include "core/read/common/format.h"
#include "core/read/common/read_options.h"

namespace memtl {

// The allocator's "Total Reserved" after a memory event where it changed,
// in time order (the HTML report draws it as a line per device).
struct ReservedPoint {
  int64_t time_ns = 0;
  int64_t bytes = 0;
  DeviceIndex device = 0;
};

struct KinetoRead {
  Trace trace;
  Diagnostics diagnostics;
  ReadInfo info;
  // Per device that reports a reserved total other than 0, its changes;
  // empty when none does (the CPU allocator reports 0).
  std::vector<ReservedPoint> reserved;
  // With ReadOptions::et_path, per op record (Trace::ops), its "Record
  // function id" (0: none) and its end time in ns, for the join.
  std::vector<uint64_t> op_rf;
  std::vector<int64_t> op_end;
};

// `input` must have been detected as kKineto (OpenInput). The Kineto trace
// alone: with ReadOptions::et_path it keeps what the join needs (op_rf,
// op_end), and the execution-trace reader joins the two
// (ReadKinetoJoinedInput, core/read/et/et_join.h), which sits above this
// one and calls it.
Expected<KinetoRead> ReadKinetoInput(OpenedInput input, const ReadOptions& options = {});
// Tests: a Kineto trace held in memory.
Expected<KinetoRead> ReadKinetoString(std::string data, const std::string& name,
                                      const ReadOptions& options = {});

}  // namespace memtl

// Reads a CUDA memory snapshot, as torch.cuda.memory._dump_snapshot writes
// it (a pickle of the dict torch.cuda.memory._snapshot() returns, plain or
// gzip'd), into memtl's Trace, so that the pipeline runs on it as on a
// Kineto trace read alone:
//
// - each device's trace entries (device_traces[N], cuda:N) in time order:
//   "alloc" an allocation, "free_completed" (the block back in the cache;
//   "free" in older snapshots) its free, at the frames of its
//   "free_requested" where there was one; segment_alloc, segment_free,
//   segment_map and segment_unmap the reserved total; "oom" a counted
//   diagnostic; every entry's frames the events around it
//   (snapshot_frames.h), so that categories are inferred (core/infer/) from
//   the same scopes as a Kineto trace's;
// - the blocks of `segments` still allocated at the snapshot that no entry
//   allocated: memory from before the trace's first entry (its ring buffer
//   of max_entries wrapped, or history was recorded late), a counted
//   diagnostic, added as one allocation per device at the first entry as
//   the Kineto reader adds memory from before the profile
//   (kPreProfileAddress);
// - the reserved total at the trace's start: the segments' sizes less what
//   the trace's segment entries added.
//
// The pickle is decoded by pickle.h, which refuses every opcode that is not
// data: a snapshot is never executed.
#pragma once

#include <string>
#include <vector>

#include "core/model/diagnostics.h"
#include "core/model/status.h"
#include "core/model/trace.h"
#include "core/read/common/format.h"
#include "core/read/common/read_options.h"
#include "core/read/kineto/kineto_reader.h"

namespace memtl {

// The largest decoded snapshot memtl reads whole (the pickle's strings are
// read in place, so it is held as read).
inline constexpr size_t kMaxSnapshotBytes = size_t{4} << 30;

struct SnapshotRead {
  Trace trace;
  Diagnostics diagnostics;
  ReadInfo info;
  // Per device with segments, the reserved total where it changes.
  std::vector<ReservedPoint> reserved;
};

// `input` must have been detected as kSnapshot (OpenInput).
Expected<SnapshotRead> ReadSnapshotInput(OpenedInput input, const ReadOptions& options = {});
// Tests and fuzzers: a snapshot held in memory (plain or gzip'd).
Expected<SnapshotRead> ReadSnapshotString(std::string data, const std::string& name);

}  // namespace memtl

// Reads the raw memory timeline PyTorch's export_memory_timeline writes for
// a path ending in .raw.json.gz: one JSON array of [time, action, bytes,
// category] rows for one device (not named in the file), in the timeline's
// order. It is a timeline, not a trace: the pipeline turns the rows into
// the categorized timeline directly (core/pipeline/analysis.h), with no
// graph or passes.
//
// Rows are cut from the stream one at a time (kineto_stream.h: the file is
// one JSON array), so memory is the rows, not the text.
#pragma once

#include <cstdint>
#include <vector>

#include "core/model/status.h"
#include "core/read/common/format.h"
#include "core/read/common/read_options.h"

namespace memtl {

struct RawTimelineRow {
  int64_t time = 0;    // ns; -1 for pre-existing memory
  int64_t bytes = 0;   // signed, as written: frees and the first row of a version bump are negative
  uint8_t action = 0;  // PyTorch's Action: 1 pre-existing, 2 create, 3 version bump, 4 destroy
  uint8_t category = 0;  // export index: 0 PARAMETER .. 6 AUTOGRAD_DETAIL, 7 unknown
};

struct RawTimeline {
  std::vector<RawTimelineRow> rows;
  // Times were microseconds (PyTorch before 2.4 divided them by 1000) and
  // were turned into nanoseconds.
  bool times_were_us = false;
};

// `input` must have been detected as kRawTimeline (OpenInput). A row that is
// not [int, 1..4, int, 0..7] is an error naming it.
Expected<RawTimeline> ReadRawTimelineInput(OpenedInput input, const ReadOptions& options = {},
                                           ReadInfo* info = nullptr);

}  // namespace memtl

// Reads a memtl trace (docs/trace-format.md) into the Trace model.
//
// Errors name the file, the line and what was expected; reading stops at the
// first one. With `partial`, a trace whose last line was cut mid-record (the
// recorder was killed) is read up to the last complete record.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/model/progress.h"
#include "core/model/status.h"
#include "core/model/trace.h"

namespace memtl {

struct ReadOptions {
  bool partial = false;
  // Inflate on a second thread and parse on workers while this one joins
  // their blocks in file order (trace_reader.cpp). The output is the same
  // either way; false reads and parses here, on one thread.
  bool threaded = true;
  // Parse workers of a threaded read; 0: by the machine's cores (2 to 4).
  // Set, ReadTraceString reads threaded too (tests).
  size_t parse_threads = 0;
  // Bytes per block of lines; 0: read::kBlock. Tests make blocks small so
  // that a small trace is many blocks.
  size_t block_bytes = 0;
  // Where the read says how far it is (bytes of decoded trace read, and
  // the size expected), for a progress line; none when null.
  Progress* progress = nullptr;
  // Keep each tensor's shape and dtype (Trace::tensor_shapes), which only
  // `memtl events` and `memtl explain` print; off, the reader keeps only
  // the bytes they give, and reads as fast and as small as before. Only
  // memtl's own traces carry them (a Kineto trace names no tensor).
  bool keep_shapes = false;
  // An execution trace of the same run to join to a Kineto trace
  // (core/read/et_join.h); empty: none. Only a Kineto trace takes one.
  std::string et_path;
};

struct ReadInfo {
  size_t lines = 0;
  bool stopped_early = false;  // `partial` dropped an incomplete last line
  size_t stopped_at_line = 0;
  // torch 1.13 python-tracer tensors given an op input's metadata, and
  // those never seen as an op input (core/read/partial_tensors.h).
  size_t python_tensors_resolved = 0;
  size_t python_tensors_dropped = 0;
  // One line for the user about the read (the execution-trace join's
  // coverage); empty: nothing to say.
  std::string note;
};

Expected<Trace> ReadTraceFile(const std::string& path, const ReadOptions& options = {},
                              ReadInfo* info = nullptr);
// Whether `name` is a device as PyTorch parses one (c10::Device): "type"
// or "type:index" with a type PyTorch knows and an index of up to three
// digits. The rule for every device a trace names (the memtl trace reader
// refuses any other) and for a --device given with any input.
bool IsDeviceName(std::string_view name);
// `--device` checked by that rule: ok when empty or valid, else the
// one-line refusal (for a raw timeline, which names no device, the value
// was taken as it came).
Status CheckDeviceOption(std::string_view device);

Expected<Trace> ReadTraceString(std::string data, const std::string& name,
                                const ReadOptions& options = {}, ReadInfo* info = nullptr);

inline constexpr int kTraceFormatVersion = 1;

}  // namespace memtl

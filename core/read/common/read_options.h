// What a read of any format is told (ReadOptions) and tells back (ReadInfo):
// the memtl trace reader (memtl/trace_reader.h), the Kineto reader with its
// execution-trace join (kineto/kineto_reader.h, et/et_join.h) and the raw
// timeline reader (raw/raw_timeline.h) take the same options, each using
// the fields that apply to it.
#pragma once

#include <cstddef>
#include <string>

#include "core/model/progress.h"

namespace memtl {

struct ReadOptions {
  bool partial = false;
  // Inflate on a second thread and parse on workers while this one joins
  // their blocks in file order (memtl/trace_reader.cpp). The output is the same
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
  // (core/read/et/et_join.h, ReadKinetoJoinedInput); empty: none. Only a
  // Kineto trace takes one.
  std::string et_path;
};

struct ReadInfo {
  size_t lines = 0;
  bool stopped_early = false;  // `partial` dropped an incomplete last line
  size_t stopped_at_line = 0;
  // torch 1.13 python-tracer tensors given an op input's metadata, and
  // those never seen as an op input (core/read/memtl/partial_tensors.h).
  size_t python_tensors_resolved = 0;
  size_t python_tensors_dropped = 0;
  // One line for the user about the read (the execution-trace join's
  // coverage); empty: nothing to say.
  std::string note;
};

}  // namespace memtl

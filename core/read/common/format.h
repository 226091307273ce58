// What kind of file an input is, decided by its first decoded bytes (gzip is
// undone first), never by its name: memtl reads its own traces, Kineto
// (Chrome) traces, CUDA memory snapshots and PyTorch's raw memory timelines, and names the other
// files PyTorch writes, which it cannot read (yet), with what to pass instead.
//
// The bytes read to decide stay with the opened source (OpenedInput::head),
// so that a pipe is read once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/model/status.h"
#include "core/read/common/line_source.h"

namespace memtl {

enum class InputFormat : uint8_t {
  // A memtl trace (JSON Lines, header {"format":"memtl-trace",...}), and
  // anything recognized as none of the others: the memtl reader says
  // what is wrong with it (FormatAdvice adds what memtl reads).
  kMemtlTrace,
  // One JSON object with "traceEvents" (export_chrome_trace,
  // tensorboard_trace_handler), or a bare JSON array of trace events.
  kKineto,
  // [[time, action, bytes, category], ...]: export_memory_timeline(*.raw.json.gz).
  kRawTimeline,
  // [[times], [[sizes], ...]]: export_memory_timeline(*.json or *.json.gz).
  kSizesTimeline,
  // {"schema": ..., "nodes": [...]}: ExecutionTraceObserver.
  kExecutionTrace,
  // Valid JSON that is none of the above: a document (written over several
  // lines, or the whole input) with none of their keys or shapes, e.g. a
  // pretty-printed config or list. The memtl reader, which reads a line at
  // a time, would call the first line of a pretty-printed one invalid.
  kOtherJson,
  // A pickle (protocol 2 to 5: 0x80 PROTO first): a CUDA memory snapshot,
  // torch.cuda.memory._dump_snapshot (core/read/snapshot/).
  kSnapshot,
  kNeedMore,  // SniffFormat only: the head ends before the answer
};

std::string_view FormatName(InputFormat f);

// The format of an input whose first decoded bytes are `head`; `at_end`
// says the input holds nothing more. kNeedMore when `head` is too short to
// tell and more may come.
InputFormat SniffFormat(std::string_view head, bool at_end);

// An input opened and its format decided: `head` holds the decoded bytes
// read to decide, whole lines for a memtl trace (the readers take them
// before reading on from `src`).
struct OpenedInput {
  InputFormat format = InputFormat::kMemtlTrace;
  std::unique_ptr<LineSource> src;
  std::string head;
};

// Opens an input and decides its format. Every format is UTF-8 JSON: a
// UTF-8 byte-order mark is skipped (the readers never see it), and a file
// in UTF-16 or UTF-32 is refused with a line that says so.
Expected<OpenedInput> OpenInput(const std::string& path);
// The same for bytes held in memory (tests, fuzzers): `name` names them.
Expected<OpenedInput> OpenMemoryInput(std::string data, std::string name);
// As OpenMemoryInput, with an input it refuses decided as a memtl trace
// (whose reader then calls it invalid): for callers that only need the
// format.
OpenedInput OpenInputFromMemory(std::string data, std::string name);

// One sentence for a file memtl does not read as it is (`format` of
// kSizesTimeline or kExecutionTrace: what it is and what to pass instead;
// kOtherJson: that it is JSON, and what memtl reads; kMemtlTrace: what
// memtl reads and how to record it, for a file the memtl reader refused at
// its first line).
std::string FormatAdvice(InputFormat format);

}  // namespace memtl

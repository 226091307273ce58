// The read loop: lines from blocks (block_queue.h) to the record builder
// (record_builder.h), with the errors of a whole read: cut-off last records,
// over-long lines, the input's own status, memory that runs out.
//
// Inflating and parsing overlap: a reader thread decompresses and cuts the
// input into blocks of whole lines while the calling thread parses them, in
// order, so the result does not depend on the thread count.
#include "core/read/trace_reader.h"

#include <new>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <thread>

#include "core/model/quote.h"
#include "core/read/block_queue.h"
#include "core/read/format.h"
#include "core/read/json_cursor.h"
#include "core/read/line_source.h"
#include "core/read/partial_tensors.h"
#include "core/read/record_builder.h"

namespace memtl {

namespace {

using read::Block;
using read::BlockQueue;
using read::Builder;
using read::kBlock;
using read::kBlockCapacity;
using read::Produce;
using read::RecordError;

static_assert(kMaxLineBytes == size_t{64} << 20, "the messages below say 64 MiB");

// A line past the limit arrives cut after kMaxLineBytes + 1 bytes
// (LineSource). Input that is no JSON at all (binary data, /dev/zero) says
// so at its column; a line that is JSON up to the cut is too long.
Status LongLine(std::string_view line, const std::string& where) {
  // A value cut inside a token (a literal, an escape) fails this close to
  // the cut; its error is the cut's, not the input's.
  constexpr size_t kCutMargin = 16;
  try {
    JsonCursor c(line);
    c.SkipValue();
    c.ExpectEnd();
  } catch (const JsonError& e) {
    if (e.column + kCutMargin <= line.size()) {
      return Status::Error(where + "not valid JSON (column " + std::to_string(e.column) + ": " +
                           e.what + ")");
    }
  }
  return Status::Error(where + "line longer than 64 MiB");
}

// `threaded`: inflate on a reader thread while this one parses (files); an
// in-memory input is read here, a block at a time (tests, fuzzers).
// `head`: whole lines already read from `src` (format detection), parsed
// first. `*line_no_out` counts the lines parsed, for ReadFrom's message
// when memory runs out.
Expected<Trace> ReadBlocks(LineSource& src, std::string head, const ReadOptions& options,
                           ReadInfo* info, bool threaded, size_t* line_no_out) {
  Trace trace;
  Builder builder(&trace, options.keep_shapes);
  BlockQueue queue(threaded);
  std::thread producer;
  if (threaded) {
    try {
      producer = std::thread([&] { Produce(src, queue); });
    } catch (const std::system_error&) {
      threaded = false;  // no thread to be had (a memory limit): read here
    }
  }
  // The next block: from the reader thread, or read here, one at a time.
  auto next_block = [&](Block* b) -> bool {
    if (!head.empty()) {
      b->text = std::move(head);
      head.clear();
      b->last_unterminated = b->text.back() != '\n';
      return true;
    }
    if (threaded) return queue.Pop(b);
    try {
      b->text.clear();
      b->text.reserve(kBlockCapacity);
      if (!src.ReadLines(&b->text, kBlock)) return false;
    } catch (...) {
      ++*line_no_out;  // as below: decoding the lines after those parsed
      throw;
    }
    b->last_unterminated = src.last_line_unterminated();
    return true;
  };
  struct Joiner {  // stops and joins the producer on every exit path
    std::thread& t;
    BlockQueue& q;
    ~Joiner() {
      q.Cancel();
      if (t.joinable()) t.join();
    }
  } joiner{producer, queue};

  bool saw_header = false;
  size_t& line_no = *line_no_out;
  ReadInfo local;
  Block block;
  bool stopped = false;
  bool reserved = false;
  uint64_t consumed = 0, estimate = 0;
  while (!stopped && next_block(&block)) {
    size_t pos = 0;
    while (pos < block.text.size()) {
      size_t nl = block.text.find('\n', pos);
      const bool unterminated = nl == std::string::npos;
      if (unterminated) nl = block.text.size();
      const std::string_view line(block.text.data() + pos, nl - pos);
      pos = nl + 1;
      ++line_no;
      // Built only for an error message.
      auto where = [&] {
        return QuotePath(src.name()) + ": line " + std::to_string(line_no) + ": ";
      };
      if (line.size() > kMaxLineBytes) return LongLine(line, where());
      JsonCursor cursor(line);
      try {
        if (!saw_header) {
          builder.Header(cursor);
          saw_header = true;
        } else {
          builder.Record(cursor);
        }
        cursor.ExpectEnd();
      } catch (const JsonError& e) {
        if (unterminated && saw_header) {
          if (options.partial) {
            local.stopped_early = true;
            local.stopped_at_line = line_no;
            stopped = true;
            break;
          }
          return Status::Error(
              where() +
              "the last record is cut off (the trace was truncated; use --partial to analyze up to "
              "the last complete record)");
        }
        return Status::Error(where() + "not valid JSON (column " + std::to_string(e.column) + ": " +
                             e.what + ")");
      } catch (const RecordError& e) {
        return Status::Error(where() + e.what());
      }
    }
    consumed += block.text.size();
    // After each block, keep the arrays sized for the whole file.
    if (!reserved) {
      reserved = true;
      estimate = src.EstimatedSize();
    }
    if (estimate > consumed && consumed > 0)
      builder.ReserveFor(static_cast<double>(estimate) / static_cast<double>(consumed));
    if (options.progress != nullptr) {
      options.progress->done.store(consumed, std::memory_order_relaxed);
      options.progress->total.store(estimate, std::memory_order_relaxed);
    }
    if (threaded) queue.Recycle(std::move(block.text));
  }
  queue.Cancel();
  if (producer.joinable()) producer.join();
  if (queue.error()) {
    ++line_no;  // the producer failed decoding the lines after those parsed
    std::rethrow_exception(queue.error());
  }
  const Status& input = threaded ? queue.status() : src.status();
  if (!stopped && !input.ok()) {
    if (options.partial && saw_header && input.message().find("truncated") != std::string::npos) {
      local.stopped_early = true;
      local.stopped_at_line = line_no + 1;
    } else {
      return input;
    }
  }
  if (!saw_header)
    return Status::Error(QuotePath(src.name()) + ": empty file (no memtl trace header)");
  builder.FinishImpls();
  trace.Finish();
  if (!trace.header.has_ids) {
    const PartialTensorCounts partial = ResolvePartialTensors(trace);
    local.python_tensors_resolved = partial.resolved;
    local.python_tensors_dropped = partial.dropped;
  }
  local.lines = line_no;
  if (info != nullptr) *info = local;
  return trace;
}

// Memory that runs out on either thread, while decoding or while building
// the trace, ends the read with one line, as any other bad input does.
Expected<Trace> ReadFrom(LineSource& src, std::string head, const ReadOptions& options,
                         ReadInfo* info, bool threaded) {
  size_t line_no = 0;
  try {
    return ReadBlocks(src, std::move(head), options, info, threaded, &line_no);
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  // The trace built so far is gone, so building the message can allocate.
  return Status::Error(QuotePath(src.name()) + ": line " + std::to_string(line_no) +
                       ": out of memory");
}

}  // namespace

Expected<Trace> ReadTraceFile(const std::string& path, const ReadOptions& options, ReadInfo* info) {
  auto src = LineSource::Open(path);
  if (!src.ok()) return src.status();
  return ReadFrom(*src.value(), "", options, info, options.threaded);
}

Expected<Trace> ReadTraceInput(OpenedInput input, const ReadOptions& options, ReadInfo* info) {
  if (!options.et_path.empty())
    return Status::Error(QuotePath(input.src->name()) +
                         ": --et goes with a Kineto trace; a memtl trace has its tensors already");
  return ReadFrom(*input.src, std::move(input.head), options, info, options.threaded);
}

Expected<Trace> ReadTraceString(std::string data, const std::string& name,
                                const ReadOptions& options, ReadInfo* info) {
  auto src = LineSource::FromMemory(std::move(data), name);
  return ReadFrom(*src, "", options, info, false);
}

}  // namespace memtl

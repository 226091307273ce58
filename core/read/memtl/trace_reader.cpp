// The read loop: lines from blocks (block_queue.h) to the record builder
// (record_builder.h), with the errors of a whole read: cut-off last records,
// over-long lines, the input's own status, memory that runs out.
//
// Inflating and parsing overlap: a reader thread decompresses and cuts the
// input into blocks of whole lines. The calling thread parses the header's
// block; then parse workers (parse_pool.h) parse the following blocks at
// once, each on its own with ids local to it, and the calling thread
// appends them in file order (Builder::Append, read_merge.cpp), renumbering
// strings, devices, indices and TensorImpls as reading in order does. A
// block whose parse failed, or whose append depends on what its worker
// could not know (the index of its first record, a limit on a total), is
// parsed again here, in order, before any later block: so the trace, the
// error that wins (the first in the file) and its line are the same for
// any number of threads, and `--threads 1` reads every block here.
#include "core/read/memtl/trace_reader.h"

#include <algorithm>
#include <memory>
#include <new>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <thread>

#include "core/model/quote.h"
#include "core/read/common/format.h"
#include "core/read/common/json_cursor.h"
#include "core/read/common/line_source.h"
#include "core/read/memtl/block_queue.h"
#include "core/read/memtl/parse_pool.h"
#include "core/read/memtl/partial_tensors.h"
#include "core/read/memtl/record_builder.h"

namespace memtl {

namespace {

using read::Block;
using read::BlockQueue;
using read::Builder;
using read::Chunk;
using read::kBlock;
using read::kBlockCapacity;
using read::ParsePool;
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

// The state of one read that parsing a block in file order advances.
struct InOrder {
  LineSource& src;
  const ReadOptions& options;
  Builder& builder;
  size_t& line_no;
  ReadInfo& info;
  bool saw_header = false;
  bool stopped = false;  // --partial dropped the cut-off last record
};

// Parses the lines of `text` (whole lines, the last maybe unterminated) on
// this thread, in order: the header, then records. An error ends the read.
Status ParseInOrder(std::string_view text, InOrder& r) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    const bool unterminated = nl == std::string::npos;
    if (unterminated) nl = text.size();
    const std::string_view line(text.data() + pos, nl - pos);
    pos = nl + 1;
    ++r.line_no;
    // Built only for an error message.
    auto where = [&] {
      return QuotePath(r.src.name()) + ": line " + std::to_string(r.line_no) + ": ";
    };
    if (line.size() > kMaxLineBytes) return LongLine(line, where());
    JsonCursor cursor(line);
    try {
      if (!r.saw_header) {
        r.builder.Header(cursor);
        r.saw_header = true;
      } else {
        r.builder.Record(cursor);
      }
      cursor.ExpectEnd();
    } catch (const JsonError& e) {
      if (unterminated && r.saw_header) {
        if (r.options.partial) {
          r.info.stopped_early = true;
          r.info.stopped_at_line = r.line_no;
          r.stopped = true;
          return Status();
        }
        return Status::Error(
            where() +
            "the last record is cut off (the trace was truncated; use --partial to analyze up to "
            "the last complete record)");
      }
      // A first line that is no JSON: some other file.
      return Status::Error(
          r.saw_header ? StatusCode::kBadInput : StatusCode::kNotThisFormat,
          where() + "not valid JSON (column " + std::to_string(e.column) + ": " + e.what + ")");
    } catch (const RecordError& e) {
      return Status::Error(e.not_a_trace ? StatusCode::kNotThisFormat : StatusCode::kBadInput,
                           where() + e.what());
    }
  }
  return Status();
}

// Parse workers for a threaded read: ReadOptions::parse_threads, or by the
// machine's cores.
size_t ParseWorkers(const ReadOptions& options) {
  if (options.parse_threads > 0) return options.parse_threads;
  return std::clamp<size_t>(std::thread::hardware_concurrency(), 2, 4);
}

// `threaded`: inflate on a reader thread while this one parses (files); an
// in-memory input is read here, a block at a time (tests, fuzzers). Once
// the header is read, a threaded read without shapes parses on workers
// (parse_pool.h) and appends their blocks here in order.
// `head`: whole lines already read from `src` (format detection), parsed
// first. `*line_no_out` counts the lines parsed, for ReadFrom's message
// when memory runs out.
Expected<Trace> ReadBlocks(LineSource& src, std::string head, const ReadOptions& options,
                           ReadInfo* info, bool threaded, size_t* line_no_out) {
  Trace trace;
  Builder builder(&trace, options.keep_shapes);
  // Blocks for workers are sized by the trace (WorkerBlock).
  const bool want_pool = threaded && !options.keep_shapes;
  const size_t block_bytes = options.block_bytes > 0 ? options.block_bytes : kBlock;
  const bool worker_blocks = want_pool && options.block_bytes == 0;
  BlockQueue queue(threaded);
  std::thread producer;
  if (threaded) {
    try {
      producer = std::thread([&] { Produce(src, queue, block_bytes, worker_blocks); });
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
      if (!src.ReadLines(&b->text, block_bytes)) return false;
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

  ReadInfo local;
  InOrder in_order{src, options, builder, *line_no_out, local};
  bool reserved = false;
  uint64_t consumed = 0, estimate = 0;
  // After each block, keep the arrays sized for the whole file.
  auto after_block = [&](size_t bytes) {
    consumed += bytes;
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
  };
  // The header's block here, and every block where there are no workers.
  std::unique_ptr<ParsePool> pool;
  bool pool_next = want_pool;
  Block block;
  while (!in_order.stopped && pool == nullptr && next_block(&block)) {
    if (Status s = ParseInOrder(block.text, in_order); !s.ok()) return s;
    after_block(block.text.size());
    if (threaded) queue.Recycle(std::move(block.text));
    if (pool_next && in_order.saw_header) {
      pool_next = false;
      // A small trace is read here (WorkersFor); tests ask for workers.
      if (options.parse_threads == 0 && !read::WorkersFor(estimate)) continue;
      const size_t workers = ParseWorkers(options);
      try {
        pool = std::make_unique<ParsePool>(queue, workers, trace.header.has_ids);
        queue.set_spares(ParsePool::Window(workers) + 2);
      } catch (const std::system_error&) {
        // no threads to be had: read on here
      }
    }
  }
  if (pool != nullptr) {
    std::unique_ptr<Chunk> chunk;
    while (!in_order.stopped && pool->Next(&chunk)) {
      if (chunk->ok && builder.Append(chunk->part, chunk->extras)) {
        *line_no_out += chunk->lines;
      } else if (Status s = ParseInOrder(chunk->block.text, in_order); !s.ok()) {
        return s;
      }
      after_block(chunk->block.text.size());
      queue.Recycle(std::move(chunk->block.text));
      pool->Done(std::move(chunk));  // its records are the trace's now
    }
    pool.reset();
  }
  size_t& line_no = *line_no_out;
  const bool stopped = in_order.stopped;
  const bool saw_header = in_order.saw_header;
  queue.Cancel();
  if (producer.joinable()) producer.join();
  if (queue.error()) {
    ++line_no;  // the producer failed decoding the lines after those parsed
    std::rethrow_exception(queue.error());
  }
  const Status& input = threaded ? queue.status() : src.status();
  if (!stopped && !input.ok()) {
    if (options.partial && saw_header && input.code() == StatusCode::kTruncated) {
      local.stopped_early = true;
      local.stopped_at_line = line_no + 1;
    } else {
      return input;
    }
  }
  if (!saw_header)
    return Status::Error(StatusCode::kNotThisFormat,
                         QuotePath(src.name()) + ": empty file (no memtl trace header)");
  builder.FinishImpls();
  trace.Finish();
  if (!trace.header.model.empty() && read::NameModelParams(trace) == 0 && local.note.empty()) {
    local.note = QuotePath(src.name()) +
                 ": the model in the header has no parameter in the profile (no module or "
                 "optimizer reports a tensor at its parameters' storage): is it the model "
                 "that was profiled?";
  }
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
  return Status::Error(StatusCode::kOutOfMemory, QuotePath(src.name()) + ": line " +
                                                     std::to_string(line_no) + ": out of memory");
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
  return ReadFrom(*src, "", options, info, options.parse_threads > 0);
}

}  // namespace memtl

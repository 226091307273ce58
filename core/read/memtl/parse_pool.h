// Parse workers: the blocks after the header's are parsed on several
// threads at once, each on its own (record_builder.h, chunk mode), and
// handed to the reading thread in file order, which appends them to the
// trace (Builder::Append) or, where a block's parse failed or the append
// cannot be sure of its result, reads that block's lines again itself. So
// the trace, and the first error in file order with its line, are those of
// reading every line in order on one thread, whatever the number of
// workers (trace_reader.cpp).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/model/trace.h"
#include "core/read/memtl/block_queue.h"
#include "core/read/memtl/record_builder.h"

namespace memtl::read {

// One block of lines and what a worker made of it.
struct Chunk {
  Block block;
  size_t lines = 0;  // lines in the block
  // Every line parsed into `part` without an error; false: read the block
  // in order instead (its error is reported there, with its line).
  bool ok = false;
  Trace part;  // the block's records, ids local to it (Builder::Append)
  ChunkExtras extras;

  // Empties it for the next block, keeping its arrays' room: a block's
  // records grown from nothing cost a few hundred allocations.
  void Clear();
};

// Parses every line of chunk->block as records (the header was read on
// the reading thread: `has_ids` is its "ids").
void ParseChunk(Chunk* chunk, bool has_ids);

class ParsePool {
 public:
  // Starts `workers` threads taking blocks from `queue` in order. Throws
  // std::system_error where no thread can be had (then none runs).
  ParsePool(BlockQueue& queue, size_t workers, bool has_ids);
  ~ParsePool();  // cancels the queue and joins the workers
  ParsePool(const ParsePool&) = delete;
  ParsePool& operator=(const ParsePool&) = delete;

  // The next block in file order, parsed; false once the queue's blocks
  // are all handed out. Rethrows what a worker could not recover from
  // (memory to hold a block). Each block taken is given back with Done()
  // before the next is asked for, for a worker to use again.
  bool Next(std::unique_ptr<Chunk>* chunk);
  // Blocks taken from the queue but not yet Done: one being appended and
  // one being parsed by each worker. Each holds its text and its records
  // (about half the text's size) resident, so workers do not run further
  // ahead: appending a block takes a tenth of parsing it.
  static size_t Window(size_t workers) { return workers + 1; }
  void Done(std::unique_ptr<Chunk> chunk);

 private:
  void Work();
  void Stop();

  BlockQueue& queue_;
  const bool has_ids_;
  const size_t window_;  // Window(workers)
  std::mutex take_mu_;   // taking a block from the queue and numbering it
  size_t next_take_ = 0;
  std::mutex mu_;
  std::condition_variable ready_, space_;
  std::vector<std::unique_ptr<Chunk>> slots_;  // by block number % window_
  std::vector<std::unique_ptr<Chunk>> free_;   // given back, to be used again
  size_t next_ = 0;                            // the block Next() gives
  size_t end_ = SIZE_MAX;                      // the number of blocks, once known
  bool stop_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> threads_;
};

}  // namespace memtl::read

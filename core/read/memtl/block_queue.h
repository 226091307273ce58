// Blocks of whole lines: a reader thread inflates the trace and cuts it
// into blocks, which the calling thread or the parse workers take in order
// (trace_reader.cpp, parse_pool.h).
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include "core/model/status.h"
#include "core/read/common/line_source.h"

namespace memtl::read {

// Bytes of whole lines per block. Reading on one thread, three blocks are
// alive at a time (one parsed, one queued, one being filled); the parse
// workers hold a few more (ParsePool). So this sets the read's buffer
// memory; blocks of 512 KiB, four queued, were 3.4 MB of a 10^5-event
// read's 12 MB peak, and 128 KiB blocks read as fast (docs/performance.md).
inline constexpr size_t kBlock = 128 << 10;
// Parse workers (ParsePool) read a trace whose decoded size is expected to
// be at least this, or is not known (a pipe): below it the read takes a
// tenth of a second or less, and the blocks and records the workers hold
// at once would be memory that shows (at 10^5 events, 24 MB, 0.4 MiB of a
// 9 MiB peak).
inline constexpr uint64_t kWorkersFrom = uint64_t{64} << 20;
inline bool WorkersFor(uint64_t expected_bytes) {
  return expected_bytes == 0 || expected_bytes >= kWorkersFrom;
}
// Bytes per block where workers take them, by the trace's expected decoded
// size: each block costs a hand-over between threads (three wakeups), so
// large traces take large blocks, but more blocks are alive at once, each
// with the records parsed from it. A 1/1024 of the trace, from 64 to 256
// KiB (docs/performance.md, issue 19 item 6, has the figures).
inline constexpr size_t kWorkerBlockMax = 256 << 10;
inline size_t WorkerBlock(uint64_t expected_bytes) {
  return static_cast<size_t>(
      std::clamp<uint64_t>(expected_bytes / 1024, 64 << 10, kWorkerBlockMax));
}
// A block's buffer is reserved once for a block plus a long last line
// (LineSource decodes a few KiB past kBlock), so that it is not regrown by
// doubling, and is at least malloc's mmap threshold (cli/memtl.cpp) so that
// it is unmapped when freed instead of staying in the reader thread's
// arena. Only what is written is resident.
inline constexpr size_t kBlockCapacity = kBlock + (128 << 10);
inline size_t BlockCapacity(size_t block_bytes) {
  return std::max(kBlockCapacity, block_bytes + (128 << 10));
}

// Blocks of whole lines, produced by a reader thread (inflate + cut) and
// consumed in order by the parsing thread.
struct Block {
  std::string text;  // whole lines, each ending in '\n' except maybe the last
  bool last_unterminated = false;
};

class BlockQueue {
 public:
  explicit BlockQueue(bool bounded) : bounded_(bounded) {}
  // How many buffers of consumed blocks to keep for the producer: one for
  // each block that can be alive at once, beyond those of the queue.
  void set_spares(size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    max_spares_ = n;
  }
  void Push(Block b) {
    std::unique_lock<std::mutex> lock(mu_);
    not_full_.wait(lock, [&] { return !bounded_ || q_.size() < kMax || cancelled_; });
    if (cancelled_) return;
    q_.push_back(std::move(b));
    not_empty_.notify_one();
  }
  void Close(Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    status_ = std::move(status);
    not_empty_.notify_all();
  }
  // Ends the input with an exception the producer caught, rethrown by
  // the parsing thread (an exception must not leave a thread: it would end
  // the process). Allocates nothing, since it may follow a bad_alloc.
  void Fail(std::exception_ptr error) {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    error_ = std::move(error);
    not_empty_.notify_all();
  }
  const std::exception_ptr& error() const { return error_; }
  void Cancel() {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    not_full_.notify_all();
  }
  bool Cancelled() {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_;
  }
  // False at the end; then status() tells whether the input was good.
  bool Pop(Block* b) {
    std::unique_lock<std::mutex> lock(mu_);
    not_empty_.wait(lock, [&] { return !q_.empty() || closed_; });
    if (q_.empty()) return false;
    *b = std::move(q_.front());
    q_.pop_front();
    not_full_.notify_one();
    return true;
  }
  const Status& status() const { return status_; }
  // Buffers of consumed blocks go back to the producer, so that the blocks
  // of a run reuse a few buffers instead of touching fresh memory.
  void Recycle(std::string text) {
    // A buffer that held a long line is freed: kept, it would stay resident
    // for the rest of the read.
    if (text.capacity() > 2 * BlockCapacity(kWorkerBlockMax)) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (spare_.size() < max_spares_) spare_.push_back(std::move(text));
  }
  std::string Spare() {
    std::lock_guard<std::mutex> lock(mu_);
    if (spare_.empty()) return std::string();
    std::string s = std::move(spare_.back());
    spare_.pop_back();
    s.clear();
    return s;
  }

 private:
  // Blocks waiting for the parser. One is enough to keep both threads busy
  // (the parser takes the next block as soon as it finishes one, and
  // inflating a block takes about as long as parsing it); each one more
  // keeps a block's memory resident for no gain in speed.
  static constexpr size_t kMax = 1;
  const bool bounded_;
  std::mutex mu_;
  std::condition_variable not_empty_, not_full_;
  std::deque<Block> q_;
  std::vector<std::string> spare_;
  size_t max_spares_ = kMax + 2;
  bool closed_ = false;
  bool cancelled_ = false;
  Status status_;
  std::exception_ptr error_;
};

// The reader thread's loop: blocks of at least `block_bytes` (the last one
// maybe less) from `src` into `queue` until the input ends, fails or the
// queue is cancelled. With `worker_blocks`, blocks after the first are of
// WorkerBlock(the input's estimated size) where workers will read them
// (WorkersFor).
void Produce(LineSource& src, BlockQueue& queue, size_t block_bytes = kBlock,
             bool worker_blocks = false);

}  // namespace memtl::read

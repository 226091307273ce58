#include "core/read/memtl/parse_pool.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "core/read/common/json_cursor.h"

namespace memtl::read {

void Chunk::Clear() {
  lines = 0;
  ok = false;
  // Every member a chunk-mode Builder writes.
  Trace& p = part;
  p.devices.clear();
  p.events.clear();
  p.ops.clear();
  p.allocs.clear();
  p.alloc_ptrs.clear();
  p.py_names.clear();
  p.py_lines.clear();
  p.py_links.clear();
  p.py_linked.clear();
  p.other_names.clear();
  p.modules.clear();
  p.optimizers.clear();
  p.params.clear();
  p.states.clear();
  p.arg_kinds.clear();
  p.arg_refs.clear();
  p.list_items.clear();
  p.tensors.clear();
  p.tensor_ptrs.clear();
  p.tensor_ids.clear();
  p.alloc_ids.clear();
  p.ops_without_end = p.ops_ending_before_start = p.events_before_parent = 0;
  p.schemas.clear();
  extras.names.Clear();
  extras.base = -1;
  extras.t0.clear();
  extras.impls.clear();
  extras.outer.clear();
}

void ParseChunk(Chunk* chunk, bool has_ids) {
  chunk->part.header.has_ids = has_ids;
  Builder builder(&chunk->part, &chunk->extras);
  const std::string& text = chunk->block.text;
  size_t pos = 0, lines = 0;
  // Any failure, an exception of memory included, leaves the block to be
  // read in order, which reports it at its line or reads past it.
  try {
    while (pos < text.size()) {
      size_t nl = text.find('\n', pos);
      if (nl == std::string::npos) nl = text.size();
      const std::string_view line(text.data() + pos, nl - pos);
      pos = nl + 1;
      ++lines;
      if (line.size() > kMaxLineBytes) return;
      JsonCursor cursor(line);
      builder.Record(cursor);
      cursor.ExpectEnd();
    }
  } catch (...) {
    return;
  }
  chunk->lines = lines;
  chunk->ok = true;
}

ParsePool::ParsePool(BlockQueue& queue, size_t workers, bool has_ids)
    : queue_(queue), has_ids_(has_ids), window_(Window(workers)), slots_(window_) {
  try {
    for (size_t i = 0; i < workers; ++i) threads_.emplace_back([this] { Work(); });
  } catch (...) {
    Stop();  // joins those started
    throw;
  }
}

ParsePool::~ParsePool() { Stop(); }

void ParsePool::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    space_.notify_all();
  }
  // A worker waiting for a block gets none: the reader thread stops and
  // ends the queue.
  queue_.Cancel();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

bool ParsePool::Next(std::unique_ptr<Chunk>* chunk) {
  std::unique_lock<std::mutex> lock(mu_);
  std::unique_ptr<Chunk>& slot = slots_[next_ % window_];
  ready_.wait(lock, [&] { return slot != nullptr || next_ >= end_; });
  if (slot != nullptr) {
    *chunk = std::move(slot);
    return true;
  }
  if (error_) std::rethrow_exception(error_);
  return false;
}

void ParsePool::Done(std::unique_ptr<Chunk> chunk) {
  std::lock_guard<std::mutex> lock(mu_);
  ++next_;
  // At most one a worker may wait for (the window): a chunk's room is a
  // block's records, resident.
  if (free_.size() < window_) free_.push_back(std::move(chunk));
  space_.notify_all();
}

void ParsePool::Work() {
  for (;;) {
    std::unique_ptr<Chunk> chunk;
    size_t n = 0;
    {
      // Blocks are taken and numbered one worker at a time, so that their
      // numbers are their order in the file.
      std::lock_guard<std::mutex> take(take_mu_);
      {
        std::unique_lock<std::mutex> lock(mu_);
        space_.wait(lock, [&] { return stop_ || next_take_ < next_ + window_; });
        if (stop_) return;
        if (!free_.empty()) {
          chunk = std::move(free_.back());
          free_.pop_back();
        }
      }
      bool more = false;
      try {
        if (chunk != nullptr) {
          chunk->Clear();
        } else {
          chunk = std::make_unique<Chunk>();
        }
        more = queue_.Pop(&chunk->block);
      } catch (...) {
        // No memory for the chunk: the blocks taken so far are handed out,
        // then Next() reports it. Nothing here allocates.
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_) error_ = std::current_exception();
      }
      if (!more) {
        std::lock_guard<std::mutex> lock(mu_);
        end_ = std::min(end_, next_take_);
        ready_.notify_all();
        return;
      }
      n = next_take_++;
    }
    ParseChunk(chunk.get(), has_ids_);
    std::lock_guard<std::mutex> lock(mu_);
    slots_[n % window_] = std::move(chunk);
    ready_.notify_all();
  }
}

}  // namespace memtl::read

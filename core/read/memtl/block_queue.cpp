#include "core/read/memtl/block_queue.h"

#include <algorithm>
#include <utility>

namespace memtl::read {

void Produce(LineSource& src, BlockQueue& queue, size_t block_bytes, bool worker_blocks) {
  try {
    for (bool first = true;; first = false) {
      Block block;
      block.text = queue.Spare();
      block.text.reserve(BlockCapacity(block_bytes));
      if (!src.ReadLines(&block.text, block_bytes)) break;
      block.last_unterminated = src.last_line_unterminated();
      // The size is known once reading has begun.
      if (first && worker_blocks && WorkersFor(src.EstimatedSize()))
        block_bytes = WorkerBlock(src.EstimatedSize());
      queue.Push(std::move(block));
      if (queue.Cancelled()) return queue.Close(Status());
    }
    queue.Close(src.status());
  } catch (...) {
    queue.Fail(std::current_exception());
  }
}

}  // namespace memtl::read

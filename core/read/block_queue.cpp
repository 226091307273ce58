#include "core/read/block_queue.h"

#include <utility>

namespace memtl::read {

void Produce(LineSource& src, BlockQueue& queue) {
  try {
    for (;;) {
      Block block;
      block.text = queue.Spare();
      block.text.reserve(kBlockCapacity);
      if (!src.ReadLines(&block.text, kBlock)) break;
      block.last_unterminated = src.last_line_unterminated();
      queue.Push(std::move(block));
      if (queue.Cancelled()) return queue.Close(Status());
    }
    queue.Close(src.status());
  } catch (...) {
    queue.Fail(std::current_exception());
  }
}

}  // namespace memtl::read

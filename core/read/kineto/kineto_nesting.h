// A Kineto trace's events nested by time (kineto_reader.cpp's Nest): what
// the reader and the split of the memory from before the profile
// (kineto_pre_profile.h) both walk.
#pragma once

#include <cstdint>
#include <vector>

namespace memtl::read {

// Per event (by position in `order`), its parent's position, and the root
// subtrees as ranges of `order`. A parent's position is below its
// children's, so one pass in position order sees every parent first.
struct Nesting {
  std::vector<uint32_t> order;   // event indices: by thread, then pre-order
  std::vector<uint32_t> parent;  // per position: the parent's position, or kNone32
  struct Root {
    uint32_t begin, end;
    int64_t ts;
  };
  std::vector<Root> roots;  // in start-time order (ties: thread order)
};

}  // namespace memtl::read

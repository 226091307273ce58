// Every event's start time, in 4 bytes an event (Trace::event_t0).
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace memtl {

// Every event's start time in nanoseconds (allocations: their time), in 4
// bytes an event instead of 8. Events come in pre-order, so the times of
// neighbouring events are close: each block of kBlock events stores its
// first event's time in full and every event's offset from it in 32 bits.
// An offset that does not fit (events more than 2.1 s apart within one
// block, or out of order by as much) is kept in full in a side list, which
// a real trace leaves nearly empty. operator[] is a load and an add.
class StartTimes {
 public:
  static constexpr uint32_t kBlockShift = 10;  // 1024 events per block
  static constexpr int32_t kFar = INT32_MIN;   // the time is in far_

  int64_t operator[](uint32_t i) const {
    const int32_t r = rel_[i];
    if (r == kFar) return Far(i);
    // Modulo 2^64, as push_back subtracted: exact for any int64 time.
    return static_cast<int64_t>(static_cast<uint64_t>(base_[i >> kBlockShift]) +
                                static_cast<uint64_t>(int64_t{r}));
  }
  void push_back(int64_t t0);
  size_t size() const { return rel_.size(); }
  bool empty() const { return rel_.empty(); }
  size_t capacity() const { return rel_.capacity(); }
  void reserve(size_t n) { rel_.reserve(n); }
  size_t num_far() const { return far_.size(); }

 private:
  int64_t Far(uint32_t i) const;
  std::vector<int32_t> rel_;
  std::vector<int64_t> base_;                      // per block
  std::vector<std::pair<uint32_t, int64_t>> far_;  // (event, time), by event
};

}  // namespace memtl

// The wall time, peak resident memory and page faults of each stage of a
// run (PhaseTimer), for --timings and the benchmarks, and the process's
// counters it reads.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace memtl {

// Peak resident memory of the process so far, in bytes (0 if unknown).
int64_t PeakRssBytes();
// Resident memory of the process now, in bytes (0 if unknown).
int64_t RssBytes();
// Minor page faults of the process so far: first touches of memory, each
// mapping a 4 KiB page (or a 2 MiB one where the kernel uses huge pages on
// its own). Their cost is the cost of fresh memory.
int64_t MinorFaults();

// Wall time of each stage, in run order, and the process's peak resident
// memory when it ended, for --timings and benchmarks.
class PhaseTimer {
 public:
  struct Phase {
    const char* name;
    double seconds;
    int64_t peak_rss;
    int64_t rss;           // when the phase ended
    int64_t minor_faults;  // during this phase
  };
  void Start() {
    last_ = std::chrono::steady_clock::now();
    last_faults_ = MinorFaults();
  }
  void Mark(const char* phase) {
    const auto now = std::chrono::steady_clock::now();
    const int64_t faults = MinorFaults();
    phases_.push_back({phase, std::chrono::duration<double>(now - last_).count(), PeakRssBytes(),
                       RssBytes(), faults - last_faults_});
    last_ = now;
    last_faults_ = faults;
  }
  const std::vector<Phase>& phases() const { return phases_; }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  int64_t last_faults_ = MinorFaults();
  std::vector<Phase> phases_;
};

// The --timings lines: one per phase, then the total (wall time summed,
// the largest peak, the faults summed).
std::string FormatTimings(const PhaseTimer& timer);

}  // namespace memtl

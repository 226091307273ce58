// The wall time, CPU time, peak resident memory and page faults of each stage of a
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
// User and system CPU time of the process so far, all its threads, in
// seconds: beside a stage's wall time, how many cores it kept busy.
double CpuSeconds();

// Wall and CPU time of each stage, in run order, and the process's peak
// resident memory when it ended, for --timings and benchmarks.
class PhaseTimer {
 public:
  struct Phase {
    const char* name;
    double seconds;
    double cpu_seconds;  // every thread's, during this phase
    int64_t peak_rss;
    int64_t rss;           // when the phase ended
    int64_t minor_faults;  // during this phase
  };
  void Start() {
    last_ = std::chrono::steady_clock::now();
    last_faults_ = MinorFaults();
    last_cpu_ = CpuSeconds();
  }
  void Mark(const char* phase) {
    const auto now = std::chrono::steady_clock::now();
    const int64_t faults = MinorFaults();
    const double cpu = CpuSeconds();
    phases_.push_back({phase, std::chrono::duration<double>(now - last_).count(), cpu - last_cpu_,
                       PeakRssBytes(), RssBytes(), faults - last_faults_});
    last_ = now;
    last_faults_ = faults;
    last_cpu_ = cpu;
  }
  const std::vector<Phase>& phases() const { return phases_; }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  int64_t last_faults_ = MinorFaults();
  double last_cpu_ = CpuSeconds();
  std::vector<Phase> phases_;
};

// The --timings lines: one per phase, then the total (wall and CPU time
// summed, the largest peak, the faults summed).
std::string FormatTimings(const PhaseTimer& timer);

}  // namespace memtl

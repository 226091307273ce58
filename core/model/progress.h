// How far a long run is, for the progress line the command shows on a
// terminal (cli/progress_line.h): stages write it, a reporter thread reads it.
// Relaxed atomics: a line a tenth of a second stale is fine, and the
// writers (one store per block of trace read) pay nothing measurable.
#pragma once

#include <atomic>
#include <cstdint>

namespace memtl {

struct Progress {
  // What the run is doing now: a string literal ("reading", "analyzing",
  // "writing"), never freed.
  std::atomic<const char*> stage{"reading"};
  // Bytes of decoded trace read so far, and the size the reader expects
  // (0: unknown, as for a pipe).
  std::atomic<uint64_t> done{0};
  std::atomic<uint64_t> total{0};

  void Set(const char* now) { stage.store(now, std::memory_order_relaxed); }
};

}  // namespace memtl

// The progress line: on a terminal, once a run has taken more than a
// second, one line on stderr says what memtl is doing and, while it reads,
// how much of the trace it has read. It is redrawn in place a few times a
// second and erased before anything else is printed, so the messages and
// the result line stay as they are without a terminal.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "core/model/progress.h"

namespace memtl {

class ProgressLine {
 public:
  // Shows `progress` for the trace `name` when `enabled` and stderr is a
  // terminal; otherwise does nothing.
  ProgressLine(const Progress* progress, std::string name, bool enabled);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // Erases the line if it is shown; it is drawn again at the next tick.
  // Call before writing anything else to stderr.
  void Clear();
  // Erases the line and stops showing it.
  void Stop();

 private:
  void Run();
  std::string Text() const;

  const Progress* progress_;
  std::string name_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool shown_ = false;
  std::thread thread_;
};

}  // namespace memtl

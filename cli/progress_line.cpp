#include "cli/progress_line.h"

#include <cstdio>
#include <system_error>
#include <utility>

#include <unistd.h>

namespace memtl {

namespace {
// Shorter work needs no line; then it is redrawn this often.
constexpr auto kDelay = std::chrono::seconds(1);
constexpr auto kTick = std::chrono::milliseconds(200);
// Erase the line: back to its start, then clear to its end.
constexpr const char kErase[] = "\r\033[K";
}  // namespace

ProgressLine::ProgressLine(const Progress* progress, std::string name, bool enabled)
    : progress_(progress), name_(std::move(name)), start_(std::chrono::steady_clock::now()) {
  if (!enabled || progress_ == nullptr || isatty(STDERR_FILENO) != 1) return;
  try {
    thread_ = std::thread([this] { Run(); });
  } catch (const std::system_error&) {
    // No thread to be had: no progress line, the run goes on.
  }
}

ProgressLine::~ProgressLine() { Stop(); }

void ProgressLine::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  if (shown_) std::fputs(kErase, stderr);
  shown_ = false;
}

void ProgressLine::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    if (shown_) std::fputs(kErase, stderr);
    shown_ = false;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string ProgressLine::Text() const {
  const char* stage = progress_->stage.load(std::memory_order_relaxed);
  std::string text = std::string("memtl: ") + stage + " " + name_;
  if (std::string(stage) == "analyzing ranks") {
    char count[64];
    std::snprintf(
        count, sizeof count, ": %llu of %llu traces",
        static_cast<unsigned long long>(progress_->done.load(std::memory_order_relaxed)),
        static_cast<unsigned long long>(progress_->total.load(std::memory_order_relaxed)));
    return std::string("memtl: analyzing ranks") + count;
  }
  if (std::string(stage) != "reading") return text + " ...";
  const uint64_t done = progress_->done.load(std::memory_order_relaxed);
  const uint64_t total = progress_->total.load(std::memory_order_relaxed);
  char buf[96];
  if (total > 0 && done <= total) {
    std::snprintf(buf, sizeof buf, " %3.0f%% (%.0f of %.0f MB)",
                  100.0 * static_cast<double>(done) / static_cast<double>(total),
                  static_cast<double>(done) / 1e6, static_cast<double>(total) / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, " (%.0f MB)", static_cast<double>(done) / 1e6);
  }
  return text + buf;
}

void ProgressLine::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  if (wake_.wait_until(lock, start_ + kDelay, [this] { return stop_; })) return;
  while (!stop_) {
    const std::string line = std::string(kErase) + Text();
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
    shown_ = true;
    wake_.wait_for(lock, kTick, [this] { return stop_; });
  }
}

}  // namespace memtl

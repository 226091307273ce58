// The memtl command's progress line, messages and standard output
// (console.h).
#include "cli/console.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>

#include "cli/progress_line.h"
#include "core/model/quote.h"

namespace memtl::cli {

namespace {

Progress progress;
std::unique_ptr<ProgressLine> progress_line;

// Writes all of `text` to standard output, past stdio, so that the first
// failed write(2) gives its own errno (a full device, a closed descriptor),
// not a flag that fflush may no longer report once its buffer is empty.
int WriteStdout(const std::string& text) {
  const char* p = text.data();
  size_t n = text.size();
  while (n > 0) {
    const ssize_t w = ::write(STDOUT_FILENO, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return StdoutError(errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return 0;
}

// Closes standard output once a command has written all it writes there: a
// file system that reports write errors late (NFS, a quota) reports them
// here. A descriptor that was never open was reported by the write.
int CloseStdout() {
  if (::close(STDOUT_FILENO) != 0 && errno != EINTR && errno != EBADF) return StdoutError(errno);
  return 0;
}

}  // namespace

Progress& CommandProgress() { return progress; }

void ShowProgress(const std::string& name, bool enabled) {
  progress_line = std::make_unique<ProgressLine>(&progress, name, enabled);
}

void StopProgress() {
  if (progress_line) progress_line->Stop();
}

void ClearProgress() {
  if (progress_line) progress_line->Clear();
}

void PrintErrLine(const std::string& line) {
  ClearProgress();
  const std::string text = OneLine(line) + "\n";
  std::fwrite(text.data(), 1, text.size(), stderr);
}

int Fail(const std::string& message) {
  PrintErrLine("memtl: " + message);
  return 2;
}

void PrintNotes(const Diagnostics& diag) {
  for (const auto& [kind, entry] : diag.entries()) {
    PrintErrLine("memtl: note: " + kind + " (" + std::to_string(entry.count) + "x, e.g. " +
                 entry.example + ")");
  }
}

int StdoutError(int err) {
  if (err == EPIPE) return kStdoutGoneStatus;
  return Fail("standard output: cannot write: " + std::string(std::strerror(err)));
}

int Emit(const std::string& text) {
  if (int rc = WriteStdout(text); rc != 0) return rc;
  return CloseStdout();
}

int FlushHelp(int rc) {
  errno = 0;
  std::cout.flush();
  if (std::cout.fail()) return StdoutError(errno != 0 ? errno : EIO);
  return rc;
}

}  // namespace memtl::cli

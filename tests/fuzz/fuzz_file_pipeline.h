// What fuzz_kineto, fuzz_et, fuzz_raw and fuzz_snapshot run on an input: the pipeline as
// the CLI runs it on a file (AnalyzeAnyFile: the format decided by the
// bytes, the reader, the execution-trace join read from its own path, the
// inference of a Kineto trace's categories), then Categorize with the peak
// and the report's data, every dump and both JSON exports of every device;
// of a raw timeline, CategorizeForExport and the timeline's outputs. The input is handed over as a
// memfd, read through /proc/self/fd/N: the same path through OpenInput as a file on disk, without
// the disk.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "core/pipeline/analysis.h"
#include "core/read/common/format.h"
#include "tests/fuzz/fuzz_outputs.h"

namespace memtl_fuzz {

// A file in memory, rewritten for each input.
class MemFile {
 public:
  explicit MemFile(const char* name) : fd_(memfd_create(name, MFD_CLOEXEC)) {
    if (fd_ < 0) std::abort();
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  ~MemFile() { close(fd_); }
  // The path of a file that holds `data`.
  const std::string& Set(std::string_view data) {
    if (ftruncate(fd_, 0) != 0) std::abort();
    size_t done = 0;
    while (done < data.size()) {
      const ssize_t n =
          pwrite(fd_, data.data() + done, data.size() - done, static_cast<off_t>(done));
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
    return path_;
  }

 private:
  int fd_;
  std::string path_;
};

// The pipeline on the file at `path`; the error of the analysis, ok when
// it ran. A trace with no counted defect must not give a negative total in
// any row of any device, nor a negative peak (as fuzz_structured checks).
inline memtl::Status RunFilePipeline(const std::string& path, memtl::ReadOptions read) {
  read.threaded = false;  // one thread: a fuzzer's run is small, and its stack one stack
  auto file = memtl::AnalyzeAnyFile(path, read);
  if (!file.ok()) return file.status();
  memtl::PipelineOptions options;
  options.explain_peak = 5;
  options.report = true;
  if (auto* raw = std::get_if<std::unique_ptr<memtl::RawTimelineRead>>(&file.value())) {
    auto e = memtl::CategorizeForExport(std::move(*raw), options);
    if (!e.ok()) return e.status();
    RunTimelineOutputs(e.value()->view.trace, *e.value(), e.value()->view.diagnostics.empty());
    return {};
  }
  auto& analysis = std::get<std::unique_ptr<memtl::Analysis>>(file.value());
  (void)memtl::FormatDataFlow(analysis->trace, analysis->keys, *analysis->graph);
  auto c = memtl::Categorize(std::move(analysis), options);
  if (!c.ok()) return c.status();
  RunOutputs(*c.value());
  return {};
}

// The body of the targets of one format (fuzz_kineto, fuzz_raw,
// fuzz_snapshot): an input of at most 1 MiB whose bytes are `format`'s
// (the others are other targets') goes through RunFilePipeline as the file
// `file`, a third of them with --partial (a trace cut off is read up to the
// cut, or refused).
inline void RunInputOfFormat(const uint8_t* data, size_t size, memtl::InputFormat format,
                             MemFile& file) {
  if (size > (1u << 20)) return;
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (memtl::OpenInputFromMemory(text, "fuzz").format != format) return;
  memtl::ReadOptions options;
  options.partial = size % 3 == 0;
  (void)RunFilePipeline(file.Set(text), options);
}

}  // namespace memtl_fuzz

// What fuzz_kineto, fuzz_et and fuzz_raw run on an input: the pipeline as
// the CLI runs it on a file (AnalyzeFile: the format decided by the bytes,
// the reader, the execution-trace join read from its own path, the
// inference of a Kineto trace's categories, the raw timeline's analysis),
// then Categorize with the peak and the report's data, every dump and both
// JSON exports of every device. The input is handed over as a memfd, read
// through /proc/self/fd/N: the same path through OpenInput as a file on
// disk, without the disk.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include "core/explain/events.h"
#include "core/explain/peak.h"
#include "core/pipeline/analysis.h"
#include "core/timeline/timeline.h"
#include "export/export.h"

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

// The pipeline on the file at `path`; the error of the analysis, empty when
// it ran. A trace with no counted defect must not give a negative total in
// any row of any device, nor a negative peak (as fuzz_structured checks).
inline std::string RunFilePipeline(const std::string& path, memtl::ReadOptions read) {
  read.threaded = false;  // one thread: a fuzzer's run is small, and its stack one stack
  auto analysis = memtl::AnalyzeFile(path, read);
  if (!analysis.ok()) return analysis.status().message();
  (void)memtl::FormatDataFlow(analysis.value()->trace, analysis.value()->keys,
                              *analysis.value()->graph);
  memtl::PipelineOptions options;
  options.explain_peak = 5;
  options.report = true;
  auto c = memtl::Categorize(std::move(analysis.value()), options);
  if (!c.ok()) return c.status().message();
  const memtl::Categorized& cz = *c.value();
  const memtl::Analysis& a = *cz.analysis;
  const bool clean = a.diagnostics.empty();
  (void)memtl::FormatTimeline(a.trace, a.keys, cz.timeline, cz.categories);
  memtl::ExplainInput in{a.trace, a.keys, *a.tree, *a.graph, cz.categories, cz.timeline, cz.device};
  in.key_shapes = &a.key_shapes;
  if (cz.inferred) in.inferred = &a.inferred;
  for (const auto f :
       {memtl::EventsFormat::kText, memtl::EventsFormat::kTsv, memtl::EventsFormat::kJsonLines}) {
    (void)memtl::FormatEvents(in, f);
  }
  if (cz.peak) {
    if (cz.peak->bytes < 0 && clean) __builtin_trap();
    (void)memtl::FormatPeak(*cz.peak);
    (void)memtl::PeakJson(*cz.peak);
  }
  for (size_t d = 0; d < a.trace.devices.size(); ++d) {
    const auto device = static_cast<memtl::DeviceIndex>(d);
    if (memtl::FindPeak(cz.timeline, cz.categories, device).bytes < 0 && clean) __builtin_trap();
    const memtl::CoalescedTimeline rows = memtl::Coalesce(cz.timeline, cz.categories, device);
    for (const auto& sizes : rows.sizes) {
      int64_t total = 0;
      for (const int64_t b : sizes) total += b;
      if (total < 0 && clean) __builtin_trap();  // the live bytes below zero
    }
    (void)memtl::SizesJson(rows);
    (void)memtl::RawJson(cz.timeline, cz.categories, device);
  }
  return {};
}

}  // namespace memtl_fuzz

#include "cli/rank_traces.h"

#include <glob.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <filesystem>
#include <system_error>
#include <thread>
#include <utility>
#include <variant>

#include "core/model/quote.h"
#include "core/pipeline/analysis.h"

namespace memtl::cli {

namespace {

bool LooksLikeTrace(const std::string& name) {
  for (const char* suffix : {".json", ".json.gz", ".jsonl", ".jsonl.gz"}) {
    if (name.ends_with(suffix)) return true;
  }
  return false;
}

RankRow Analyze(const std::string& path) {
  PipelineOptions options;
  options.read.partial = true;    // a rank cut off is still a rank
  options.read.threaded = false;  // the ranks are the parallel work
  auto row = OutOfMemoryIsAnError(QuotePath(path), [&]() -> Expected<RankRow> {
    auto file = AnalyzeAnyFile(path, options.read);
    if (!file.ok()) return file.status();
    const ReadInfo info = ReadInfoOf(file.value());
    RankRow r;
    if (auto* raw = std::get_if<std::unique_ptr<RawTimelineRead>>(&file.value())) {
      auto e = CategorizeForExport(std::move(*raw), options);
      if (!e.ok()) return e.status();
      const Exportable& x = *e.value();
      r = RankOf(x.view.trace, x.timeline, x.categories, x.device, path);
    } else {
      auto c = Categorize(std::move(std::get<std::unique_ptr<Analysis>>(file.value())), options);
      if (!c.ok()) return c.status();
      const Categorized& cat = *c.value();
      // The steps are read from the trace's events.
      r = RankOf(cat.analysis->trace, cat.timeline, cat.categories, cat.device, path);
      r.inferred = cat.inferred;
    }
    r.truncated = info.stopped_early;
    r.analyzed_lines = info.stopped_early ? info.stopped_at_line - 1 : 0;
    return r;
  });
  if (row.ok()) return std::move(row.value());
  RankRow failed;
  failed.path = path;
  failed.rank = RankFromName(path);
  failed.error = row.status().message();
  return failed;
}

}  // namespace

Expected<std::vector<std::string>> RankTraces(const std::vector<std::string>& args) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  for (const std::string& arg : args) {
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      const size_t before = out.size();
      for (const auto& e : fs::directory_iterator(arg, ec)) {
        if (e.is_regular_file(ec) && LooksLikeTrace(e.path().filename().string()))
          out.push_back(e.path().string());
      }
      if (ec) return Status::Error(QuotePath(arg) + ": cannot list: " + ec.message());
      if (out.size() == before)
        return Status::Error(QuotePath(arg) + ": no trace in this directory");
      continue;
    }
    if (fs::exists(arg, ec) || arg.find_first_of("*?[") == std::string::npos) {
      out.push_back(arg);  // a file (a missing one fails when it is read)
      continue;
    }
    glob_t g{};
    const int rc = glob(arg.c_str(), 0, nullptr, &g);
    for (size_t i = 0; rc == 0 && i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
    globfree(&g);
    if (rc != 0) return Status::Error(QuotePath(arg) + ": no file matches this pattern");
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<RankRow> AnalyzeRanks(const std::vector<std::string>& paths, int jobs,
                                  Progress* progress) {
  std::vector<RankRow> rows(paths.size());
  std::atomic<size_t> next{0};
  if (progress != nullptr) {
    progress->total.store(paths.size(), std::memory_order_relaxed);
    progress->Set("analyzing ranks");
  }
  auto work = [&] {
    for (size_t i = next++; i < paths.size(); i = next++) {
      rows[i] = Analyze(paths[i]);
      if (progress != nullptr) progress->done.fetch_add(1, std::memory_order_relaxed);
    }
  };
  std::vector<std::jthread> workers;
  const size_t n = std::min<size_t>(static_cast<size_t>(std::max(jobs, 1)), paths.size());
  for (size_t w = 1; w < n; ++w) {
    try {
      workers.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // fewer threads to be had: the others do the work
    }
  }
  work();
  return rows;
}

}  // namespace memtl::cli

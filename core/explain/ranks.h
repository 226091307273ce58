// memtl ranks: the ranks of one distributed run side by side. Each rank's
// trace is analyzed on its own (the whole pipeline, on a core of its own);
// what is kept of it is one row: its peak and when, the categories at the
// peak, the ProfilerStep the peak falls in and a small curve of its total
// for the page. The rows together give the skew (the largest peak over the
// median) and the outlier ranks. docs/distributed.md.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/categories/category.h"
#include "core/model/status.h"
#include "core/model/trace.h"
#include "core/timeline/timeline.h"

namespace memtl {

struct RankRow {
  std::string path;
  int64_t rank = -1;        // the trace's, else from the file name (RankFromName), else -1
  int64_t world_size = -1;  // the trace's, else -1
  std::string run;          // the trace's run (TraceHeader::run), else empty
  // Why the rank has no numbers (the one-line error of its analysis), or
  // empty.
  std::string error;
  // The trace is cut off: the numbers are those of its complete records,
  // up to `analyzed_lines`.
  bool truncated = false;
  size_t analyzed_lines = 0;
  bool inferred = false;  // categories inferred (a Kineto trace read alone)
  std::string device;     // the device analyzed (the default: memtl peak's)
  int64_t peak_bytes = 0;
  int64_t peak_us = 0;               // from the rank's alignment point (align_us)
  std::array<int64_t, 8> at_peak{};  // by category, the export's order
  std::string step;                  // the ProfilerStep#N the peak falls in; empty: none
  // Where the rank's time starts for comparing ranks: its first
  // ProfilerStep's start, else its first row (PyTorch's microseconds).
  int64_t align_us = 0;
  // The device's total over time, at most kRankCurvePoints points (the
  // largest total of each span of time, so no peak is lost): microseconds
  // from align_us, bytes.
  std::vector<std::array<int64_t, 2>> curve;
};

inline constexpr size_t kRankCurvePoints = 400;

// The rank a file name gives: the digits after the last "rank" in its name
// (run.rank3.trace.jsonl.gz, rank_03, rank-3); -1 when there are none.
int64_t RankFromName(std::string_view path);

// One rank's row from its categorized timeline on `device` (the trace's
// header gives the rank, world size and run, and its op records the
// steps). The caller sets what the analysis knows besides: truncated,
// analyzed_lines, inferred.
RankRow RankOf(const Trace& trace, const std::vector<TimelineEvent>& timeline,
               const CategoryDict& categories, DeviceIndex device, const std::string& path);

struct RanksReport {
  std::vector<RankRow> rows;  // by rank, then path; those without numbers last
  int64_t median_peak = 0;    // of the ranks with numbers
  double skew = 0;            // the largest peak over the median (1: even)
  // Rows whose peak is more than kOutlierShare away from the median, by
  // index into `rows`; none with fewer than three ranks.
  std::vector<size_t> outliers;
};

inline constexpr double kOutlierShare = 0.10;

// The rows as one run's ranks: an error naming the files when two traces
// give one rank, when they give different world sizes, when they name
// different runs, or when a rank is not below the world size (each where
// the traces say it; rows that failed are left out of these checks).
Expected<RanksReport> CompareRanks(std::vector<RankRow> rows);

std::string FormatRanks(const RanksReport& r);
std::string RanksJson(const RanksReport& r);

}  // namespace memtl

// memtl ranks: one row per rank, and the rows compared (ranks.h).
#include "core/explain/ranks.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>

#include "core/explain/context.h"
#include "core/explain/peak.h"
#include "core/model/quote.h"

namespace memtl {

int64_t RankFromName(std::string_view path) {
  const size_t slash = path.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  for (size_t at = name.rfind("rank"); at != std::string_view::npos;
       at = at == 0 ? std::string_view::npos : name.rfind("rank", at - 1)) {
    size_t i = at + 4;
    if (i < name.size() && (name[i] == '_' || name[i] == '-' || name[i] == '.')) ++i;
    int64_t v = 0;
    size_t digits = 0;
    while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])) && digits < 9) {
      v = v * 10 + (name[i++] - '0');
      ++digits;
    }
    if (digits > 0) return v;
  }
  return -1;
}

RankRow RankOf(const Trace& trace, const std::vector<TimelineEvent>& timeline,
               const CategoryDict& categories, DeviceIndex device, const std::string& path) {
  RankRow r;
  r.path = path;
  r.rank = trace.header.rank >= 0 ? trace.header.rank : RankFromName(path);
  r.world_size = trace.header.world_size;
  r.run = trace.header.run;
  r.device = device < trace.devices.size() ? trace.devices[device].name : "cpu";
  const PeakReport peak = FindPeak(timeline, categories, device);
  const StepStarts steps = ProfilerSteps(trace);
  // The rows: their totals, for the curve and the alignment.
  std::vector<std::array<int64_t, 2>> rows;
  CoalescedRows(timeline, categories, device, [&](int64_t t, const std::array<int64_t, 9>& sizes) {
    int64_t total = 0;
    for (const int64_t b : sizes) total += b;
    rows.push_back({t, total});
  });
  r.align_us = !steps.empty() ? PyTrueDivTrunc1000(steps.front().first)
               : rows.empty() ? 0
                              : rows.front()[0];
  if (peak.any) {
    r.peak_bytes = peak.bytes;
    r.peak_us = peak.time_us - r.align_us;
    r.at_peak = peak.by_category;
    for (const auto& [t0, name] : steps) {
      if (PyTrueDivTrunc1000(t0) <= peak.time_us) r.step = name;
    }
  }
  // The curve: the largest total of each of kRankCurvePoints spans of the
  // rows (a row is a point when there are fewer).
  const size_t spans = std::min(rows.size(), kRankCurvePoints);
  for (size_t s = 0; s < spans; ++s) {
    const size_t begin = rows.size() * s / spans, end = rows.size() * (s + 1) / spans;
    const auto top = std::max_element(rows.begin() + static_cast<std::ptrdiff_t>(begin),
                                      rows.begin() + static_cast<std::ptrdiff_t>(end),
                                      [](const auto& a, const auto& b) { return a[1] < b[1]; });
    r.curve.push_back({(*top)[0] - r.align_us, (*top)[1]});
  }
  return r;
}

namespace {

// The files of `rows` at `indices`, quoted, for a one-line message.
std::string Files(const std::vector<RankRow>& rows, const std::vector<size_t>& indices) {
  std::string out;
  for (size_t i = 0; i < indices.size() && i < 4; ++i)
    out += (i ? ", " : "") + QuotePath(rows[indices[i]].path);
  if (indices.size() > 4) out += " and " + std::to_string(indices.size() - 4) + " more";
  return out;
}

}  // namespace

Expected<RanksReport> CompareRanks(std::vector<RankRow> rows) {
  // One run: the same rank twice, two world sizes or two runs are named.
  std::map<int64_t, std::vector<size_t>> by_rank;
  std::map<int64_t, std::vector<size_t>> by_world;
  std::map<std::string, std::vector<size_t>> by_run;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].error.empty()) continue;  // reported as failed, whatever its name says
    if (rows[i].rank >= 0) by_rank[rows[i].rank].push_back(i);
    if (rows[i].world_size >= 0) by_world[rows[i].world_size].push_back(i);
    if (!rows[i].run.empty()) by_run[rows[i].run].push_back(i);
  }
  for (const auto& [rank, at] : by_rank) {
    if (at.size() > 1)
      return Status::Error("rank " + std::to_string(rank) + " twice: " + Files(rows, at));
  }
  if (by_world.size() > 1) {
    std::string text;
    for (const auto& [world, at] : by_world)
      text += (text.empty() ? "" : "; ") + std::string("world size ") + std::to_string(world) +
              ": " + Files(rows, at);
    return Status::Error("traces of different world sizes (" + text + ")");
  }
  if (by_run.size() > 1) {
    std::string text;
    for (const auto& [run, at] : by_run)
      text +=
          (text.empty() ? "" : "; ") + std::string("run ") + Quote(run) + ": " + Files(rows, at);
    return Status::Error("traces of different runs (" + text + ")");
  }
  if (!by_world.empty() && !by_rank.empty() && by_rank.rbegin()->first >= by_world.begin()->first)
    return Status::Error("rank " + std::to_string(by_rank.rbegin()->first) + " of a world of " +
                         std::to_string(by_world.begin()->first) + ": " +
                         Files(rows, by_rank.rbegin()->second));

  RanksReport r;
  r.rows = std::move(rows);
  // By rank (unknown ranks after the known, by path), ranks without
  // numbers last.
  std::stable_sort(r.rows.begin(), r.rows.end(), [](const RankRow& a, const RankRow& b) {
    const auto key = [](const RankRow& x) {
      return std::make_tuple(!x.error.empty(), x.rank < 0, x.rank, x.path);
    };
    return key(a) < key(b);
  });
  std::vector<int64_t> peaks;
  for (const RankRow& row : r.rows) {
    if (row.error.empty()) peaks.push_back(row.peak_bytes);
  }
  if (peaks.empty()) return r;
  std::sort(peaks.begin(), peaks.end());
  const size_t n = peaks.size();
  r.median_peak =
      n % 2 == 1 ? peaks[n / 2] : peaks[n / 2 - 1] + (peaks[n / 2] - peaks[n / 2 - 1]) / 2;
  r.skew = r.median_peak > 0
               ? static_cast<double>(peaks.back()) / static_cast<double>(r.median_peak)
               : 1.0;
  const double median = static_cast<double>(r.median_peak);
  // With two ranks the median is their midpoint: neither is the odd one.
  if (n < 3) return r;
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const RankRow& row = r.rows[i];
    if (!row.error.empty()) continue;
    const double off = static_cast<double>(row.peak_bytes) - median;
    if (median > 0 && (off > kOutlierShare * median || -off > kOutlierShare * median))
      r.outliers.push_back(i);
  }
  return r;
}

namespace {

std::string RankName(const RankRow& row) {
  return row.rank >= 0 ? std::to_string(row.rank) : std::string("?");
}

std::string Ms(int64_t us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", static_cast<double>(us) / 1000.0);
  return buf;
}

}  // namespace

std::string FormatRanks(const RanksReport& r) {
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-5s %-8s %12s %12s  %-18s %-26s %s\n", "rank", "device", "peak",
                "at", "step", "largest categories", "trace");
  out += buf;
  bool inferred = false;
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const RankRow& row = r.rows[i];
    if (!row.error.empty()) {
      out += RankName(row) + "     failed: " + row.error + "\n";
      continue;
    }
    inferred |= row.inferred;
    // The two largest categories at the peak.
    std::array<int, 8> order{0, 1, 2, 3, 4, 5, 6, 7};
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return row.at_peak[a] > row.at_peak[b]; });
    std::string cats;
    for (int k = 0; k < 2; ++k) {
      if (row.at_peak[order[k]] <= 0) break;
      cats +=
          (k ? ", " : "") + ExportCategoryLabel(order[k], false) + " " +
          std::to_string(row.peak_bytes > 0 ? 100 * row.at_peak[order[k]] / row.peak_bytes : 0) +
          "%";
    }
    const bool outlier = std::find(r.outliers.begin(), r.outliers.end(), i) != r.outliers.end();
    std::snprintf(buf, sizeof buf, "%-5s %-8s %12s %12s  %-18s %-26s %s%s%s\n",
                  RankName(row).c_str(), row.device.c_str(), HumanBytes(row.peak_bytes).c_str(),
                  Ms(row.peak_us).c_str(), row.step.empty() ? "-" : row.step.c_str(), cats.c_str(),
                  Quote(row.path).c_str(), outlier ? "  (outlier)" : "",
                  row.truncated ? ("  (truncated: analyzed up to line " +
                                   std::to_string(row.analyzed_lines) + ")")
                                      .c_str()
                                : "");
    out += buf;
  }
  if (r.median_peak > 0) {
    std::snprintf(buf, sizeof buf, "\nmedian peak %s, largest over median %.3f",
                  HumanBytes(r.median_peak).c_str(), r.skew);
    out += buf;
    if (r.outliers.empty()) {
      out += "; no rank more than 10% from the median\n";
    } else {
      out += "; outliers (more than 10% from the median): ";
      for (size_t k = 0; k < r.outliers.size(); ++k)
        out += (k ? ", " : "") + std::string("rank ") + RankName(r.rows[r.outliers[k]]);
      out += "\n";
    }
  }
  if (inferred) out += "categories inferred (Kineto traces read alone)\n";
  return out;
}

std::string RanksJson(const RanksReport& r) {
  std::string out = "{\"ranks\":[";
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const RankRow& row = r.rows[i];
    out += i ? ",{" : "{";
    out += "\"rank\":" + (row.rank >= 0 ? std::to_string(row.rank) : std::string("null"));
    out += ",\"trace\":" + JsonString(row.path);
    out += ",\"world_size\":" +
           (row.world_size >= 0 ? std::to_string(row.world_size) : std::string("null"));
    out += ",\"run\":" + (row.run.empty() ? std::string("null") : JsonString(row.run));
    if (!row.error.empty()) {
      out += ",\"error\":" + JsonString(row.error) + "}";
      continue;
    }
    out += ",\"device\":" + JsonString(row.device);
    out += ",\"peak_bytes\":" + std::to_string(row.peak_bytes);
    out += ",\"peak_us\":" + std::to_string(row.peak_us);
    out += ",\"step\":" + (row.step.empty() ? std::string("null") : JsonString(row.step));
    out += ",\"at_peak\":{";
    for (int c = 0; c < 8; ++c) {
      out += (c ? "," : "") + JsonString(ExportCategoryLabel(c, false)) + ":" +
             std::to_string(row.at_peak[c]);
    }
    out += "},\"inferred\":" + std::string(row.inferred ? "true" : "false");
    out += ",\"truncated\":" + std::string(row.truncated ? "true" : "false");
    const bool outlier = std::find(r.outliers.begin(), r.outliers.end(), i) != r.outliers.end();
    out += ",\"outlier\":" + std::string(outlier ? "true" : "false") + "}";
  }
  char skew[32];
  std::snprintf(skew, sizeof skew, "%.6g", r.skew);
  out += "],\"median_peak_bytes\":" + std::to_string(r.median_peak) + ",\"skew\":" + skew +
         ",\"outliers\":[";
  for (size_t k = 0; k < r.outliers.size(); ++k) {
    const RankRow& row = r.rows[r.outliers[k]];
    out += (k ? "," : "") + (row.rank >= 0 ? std::to_string(row.rank) : JsonString(row.path));
  }
  return out + "]}\n";
}

}  // namespace memtl

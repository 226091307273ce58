// memtl ranks as an HTML page: one curve per rank (each rank's total on its
// device over time, aligned at its first ProfilerStep) and the per-rank
// table. One self-contained file under the report's Content-Security-Policy:
// no load of any kind, the curves drawn in inline SVG.
#include <algorithm>
#include <cstdio>
#include <string>

#include "core/explain/peak.h"
#include "export/export.h"
#include "export/html_util.h"

namespace memtl {

namespace {

std::string Colour(size_t i, size_t n) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "hsl(%zu,70%%,40%%)", n == 0 ? 0 : (i * 360 / n + 200) % 360);
  return buf;
}

// Every rank's curve on one chart: x the time from its alignment point,
// y its total.
std::string Curves(const RanksReport& r) {
  constexpr int kW = html::kChartWidth, kH = 320, kLeft = html::kChartLeft, kTop = html::kChartTop;
  int64_t t0 = 0, t1 = 1, top = 1;
  bool any = false;
  for (const RankRow& row : r.rows) {
    for (const auto& [t, bytes] : row.curve) {
      t0 = any ? std::min(t0, t) : t;
      t1 = any ? std::max(t1, t) : std::max<int64_t>(t, t0 + 1);
      top = std::max(top, bytes);
      any = true;
    }
  }
  if (!any) return "<p>No rank has memory events.</p>\n";
  if (t1 <= t0) t1 = t0 + 1;
  auto x = [&](int64_t t) {
    return kLeft + kW * static_cast<double>(t - t0) / static_cast<double>(t1 - t0);
  };
  auto y = [&](int64_t b) {
    return kTop + kH - kH * static_cast<double>(b) / static_cast<double>(top);
  };
  std::string svg =
      html::ChartFrame("ranks", "each rank's memory over time", kH, top,
                       static_cast<double>(t0) / 1000.0, static_cast<double>(t1) / 1000.0);
  char buf[256];
  if (t0 <= 0 && t1 >= 0) {
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#888\" "
                  "stroke-dasharray=\"4 3\"><title>the first ProfilerStep of each rank"
                  "</title></line>\n",
                  x(0), kTop, x(0), kTop + kH);
    svg += buf;
  }
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const RankRow& row = r.rows[i];
    if (row.curve.empty()) continue;
    svg += "<polyline fill=\"none\" stroke-width=\"1.5\" stroke=\"" + Colour(i, r.rows.size()) +
           "\" points=\"";
    // A step line: memory holds its value until the next point.
    for (size_t k = 0; k < row.curve.size(); ++k) {
      const auto [t, bytes] = row.curve[k];
      std::snprintf(buf, sizeof buf, "%.1f,%.1f ", x(t), y(bytes));
      svg += buf;
      if (k + 1 < row.curve.size()) {
        std::snprintf(buf, sizeof buf, "%.1f,%.1f ", x(row.curve[k + 1][0]), y(bytes));
        svg += buf;
      }
    }
    svg += "\"><title>rank " + (row.rank >= 0 ? std::to_string(row.rank) : std::string("?")) +
           ": peak " + HumanBytes(row.peak_bytes) + " (" + html::Escape(row.path) +
           ")</title></polyline>\n";
  }
  return svg + "</svg>\n";
}

}  // namespace

std::string RanksHtml(const RanksReport& r) {
  std::string out = html::PageStart("memtl ranks: " + std::to_string(r.rows.size()) + " traces",
                                    "svg.ranks text{font-size:12px;fill:#222}\n");
  out += "<h1>memtl ranks</h1>\n";
  char buf[160];
  if (r.median_peak > 0) {
    std::snprintf(buf, sizeof buf, "%.3f", r.skew);
    out += "<p>Median peak <b>" + HumanBytes(r.median_peak) + "</b>; the largest is <b>" + buf +
           "x</b> the median. ";
    if (r.outliers.empty()) {
      out += "No rank is more than 10% from the median.</p>\n";
    } else {
      out += "Outliers (more than 10% from the median): ";
      for (size_t k = 0; k < r.outliers.size(); ++k) {
        const RankRow& row = r.rows[r.outliers[k]];
        out += (k ? ", " : "") + std::string("rank ") +
               (row.rank >= 0 ? std::to_string(row.rank) : html::Escape(row.path));
      }
      out += ".</p>\n";
    }
  }
  out +=
      "<p class=\"how\">Each rank's total on its device over time, from its first "
      "ProfilerStep (the dashed line; a rank without steps starts at its first event); hover a "
      "curve for its rank. Click a column to sort the table.</p>\n";
  out += Curves(r);
  out +=
      "<table class=\"memory sortable\">\n<thead><tr><th>rank</th><th>device</th><th>peak</th>"
      "<th>at (ms)</th><th>step</th>";
  for (int c = 0; c < 8; ++c) out += "<th>" + html::Escape(ExportCategoryLabel(c, false)) + "</th>";
  out += "<th>trace</th></tr></thead>\n<tbody>\n";
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const RankRow& row = r.rows[i];
    const bool outlier = std::find(r.outliers.begin(), r.outliers.end(), i) != r.outliers.end();
    // The rank in its curve's colour: the chart's legend.
    out += "<tr><td><span style=\"color:" + Colour(i, r.rows.size()) + "\">&#9632;</span> " +
           (row.rank >= 0 ? std::to_string(row.rank) : std::string("?")) + "</td>";
    if (!row.error.empty()) {
      out += "<td colspan=\"12\">failed: " + html::Escape(row.error) + "</td>";
    } else {
      out += "<td>" + html::Escape(row.device) + "</td>" +
             html::Num(row.peak_bytes, HumanBytes(row.peak_bytes) + (outlier ? " (outlier)" : ""));
      std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(row.peak_us) / 1000.0);
      out += html::Num(row.peak_us, buf) + "<td>" + html::Escape(row.step) + "</td>";
      for (int c = 0; c < 8; ++c) out += html::Num(row.at_peak[c], HumanBytes(row.at_peak[c]));
      out += "<td>" + html::Escape(row.path) +
             (row.truncated
                  ? " (truncated: analyzed up to line " + std::to_string(row.analyzed_lines) + ")"
                  : std::string()) +
             "</td>";
    }
    out += "</tr>\n";
  }
  out += "</tbody>\n</table>\n";
  return out + html::PageEnd();
}

}  // namespace memtl

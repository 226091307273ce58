// memtl diff as an HTML page: two runs (or two ranks) side by side, per
// device both have. For each, the peak of each; the memory at each peak as
// two stacked bars on one scale, coloured by category as the plot is;
// each category at the peak and at its largest, with the difference; and
// the ops and modules whose bytes at the peak differ most, in sortable
// tables. One self-contained file under the report's Content-Security-Policy:
// no load of any kind, the bars drawn in inline SVG.
#include <algorithm>
#include <cstdio>
#include <string>

#include "core/categories/category.h"
#include "core/explain/peak.h"
#include "export/export.h"
#include "export/html_util.h"
#include "export/report_assets.h"

namespace memtl {

namespace {

// Two horizontal bars, A over B, each stacked by category at its peak, on
// the scale of the larger peak.
std::string Bars(const DeviceSummary& a, const DeviceSummary& b) {
  constexpr int kWidth = 720, kBar = 26, kLabel = 28, kGap = 10;
  const double top = static_cast<double>(std::max<int64_t>({a.peak_bytes, b.peak_bytes, 1}));
  std::string svg = "<svg class=\"bars\" width=\"" + std::to_string(kLabel + kWidth + 110) +
                    "\" height=\"" + std::to_string(2 * kBar + 3 * kGap) +
                    "\" role=\"img\" aria-label=\"memory at the peak of A and of B, by category"
                    "\">\n";
  int y = kGap;
  for (const DeviceSummary* d : {&a, &b}) {
    svg += "<text x=\"0\" y=\"" + std::to_string(y + kBar / 2 + 5) + "\">" + (d == &a ? "A" : "B") +
           "</text>\n";
    double x = kLabel;
    for (int c = 0; c < 8; ++c) {
      const int64_t bytes = std::max<int64_t>(d->at_peak[c], 0);
      if (bytes == 0) continue;
      const double w = kWidth * static_cast<double>(bytes) / top;
      char rect[256];
      std::snprintf(rect, sizeof rect,
                    "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\" "
                    "fill-opacity=\"0.7\">",
                    x, y, w, kBar, html::kCategoryColors[c]);
      svg += rect;
      svg += "<title>" + std::string(ExportCategoryName(c)) + ": " + HumanBytes(bytes) +
             "</title></rect>\n";
      x += w;
    }
    char end[96];
    std::snprintf(end, sizeof end, "<text x=\"%.2f\" y=\"%d\">", x + 6, y + kBar / 2 + 5);
    svg += end + HumanBytes(d->peak_bytes) + "</text>\n";
    y += kBar + kGap;
  }
  return svg + "</svg>\n";
}

std::string Cell(int64_t v) { return html::Num(v, HumanBytes(v)); }
std::string DeltaCell(int64_t a, int64_t b) { return html::Num(b - a, SignedBytes(b - a)); }

std::string DeviceSection(const DeviceSummary& a, const DeviceSummary& b) {
  std::string out = "<h2>" + html::Escape(a.device) + "</h2>\n<p class=\"peak\">Peak: A " +
                    HumanBytes(a.peak_bytes) + ", B " + HumanBytes(b.peak_bytes) + " (" +
                    SignedBytes(b.peak_bytes - a.peak_bytes);
  if (const std::string c = RelativeChange(a.peak_bytes, b.peak_bytes); !c.empty()) out += ", " + c;
  out += ").</p>\n" + Bars(a, b);
  out +=
      "<table class=\"sortable\"><thead><tr><th>category</th><th class=\"n\">A at its peak</th>"
      "<th class=\"n\">B at its peak</th><th class=\"n\">B - A</th><th class=\"n\">A largest</th>"
      "<th class=\"n\">B largest</th><th class=\"n\">B - A</th></tr></thead><tbody>\n";
  for (int c = 0; c < 8; ++c) {
    out +=
        "<tr><td><span class=\"sw\" style=\"background:" + std::string(html::kCategoryColors[c]) +
        "\"></span>" + std::string(ExportCategoryName(c)) + "</td>" + Cell(a.at_peak[c]) +
        Cell(b.at_peak[c]) + DeltaCell(a.at_peak[c], b.at_peak[c]) + Cell(a.largest[c]) +
        Cell(b.largest[c]) + DeltaCell(a.largest[c], b.largest[c]) + "</tr>\n";
  }
  out += "</tbody></table>\n";
  auto table = [&](const char* title, const char* what, const auto& rows) {
    out += std::string("<h3>") + title + "</h3>\n";
    if (rows.empty()) {
      out += "<p class=\"note\">The same in both runs.</p>\n";
      return;
    }
    out += std::string("<table class=\"sortable\"><thead><tr><th>") + what +
           "</th><th class=\"n\">A</th><th class=\"n\">B</th><th class=\"n\">B - A</th>"
           "</tr></thead><tbody>\n";
    for (const auto& [name, v] : rows) {
      out += "<tr><td class=\"name\">" + html::Escape(name) + "</td>" + Cell(v[0]) + Cell(v[1]) +
             DeltaCell(v[0], v[1]) + "</tr>\n";
    }
    out += "</tbody></table>\n";
  };
  constexpr size_t kRows = 25;
  table("Ops whose bytes at the peak differ most", "op", TableDiff(a.top_ops, b.top_ops, kRows));
  table("Modules whose bytes at the peak differ most", "module",
        TableDiff(a.top_modules, b.top_modules, kRows));
  return out;
}

}  // namespace

namespace html {

std::string PolicyMeta(bool chart) {
  std::string out =
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src "
      "'sha256-";
  out += report_assets::kReportJsSha256;
  out += "'";
  if (chart) {
    out += " 'sha256-";
    out += report_assets::kFlameJsSha256;
    out += "'";
  }
  if (chart && !report_assets::kDygraphsJsSha256.empty()) {
    out += " 'sha256-";
    out += report_assets::kDygraphsJsSha256;
    out += "'";
  }
  return out + "; style-src 'unsafe-inline'; img-src data:\">\n";
}

std::string PageStart(const std::string& title, std::string_view css) {
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n" +
                    PolicyMeta(false) + "<title>" + Escape(title) + "</title>\n<style>\n";
  out += report_assets::kReportCss;
  out += css;
  return out + "</style>\n</head>\n<body>\n";
}

std::string ChartFrame(const char* cls, const std::string& aria, int height, int64_t top_bytes,
                       double t0_ms, double t1_ms) {
  constexpr int kW = kChartWidth, kLeft = kChartLeft, kTop = kChartTop;
  const int kH = height;
  std::string svg = std::string("<svg class=\"") + cls + "\" width=\"" +
                    std::to_string(kLeft + kW + 20) + "\" height=\"" +
                    std::to_string(kTop + kH + kChartBottom) + "\" role=\"img\" aria-label=\"" +
                    Escape(aria) + "\">\n";
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#888\"/>\n"
                "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#888\"/>\n",
                kLeft, kTop, kLeft, kTop + kH, kLeft, kTop + kH, kLeft + kW, kTop + kH);
  svg += buf;
  svg += "<text x=\"4\" y=\"" + std::to_string(kTop + 12) + "\">" + HumanBytes(top_bytes) +
         "</text>\n";
  svg += "<text x=\"4\" y=\"" + std::to_string(kTop + kH) + "\">0</text>\n";
  std::snprintf(buf, sizeof buf,
                "<text x=\"%d\" y=\"%d\">%.3f ms</text>\n<text x=\"%d\" y=\"%d\" "
                "text-anchor=\"end\">%.3f ms</text>\n",
                kLeft, kTop + kH + 20, t0_ms, kLeft + kW, kTop + kH + 20, t1_ms);
  return svg + buf;
}

std::string PageEnd() {
  // report.js sorts the tables; with no devices of its own it draws no chart.
  return "<script id=\"memtl-data\" type=\"application/json\">" +
         ScriptJson(R"({"devices":[],"selected":0,"categories":[],"steps":[]})") + "</script>\n" +
         InlineScript(report_assets::kReportJs) + "</body>\n</html>\n";
}

}  // namespace html

std::string DiffHtml(const Summary& a, const Summary& b) {
  std::string out = html::PageStart(
      "memtl diff: " + a.trace + " and " + b.trace,
      "svg.bars text{font-size:13px;fill:#222}\nh3{font-size:14px;margin:14px 0 4px}\n");
  // A trace without tensors (a Kineto trace read alone) has inferred categories.
  auto inferred = [](const Summary& s) {
    return s.inferred ? std::string(" (categories inferred: the trace records no tensors)")
                      : std::string();
  };
  out += "<h1>memtl diff</h1>\n<p>A: <b>" + html::Escape(a.trace) + "</b>" + inferred(a) +
         "<br>B: <b>" + html::Escape(b.trace) + "</b>" + inferred(b) + "</p>\n";
  out +=
      "<p class=\"how\">Each run's memory at its own peak, by category (the bars; hover for "
      "bytes), each category's largest over the run, and the ops and modules whose bytes at "
      "the peak differ most (among each run's 50 largest). Click a column to sort.</p>\n";
  for (const std::string& name : DiffDevices(a, b)) {
    const DeviceSummary* da = FindDevice(a, name);
    const DeviceSummary* db = FindDevice(b, name);
    if (da == nullptr || db == nullptr) {
      out += "<h2>" + html::Escape(name) + "</h2>\n<p>Only in " + (da ? "A" : "B") + ".</p>\n";
      continue;
    }
    out += DeviceSection(*da, *db);
  }
  return out + html::PageEnd();
}

}  // namespace memtl

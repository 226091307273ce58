// memtl whatif as an HTML page: per device, the measured and the predicted
// curve on one chart (each point the largest total of the rows it stands
// for), the peaks before and after by category, the changes and the notes.
// One self-contained file under the report's Content-Security-Policy, the
// curves drawn in inline SVG.
#include <algorithm>
#include <cstdio>
#include <string>

#include "core/categories/category.h"
#include "core/explain/peak.h"
#include "export/export.h"
#include "export/html_util.h"

namespace memtl {

namespace {

std::string Chart(const WhatIfDevice& d) {
  constexpr int kW = html::kChartWidth, kH = 300, kLeft = html::kChartLeft, kTop = html::kChartTop;
  if (d.times_us.empty()) return "<p>No memory events.</p>\n";
  const int64_t t1 = std::max<int64_t>(d.times_us.back(), 1);
  int64_t top = 1;
  for (size_t i = 0; i < d.times_us.size(); ++i)
    top = std::max({top, d.measured[i], d.predicted[i]});
  auto x = [&](int64_t t) { return kLeft + kW * static_cast<double>(t) / static_cast<double>(t1); };
  auto y = [&](int64_t b) {
    return kTop + kH - kH * static_cast<double>(std::max<int64_t>(b, 0)) / static_cast<double>(top);
  };
  std::string svg = html::ChartFrame("whatif", "measured and predicted memory over time", kH, top,
                                     0.0, static_cast<double>(t1) / 1000.0);
  char buf[256];
  auto line = [&](const std::vector<int64_t>& v, const char* colour, const char* dash,
                  const char* title) {
    svg += std::string("<polyline fill=\"none\" stroke-width=\"1.5\" stroke=\"") + colour +
           "\" stroke-dasharray=\"" + dash + "\" points=\"";
    for (size_t i = 0; i < v.size(); ++i) {
      std::snprintf(buf, sizeof buf, "%.1f,%.1f ", x(d.times_us[i]), y(v[i]));
      svg += buf;
    }
    svg += std::string("\"><title>") + title + "</title></polyline>\n";
  };
  line(d.measured, "#555", "none", "measured");
  line(d.predicted, "#d62728", "6 3", "predicted");
  return svg + "</svg>\n";
}

std::string Cell(int64_t v) { return html::Num(v, HumanBytes(v)); }

std::string DeviceSection(const WhatIfDevice& d) {
  std::string out = "<h2>" + html::Escape(d.device) + "</h2>\n<p class=\"peak\">Peak: measured " +
                    HumanBytes(d.before.bytes) + " (" + html::Escape(d.before.phase) +
                    "), predicted " + HumanBytes(d.after.bytes) + " (" +
                    html::Escape(d.after.phase) +
                    "): " + SignedBytes(d.after.bytes - d.before.bytes) + ".</p>\n";
  out +=
      "<p class=\"key\"><span class=\"sw\" style=\"background:#555\"></span>measured "
      "<span class=\"sw\" style=\"background:#d62728\"></span>predicted" +
      std::string(d.rank_peaks.empty() ? "" : " (the largest rank)") + "</p>\n";
  out += Chart(d);
  out +=
      "<table class=\"sortable\"><thead><tr><th>category</th><th class=\"n\">measured at its "
      "peak</th><th class=\"n\">predicted at its peak</th><th class=\"n\">change</th></tr>"
      "</thead><tbody>\n";
  for (int c = 0; c < 8; ++c) {
    const int64_t a = d.before.by_category[c], b = d.after.by_category[c];
    out +=
        "<tr><td><span class=\"sw\" style=\"background:" + std::string(html::kCategoryColors[c]) +
        "\"></span>" + std::string(ExportCategoryName(c)) + "</td>" + Cell(a) + Cell(b) +
        html::Num(b - a, SignedBytes(b - a)) + "</tr>\n";
  }
  out += "</tbody></table>\n";
  if (!d.rank_peaks.empty()) {
    out += "<p>Per rank:";
    for (size_t r = 0; r < d.rank_peaks.size(); ++r)
      out += (r == 0 ? " " : ", ") + std::to_string(r) + ": " + HumanBytes(d.rank_peaks[r]);
    out += ".</p>\n";
  }
  return out;
}

}  // namespace

std::string WhatIfHtml(const WhatIfReport& r) {
  std::string out =
      html::PageStart("memtl whatif: " + r.trace,
                      "svg.whatif text{font-size:13px;fill:#222}\n.key .sw{margin-left:12px}\n");
  out += "<h1>memtl whatif</h1>\n<p>Trace: <b>" + html::Escape(r.trace) + "</b></p>\n<ul>\n";
  for (const std::string& c : r.changes) out += "<li>" + html::Escape(c) + "</li>\n";
  out += "</ul>\n";
  for (const WhatIfDevice& d : r.devices) out += DeviceSection(d);
  if (!r.notes.empty()) {
    out += "<h3>What the prediction leaves out</h3>\n<ul>\n";
    for (const std::string& n : r.notes) out += "<li>" + html::Escape(n) + "</li>\n";
    out += "</ul>\n";
  }
  return out + html::PageEnd();
}

}  // namespace memtl

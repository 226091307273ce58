// The HTML report: PyTorch's page (the plot as an embedded PNG) plus a short
// readable header: source, device, peaks, and any diagnostics.
#include <algorithm>
#include <cstdio>

#include "export/export.h"

namespace memtl {

namespace {

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string GiB(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GiB",
                static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

// The plot's colours by export index (PyTorch's _CATEGORY_TO_COLORS), as
// CSS names, for the swatches of the peak section.
constexpr const char* kCssColors[8] = {"darkgreen", "goldenrod",  "black",     "mediumpurple",
                                       "red",       "mediumblue", "royalblue", "grey"};

// "Who holds the memory at the peak": the summary, the categories with the
// plot's colours, and the largest live tensors with what created them.
std::string PeakSection(const PeakReport& r) {
  if (!r.any) return "";
  char buf[256];
  std::snprintf(buf, sizeof buf, "%.3f ms", static_cast<double>(r.since_start_us) / 1000.0);
  std::string html = "<h3>Who holds the memory at the peak</h3>\n<p>The timeline peaks at <b>" +
                     HumanBytes(r.bytes) + "</b>, " + buf + " after its first point, with " +
                     std::to_string(r.live_tensors) + " tensors alive";
  if (r.untracked_bytes != 0)
    html += " and " + HumanBytes(r.untracked_bytes) + " in allocations with no tensor identity";
  html += ".</p>\n<table class=\"cats\">\n";
  for (int i = 0; i < 8; ++i) {
    if (r.by_category[i] == 0) continue;
    std::snprintf(buf, sizeof buf, "%.1f%%",
                  r.bytes > 0
                      ? 100.0 * static_cast<double>(r.by_category[i]) / static_cast<double>(r.bytes)
                      : 0.0);
    html += std::string("<tr><td><span class=\"sw\" style=\"background:") + kCssColors[i] +
            "\"></span>" + std::string(ExportCategoryName(i)) + "</td><td class=\"n\">" +
            HumanBytes(r.by_category[i]) + "</td><td class=\"n\">" + buf + "</td></tr>\n";
  }
  html += "</table>\n";
  if (r.largest.empty()) return html;
  html +=
      "<p>The largest tensors alive then (the op that created each, the modules around it "
      "and the phase; <code>memtl peak</code> lists more):</p>\n<table class=\"live\">\n"
      "<tr><th>bytes</th><th>category</th><th>tensor</th><th>phase</th><th>created by</th>"
      "<th>module</th></tr>\n";
  for (const LiveTensor& t : r.largest) {
    html += "<tr><td class=\"n\">" + HumanBytes(t.bytes) + "</td><td>" +
            Escape(std::string(CategoryName(t.category))) + "</td><td>T" +
            std::to_string(t.tensor) + "(v" + std::to_string(t.version) + ")</td><td>" +
            Escape(t.phase) + "</td><td>" + Escape(t.creator_name) + "</td><td>" +
            Escape(t.module) + "</td></tr>\n";
  }
  return html + "</table>\n";
}

}  // namespace

Expected<std::string> HtmlReport(const ExportInput& in, DeviceIndex device) {
  int64_t max_allocated = 0, max_reserved = 0;
  if (device < in.trace.devices.size()) {
    max_allocated = in.trace.devices[device].max_total_allocated;
    max_reserved = in.trace.devices[device].max_total_reserved;
  }
  const std::string device_name =
      device < in.trace.devices.size() ? in.trace.devices[device].name : "none";
  PlotOptions options;
  options.title = "Max memory allocated: " + GiB(max_allocated) +
                  " \nMax memory reserved: " + GiB(max_reserved);
  auto rows = [&](const std::function<void(int64_t, const std::array<int64_t, 9>&)>& fn) {
    CoalescedRows(in.timeline, in.categories, device, fn);
  };
  PlotSummary summary;
  const std::string png = RenderPlotPng(rows, options, &summary);
  if (png.empty()) return Status::Error("the plot could not be drawn");

  std::string html =
      "<html>\n<head><meta charset=\"utf-8\" /><title>GPU Memory Timeline HTML</title>\n"
      "<style>body{font-family:'DejaVu Sans',sans-serif;margin:16px} "
      "p,li{font-size:14px;color:#333} "
      "img{max-width:100%} "
      "table{border-collapse:collapse;font-size:13px;margin:4px 0 12px} "
      "td,th{padding:2px 10px;text-align:left;border-bottom:1px solid #ddd} "
      "td.n{text-align:right;font-variant-numeric:tabular-nums} "
      ".sw{display:inline-block;width:10px;height:10px;margin-right:6px}</style></head>\n"
      "<body>\n";
  html += "<p>memtl memory timeline of <b>" + Escape(in.source_name) + "</b> on device <b>" +
          Escape(device_name) + "</b>: " + std::to_string(summary.rows) +
          " time points; peak of the timeline " + HumanBytes(summary.peak_bytes) +
          "; max allocated " + HumanBytes(max_allocated) + ", max reserved " +
          HumanBytes(max_reserved) + " (the allocator's counters in the trace).</p>\n";
  if (!in.note.empty()) html += "<p><b>Note:</b> " + Escape(in.note) + ".</p>\n";
  html += "  <img src='data:image/png;base64," + Base64(png) + "'>\n";
  if (in.peak != nullptr) html += PeakSection(*in.peak);
  if (!in.diagnostics.empty()) {
    html += "<h3>Diagnostics</h3>\n<ul>\n";
    for (const auto& [kind, e] : in.diagnostics.entries()) {
      html += "<li>" + Escape(kind) + ": " + std::to_string(e.count) + " (e.g. " +
              Escape(e.example) + ")</li>\n";
    }
    html += "</ul>\n";
  }
  html += "</body>\n</html>";
  return html;
}

}  // namespace memtl

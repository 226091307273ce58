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

// Bytes in the largest binary unit that keeps the number at least 1.
std::string Human(int64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, kUnits[u]);
  return buf;
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
      "img{max-width:100%}</style></head>\n<body>\n";
  html += "<p>memtl memory timeline of <b>" + Escape(in.source_name) + "</b> on device <b>" +
          Escape(device_name) + "</b>: " + std::to_string(summary.rows) +
          " time points; peak of the timeline " + Human(summary.peak_bytes) + "; max allocated " +
          Human(max_allocated) + ", max reserved " + Human(max_reserved) +
          " (the allocator's counters in the trace).</p>\n";
  if (!in.note.empty()) html += "<p><b>Note:</b> " + Escape(in.note) + ".</p>\n";
  html += "  <img src='data:image/png;base64," + Base64(png) + "'>\n";
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

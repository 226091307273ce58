// The HTML report, one self-contained file: for every device of the trace
// (a selector picks one; the export's device first) its peak as one figure,
// an interactive chart of its timeline (dygraphs and report.js, embedded at
// build time: export/embed_assets.cmake), PyTorch's plot as a PNG, who holds
// the memory at the peak, its flame graph (flame.js, flame_html.cpp), and
// the memory tables by op, by module and by call site, all sortable. A Content-Security-Policy
// forbids every load, so the page cannot reach the network even by mistake.
#include <algorithm>
#include <cstdio>
#include <string_view>

#include "export/export.h"
#include "export/flame_html.h"
#include "export/html_util.h"
#include "export/report_assets.h"

namespace memtl {

namespace {

using html::Escape;
using html::Num;
constexpr const auto& kCssColors = html::kCategoryColors;

std::string Ms(int64_t us) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3f ms", static_cast<double>(us) / 1000.0);
  return buf;
}

std::string Percent(int64_t part, int64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%",
                whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  return buf;
}

// "Who holds the memory at the peak": the categories with the plot's
// colours, and the largest live tensors with what created them.
std::string PeakSection(const PeakReport& r) {
  std::string html = "<h2>Who holds the memory at the peak</h2>\n<p>";
  if (!r.largest.empty()) {
    html += std::to_string(r.live_tensors) +
            (r.inferred ? " allocations are alive at the peak" : " tensors are alive at the peak");
  }
  if (r.untracked_bytes != 0 && !r.inferred) {
    html += (r.largest.empty() ? "At the peak, " : ", and ") + HumanBytes(r.untracked_bytes) +
            " is in allocations with no tensor identity";
  }
  html +=
      r.largest.empty() && r.untracked_bytes == 0 ? "By category:</p>\n" : ". By category:</p>\n";
  html +=
      "<table class=\"cats sortable\">\n<thead><tr><th>category</th><th class=\"n\">bytes</th>"
      "<th class=\"n\">share</th></tr></thead>\n<tbody>\n";
  for (int i = 0; i < 8; ++i) {
    if (r.by_category[i] == 0) continue;
    html += std::string("<tr><td><span class=\"sw\" style=\"background:") + kCssColors[i] +
            "\"></span>" + Escape(ExportCategoryLabel(i, r.inferred)) + "</td>" +
            Num(r.by_category[i], HumanBytes(r.by_category[i])) +
            Num(r.bytes > 0 ? r.by_category[i] * 1000 / r.bytes : 0,
                Percent(r.by_category[i], r.bytes)) +
            "</tr>\n";
  }
  html += "</tbody></table>\n";
  if (r.largest.empty()) return html;
  // The step and call site columns only when some tensor has one (as memtl peak).
  bool steps = false, sites = false;
  for (const LiveTensor& t : r.largest) {
    steps |= !t.step.empty();
    sites |= !t.call_site.empty();
  }
  const char* what = r.inferred ? "allocations" : "tensors";
  html += std::string("<p>The largest ") + what +
          " alive then, with the op that created each, the modules around it, the phase" +
          (steps ? ", the step" : "") + (sites ? " and the line of Python that called it" : "") +
          " (<code>memtl peak</code> lists more; <code>memtl explain TRACE " +
          (r.inferred ? "A12</code> says which rule inferred an allocation's category"
                      : "T12</code> says why a tensor has its category") +
          "):</p>\n"
          "<table class=\"live sortable\">\n<thead><tr><th class=\"n\">bytes</th><th>category</th>"
          "<th>" +
          (r.inferred ? "allocation" : "tensor") + "</th><th>phase</th>" +
          (steps ? "<th>step</th>" : "") + "<th>created by</th><th>module</th>" +
          (sites ? "<th>call site</th>" : "") + "</tr></thead>\n<tbody>\n";
  for (const LiveTensor& t : r.largest) {
    html += "<tr>" + Num(t.bytes, HumanBytes(t.bytes)) + "<td>" +
            Escape(CategoryLabel(t.category, r.inferred)) + "</td><td>" + LiveName(t) +
            "</td><td>" + Escape(t.phase) + "</td>" +
            (steps ? "<td>" + Escape(t.step) + "</td>" : "") + "<td>" + Escape(t.creator_name) +
            "</td><td>" + Escape(ModuleCell(t)) + "</td>" +
            (sites ? "<td class=\"name\">" + Escape(t.call_site) + "</td>" : "") + "</tr>\n";
  }
  return html + "</tbody></table>\n";
}

// The table's largest rows (by total bytes at the peak); the page stays
// small on traces with thousands of ops or modules.
constexpr size_t kTableRows = 300;

std::string MemoryTable(const char* what, const std::vector<MemoryRow>& rows) {
  std::string html = std::string("<table class=\"memory sortable\">\n<thead><tr><th>") + what +
                     "</th><th class=\"n\">at peak, total</th><th class=\"n\">at peak, self</th>"
                     "<th class=\"n\">allocated, total</th><th class=\"n\">allocated, self</th>"
                     "<th class=\"n\">freed, total</th><th class=\"n\">freed, self</th>"
                     "<th class=\"n\">allocations, total</th><th class=\"n\">allocations, self</th>"
                     "</tr></thead>\n<tbody>\n";
  for (size_t i = 0; i < rows.size() && i < kTableRows; ++i) {
    const MemoryRow& r = rows[i];
    html += "<tr><td class=\"name\">" + Escape(r.name) + "</td>" +
            Num(r.total.at_peak, HumanBytes(r.total.at_peak)) +
            Num(r.self.at_peak, HumanBytes(r.self.at_peak)) +
            Num(r.total.allocated, HumanBytes(r.total.allocated)) +
            Num(r.self.allocated, HumanBytes(r.self.allocated)) +
            Num(r.total.freed, HumanBytes(r.total.freed)) +
            Num(r.self.freed, HumanBytes(r.self.freed)) +
            Num(r.total.count, std::to_string(r.total.count)) +
            Num(r.self.count, std::to_string(r.self.count)) + "</tr>\n";
  }
  html += "</tbody></table>\n";
  if (rows.size() > kTableRows) {
    html += "<p class=\"note\">" + std::to_string(rows.size() - kTableRows) +
            " smaller rows are not shown.</p>\n";
  }
  return html;
}

// The table by call site, when the trace names one (recorded with_stack).
std::string CallSiteSection(const MemoryTables& t) {
  if (!HasCallSites(t.by_call_site)) {
    return "<h2>Memory by call site</h2>\n<p class=\"note\">The trace names no line of Python "
           "code (record with <code>with_stack=True</code> for this table).</p>\n";
  }
  return "<h2>Memory by call site</h2>\n<p class=\"note\">By the innermost frame of your code "
         "(outside PyTorch) around each allocation (self); total adds the allocations of the "
         "frames it called, so a training loop's line includes the model's lines.</p>\n" +
         MemoryTable("call site", t.by_call_site);
}

std::string TablesSection(const MemoryTables& t) {
  return "<h2>Memory by op</h2>\n<p class=\"note\">Self counts the allocations an op made itself "
         "(the innermost op around each); total adds those of the ops inside it. Frees count "
         "where they happen. Bytes alive at the peak that were allocated before the profile "
         "are in " +
         Escape(kBeforeProfile) + "; click a column to sort.</p>\n" + MemoryTable("op", t.by_op) +
         "<h2>Memory by module</h2>\n<p class=\"note\">By the <code>nn.Module</code> calls around "
         "each allocation (self: the innermost; total: with its submodules). A module's "
         "parameters count under it at the peak.</p>\n" +
         MemoryTable("module", t.by_module) + CallSiteSection(t);
}

// One sentence on how the timeline's peak differs from the allocator's
// counters, naming only the counters the trace has.
std::string PeakNote(const DeviceInfo* info, bool reserved_line) {
  std::string s =
      "<p class=\"note\">The peak is the timeline's: the bytes of every tensor alive at one "
      "time, including tensors allocated before profiling started";
  if (info == nullptr || info->max_total_allocated == 0)
    return s + " (the trace has no allocator counters for this device).</p>\n";
  s += "; the allocator's counter, reported with each allocation (max allocated " +
       HumanBytes(info->max_total_allocated);
  if (info->max_total_reserved != 0) s += ", max reserved " + HumanBytes(info->max_total_reserved);
  return s +
         "), is the allocator's running total: it counts memory no profiled tensor used and, "
         "on the CPU, only what was allocated while profiling, so the two need not agree." +
         (reserved_line ? " The chart's black line is the allocator's reserved total (Total "
                          "Reserved: what its cache holds from the device), not a category."
                        : "") +
         "</p>\n";
}

// The chart's data for report.js: times as offsets from the first point
// (us), bytes by category, the op running at each point.
std::string DeviceJson(const DeviceReport& d) {
  const std::vector<ChartPoint>& points = d.series.points;
  const int64_t first = points.empty() ? 0 : points.front().time_us;
  std::string j = "{\"name\":" + JsonString(d.name) + ",\"first_us\":" + std::to_string(first) +
                  ",\"rows\":" + std::to_string(d.series.rows) + ",\"t\":[";
  for (size_t i = 0; i < points.size(); ++i)
    j += (i ? "," : "") + std::to_string(points[i].time_us - first);
  j += "],\"v\":[";
  for (size_t i = 0; i < points.size(); ++i) {
    j += i ? ",[" : "[";
    for (int c = 0; c < 8; ++c) j += (c ? "," : "") + std::to_string(points[i].bytes[c]);
    j += "]";
  }
  j += "],\"op\":[";
  for (size_t i = 0; i < points.size(); ++i)
    j += (i ? "," : "") +
         (points[i].op == kNone32 ? std::string("-1") : std::to_string(points[i].op));
  j += "],\"ops\":[";
  for (size_t i = 0; i < d.series.ops.size(); ++i) {
    const RunningOp& o = d.series.ops[i];
    j += std::string(i ? "," : "") + "[" + JsonString(o.op) + "," + JsonString(o.module) + "," +
         JsonString(o.phase) + "]";
  }
  j += "]";
  // The reserved line, in the chart's times (only where the trace has it).
  if (!d.reserved.empty()) {
    j += ",\"reserved\":[";
    for (size_t i = 0; i < d.reserved.size(); ++i) {
      j += std::string(i ? ",[" : "[") + std::to_string(d.reserved[i].first - first) + "," +
           std::to_string(d.reserved[i].second) + "]";
    }
    j += "]";
  }
  return j + ",\"peak\":{\"bytes\":" + std::to_string(d.peak.bytes) +
         ",\"us\":" + std::to_string(d.peak.time_us - first) + "},\"flame\":" + html::FlameJson(d) +
         "}";
}

// The data block of the report's devices, the `selected`th shown first.
std::string DataJson(const Report& report, const std::string& source, size_t selected) {
  std::string j = "{\"source\":" + JsonString(source) +
                  ",\"selected\":" + std::to_string(selected) + ",\"categories\":[";
  for (int c = 0; c < 8; ++c) j += (c ? "," : "") + JsonString(ExportCategoryName(c));
  j += "],";
  // Only where the categories are inferred, so that other reports keep their bytes.
  if (report.inferred) j += "\"inferred\":true,";
  j += "\"colors\":[";
  for (int c = 0; c < 8; ++c) j += std::string(c ? ",\"" : "\"") + kCssColors[c] + "\"";
  j += "],\"steps\":[";
  for (size_t i = 0; i < report.steps.size(); ++i) {
    j += std::string(i ? "," : "") + "[" + JsonString(report.steps[i].name) + "," +
         std::to_string(report.steps[i].time_us) + "]";
  }
  j += "],\"devices\":[";
  for (size_t i = 0; i < report.devices.size(); ++i)
    j += (i ? "," : "") + DeviceJson(report.devices[i]);
  return html::ScriptJson(j + "]}");
}

// What would help (core/plan/help.h): the changes that lower the peak, the
// most bytes saved first, each with the flags that replay it and how far
// such predictions were checked.
std::string HelpSection(const DeviceReport& d) {
  if (d.help.empty()) return {};
  std::string html =
      "<h2>What would help</h2>\n<p class=\"note\">Standard changes replayed on this "
      "timeline with <code>memtl whatif</code> (the flags replay one; docs/planning.md), the "
      "most bytes saved at the peak first.</p>\n<table class=\"sortable\"><thead><tr><th>change"
      "</th><th class=\"n\">predicted peak</th><th class=\"n\">saved</th><th>whatif flags</th>"
      "<th>trust</th></tr></thead><tbody>\n";
  for (const HelpRow& r : d.help) {
    char pct[32];
    std::snprintf(pct, sizeof pct, " (%.1f%%)",
                  d.peak.bytes > 0
                      ? 100.0 * static_cast<double>(r.saved) / static_cast<double>(d.peak.bytes)
                      : 0.0);
    html += "<tr><td>" + Escape(r.change) + "</td>" + html::Num(r.peak, HumanBytes(r.peak)) +
            html::Num(r.saved, HumanBytes(r.saved) + pct) + "<td class=\"name\"><code>" +
            Escape(r.flags) + "</code></td><td class=\"name\">" + Escape(r.trust) + "</td></tr>\n";
  }
  return html + "</tbody></table>\n";
}

// The device's section: its peak, chart, plot, peak tables, what would help
// and the memory tables.
Expected<std::string> DeviceSection(const ExportInput& in, const DeviceReport& d, size_t index,
                                    bool shown, bool inferred) {
  const PeakReport& peak = d.peak;
  const DeviceInfo* info =
      d.device < in.trace.devices.size() ? &in.trace.devices[d.device] : nullptr;
  std::string html = "<section class=\"device\" id=\"device-" + std::to_string(index) + "\"" +
                     (shown ? "" : " hidden") + ">\n";
  html += "<p class=\"peak\">Peak of " + Escape(d.name) + ": <b>" + HumanBytes(peak.bytes) +
          "</b> at " + Ms(peak.since_start_us) + " after the first point (" +
          std::to_string(d.series.rows) + " points).</p>\n";
  html += PeakNote(info, !d.reserved.empty());
  if (report_assets::kChartMissing.empty()) {
    html +=
        "<div class=\"chart-box\"><div class=\"toggles\"></div><div class=\"chart-wrap\">"
        "<div class=\"chart\"></div></div><div class=\"legend\"></div></div>\n<p class=\"how\">";
    if (d.series.sampled()) {
      html += "The chart shows " + std::to_string(d.series.points.size()) + " of the " +
              std::to_string(d.series.rows) + " points: in each of " +
              std::to_string(kChartBuckets) +
              " spans of time the first, lowest, highest and last, so no peak is lost (zooming "
              "in shows no others). ";
    }
    html +=
        "Drag to zoom, double-click to zoom out; the red line marks the peak, dashed lines the "
        "steps.</p>\n<noscript><p class=\"missing\">The interactive chart needs JavaScript; the "
        "image below shows the same timeline.</p></noscript>\n";
  }

  PlotOptions options;
  options.title = d.name + ": peak " + HumanBytes(peak.bytes) + " at " + Ms(peak.since_start_us) +
                  (inferred ? " (categories inferred)" : "");
  const PlotRows rows = [&](const std::function<void(int64_t, const std::array<int64_t, 9>&)>& fn) {
    CoalescedRows(in.timeline, in.categories, d.device, fn);
  };
  const std::string png = RenderPlotPng(rows, options);
  if (png.empty()) return Status::Error("the plot could not be drawn");
  std::string alt = "Stacked areas of the memory of " + d.name + " by category over time: peak " +
                    HumanBytes(peak.bytes) + " at " + Ms(peak.since_start_us);
  std::array<int, 8> order = {0, 1, 2, 3, 4, 5, 6, 7};
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return peak.by_category[a] > peak.by_category[b]; });
  for (size_t k = 0; k < 3 && peak.by_category[order[k]] > 0; ++k) {
    alt += (k ? ", " : "; the most then: ") + std::string(ExportCategoryName(order[k])) + " " +
           HumanBytes(peak.by_category[order[k]]);
  }
  html += "<img class=\"plot\" alt=\"" + Escape(alt) + ".\" src='data:image/png;base64," +
          Base64(png) + "'>\n";
  html += PeakSection(peak);
  html += html::FlameSection(d, inferred);
  html += HelpSection(d);
  if (d.has_tables) html += TablesSection(d.tables);
  return html + "</section>\n";
}

}  // namespace

Expected<std::string> HtmlReport(const ExportInput& in, DeviceIndex device) {
  const Report fallback = in.report != nullptr ? Report{}
                                               : ReportFromTimeline(in.trace, in.timeline,
                                                                    in.categories, in.peak, device);
  const Report& report = in.report != nullptr ? *in.report : fallback;
  const std::string wanted =
      device < in.trace.devices.size() ? in.trace.devices[device].name : "none";
  size_t selected = 0;
  for (size_t i = 0; i < report.devices.size(); ++i) {
    if (report.devices[i].device == device) selected = i;
  }
  const std::string shown = report.devices.empty() ? wanted : report.devices[selected].name;
  // What the report was made from: the script and time of the run where the
  // trace's producer says (memtl.save writes them; a report made from
  // Python would otherwise name a temporary file), else the trace's name.
  const TraceHeader& h = in.trace.header;
  const std::string source =
      h.script.empty() ? in.source_name
                       : h.script + (h.recorded_at.empty() ? "" : ", recorded " + h.recorded_at);

  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n" +
                     html::PolicyMeta(true) + "<title>memtl memory timeline: " + Escape(shown) +
                     " (" + Escape(source) + ")</title>\n<style>\n";
  html += report_assets::kDygraphsCss;
  html += "\n";
  html += report_assets::kReportCss;
  html += "</style>\n</head>\n<body>\n<h1>Memory timeline of <span class=\"device-name\">" +
          Escape(shown) + "</span></h1>\n<p>From <b>" + Escape(source) + "</b>";
  // The report holds the devices drawn (ReportedDevices: at most
  // kReportMaxDevices); the sections, the selector and the data block
  // number them 0 to devices.size() - 1.
  if (report.devices.size() > 1) {
    html += "; device <select id=\"device\">";
    for (size_t i = 0; i < report.devices.size(); ++i) {
      html += "<option value=\"" + std::to_string(i) + "\"" + (i == selected ? " selected" : "") +
              ">" + Escape(report.devices[i].name) + "</option>";
    }
    html += "</select> (each has its own chart, peak and tables)";
  }
  html += ".</p>\n";
  if (report.left_out > 0) {
    const size_t left = report.left_out;
    html += "<p class=\"note not-drawn\">" + std::to_string(left) +
            (left == 1 ? " more device is" : " more devices are") +
            " not drawn: the report draws " + std::to_string(report.devices.size()) +
            " of the trace's devices, the exported one and those with the highest peaks. "
            "<code>memtl summary TRACE</code> lists every device's peak; <code>memtl export "
            "--device DEVICE TRACE OUT.html</code> draws any one of them.</p>\n";
  }
  if (!report_assets::kChartMissing.empty())
    html += "<p class=\"missing\">" + Escape(report_assets::kChartMissing) + "</p>\n";
  if (in.report == nullptr) {
    html +=
        "<p class=\"note\">Written from the timeline alone: the ops at each point, the steps "
        "and the memory tables by op and module need the analysis.</p>\n";
  }
  if (!in.note.empty()) html += "<p><b>Note:</b> " + Escape(in.note) + ".</p>\n";
  if (report.inferred) {
    html +=
        "<p class=\"note inferred\"><b>Categories are inferred</b>, not proven: the trace "
        "records no tensors, so each allocation's category comes from the scopes around it "
        "(backward functions, optimizer steps, nn.Module calls) and its lifetime; every "
        "category is marked \"(inferred)\". <code>memtl explain TRACE A12</code> names the "
        "rule; an execution trace of the same run (<code>--et</code>) proves them.</p>\n";
  }
  if (report.devices.empty() || report.devices[selected].device != device) {
    html += device < in.trace.devices.size()
                ? "<p>No memory events on " + Escape(wanted) + ".</p>\n"
                : "<p>No memory events.</p>\n";
  }
  for (size_t i = 0; i < report.devices.size(); ++i) {
    auto section = DeviceSection(in, report.devices[i], i, i == selected, report.inferred);
    if (!section.ok()) return section.status();
    html += section.value();
  }
  if (!in.diagnostics.empty()) {
    html += "<h2>Diagnostics</h2>\n<ul>\n";
    for (const auto& [kind, e] : in.diagnostics.entries()) {
      html += "<li>" + Escape(kind) + ": " + std::to_string(e.count) + " (e.g. " +
              Escape(e.example) + ")</li>\n";
    }
    html += "</ul>\n";
  }
  // The data block is JSON that report.js parses (not run: it needs no
  // hash in the policy); the scripts' texts are the hashed assets.
  html += "<script id=\"memtl-data\" type=\"application/json\">" +
          DataJson(report, source, selected) + "</script>\n";
  if (!report_assets::kDygraphsJs.empty()) html += html::InlineScript(report_assets::kDygraphsJs);
  html += html::InlineScript(report_assets::kReportJs);
  html += html::InlineScript(report_assets::kFlameJs);
  return html + "</body>\n</html>\n";
}

}  // namespace memtl

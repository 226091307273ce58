// Exporters of the categorized timeline, chosen by the output path's suffix
// exactly as torch.profiler.profile.export_memory_timeline chooses:
//   *.html          an HTML page: an interactive chart of every device, the plot
//                   embedded as a PNG, the peak and the memory tables
//   *raw.json.gz    raw events [time_ns, action, bytes, category], gzip
//   *.gz (other)    [times_us, sizes], gzip
//   *.json          [times_us, sizes], plain
// (PyTorch writes plain JSON for any other name; memtl refuses to guess.)
#pragma once

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/categories/category.h"
#include "core/explain/peak.h"
#include "core/explain/ranks.h"
#include "core/explain/report.h"
#include "core/explain/summary.h"
#include "core/model/diagnostics.h"
#include "core/model/status.h"
#include "core/model/trace.h"
#include "core/plan/whatif.h"
#include "core/timeline/timeline.h"
#include "export/atomic_file.h"

namespace memtl {

enum class ExportFormat { kHtml, kRawJsonGz, kSizesJsonGz, kSizesJson };

// The export's one suffix table, PyTorch's rule (export_memory_timeline):
// the first suffix a path ends with decides. `memtl --formats` prints it
// for the Python package, which refuses a path before it records.
struct ExportSuffix {
  std::string_view suffix;
  ExportFormat format;
  std::string_view name;  // --format's name for it
};
inline constexpr std::array<ExportSuffix, 4> kExportSuffixes = {{
    {".html", ExportFormat::kHtml, "html"},
    {"raw.json.gz", ExportFormat::kRawJsonGz, "raw"},
    {".gz", ExportFormat::kSizesJsonGz, "json.gz"},
    {".json", ExportFormat::kSizesJson, "json"},
}};

// The format for `path`, or an error naming the path.
Expected<ExportFormat> FormatForPath(const std::string& path);
// `memtl --formats`: {"export": [[suffix, --format name], ...]}, the table
// above in its order.
std::string ExportSuffixesJson();

struct ExportInput {
  const Trace& trace;
  const std::vector<TimelineEvent>& timeline;
  const CategoryDict& categories;
  const Diagnostics& diagnostics;
  std::string source_name;  // shown in the HTML report
  std::string note;         // shown in the HTML report when not empty (e.g. a truncated trace)
  // Who holds the memory at the peak (the HTML report's section), when
  // the caller made it (PipelineOptions::explain_peak); owned by the caller.
  const PeakReport* peak = nullptr;
  // Every device's chart data, peak and memory tables and the trace's steps
  // (PipelineOptions::report), when the caller made them; owned by the
  // caller. Without it the report is made from the timeline alone: charts
  // without ops or steps, and no tables.
  const Report* report = nullptr;
  // Write (and gzip) streamed output on a second thread. Chunks are written
  // in order, so the bytes are the same either way.
  bool threaded = true;
};

// Serializations, byte for byte what Python's json.dump writes.
std::string SizesJson(const CoalescedTimeline& c);
std::string RawJson(const std::vector<TimelineEvent>& timeline, const CategoryDict& cats,
                    DeviceIndex device);

// Writes `path` atomically in the format its suffix selects, or in
// `format` when given; "-" is standard output (written as a stream).
Status ExportMemoryTimeline(const ExportInput& in, const std::string& path, DeviceIndex device,
                            std::optional<ExportFormat> format = std::nullopt);

// Writes the export into `file`, opened (gzip or not, as `format` says:
// ExportGzipped) before the analysis, and finishes it without publishing
// it: the command publishes all its outputs once each is written.
Status WriteExport(const ExportInput& in, AtomicFile& file, DeviceIndex device,
                   ExportFormat format);

// Whether `format`'s file is gzip.
inline bool ExportGzipped(ExportFormat format) {
  return format == ExportFormat::kRawJsonGz || format == ExportFormat::kSizesJsonGz;
}

// PNG of the stacked-area plot (export/plot.cpp); empty string on failure.
struct PlotOptions {
  int width = 1600;  // PyTorch: 20 x 12 inches at 80 dpi
  int height = 960;
  std::string title;
  // The canvas is drawn and encoded this many rows at a time (plot.cpp);
  // the image does not depend on it.
  int band_rows = 240;
};
// The coalesced rows, walked in order each time it is called (the plot walks
// them twice and keeps at most a few rows per pixel column, never all).
using PlotRows =
    std::function<void(const std::function<void(int64_t, const std::array<int64_t, 9>&)>&)>;
// What the plot's first walk learned, for the report's header line.
struct PlotSummary {
  size_t rows = 0;         // time points
  int64_t peak_bytes = 0;  // the largest total of a row
};
std::string RenderPlotPng(const PlotRows& rows, const PlotOptions& options,
                          PlotSummary* summary = nullptr);
std::string RenderPlotPng(const CoalescedTimeline& c, const PlotOptions& options);
std::string Base64(const std::string& bytes);

// memtl diff as one self-contained HTML page (export/diff_html.cpp).
std::string DiffHtml(const Summary& a, const Summary& b);

// memtl ranks as one self-contained HTML page (export/ranks_html.cpp).
std::string RanksHtml(const RanksReport& r);

// memtl whatif as one self-contained HTML page: the measured and the
// predicted curve on one chart per device (export/whatif_html.cpp).
std::string WhatIfHtml(const WhatIfReport& r);

}  // namespace memtl

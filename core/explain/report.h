// What the HTML report shows of every device of a trace: the peak (peak.h),
// the memory tables (tables.h) and the timeline sampled for the interactive
// chart, each point with the op running then, plus the trace's steps
// (ProfilerStep#N), and the flame graph of the bytes alive at the peak (the
// folded stacks of memtl peak --format folded, folded.h). MakeReport reads
// the stages up to the timeline, so the pipeline makes it before they go
// (PipelineOptions::report); the report refers to none of them.
//
// Sampling keeps peaks: a device with more rows than kChartBuckets * 4
// keeps, per time bucket, the bucket's first, lowest, highest and last row
// (by total). Min and max alone would keep every peak and trough, but the
// chart holds each point's value until the next one, so the bucket's last
// row is what memory holds across the empty buckets after it, and its first
// the step into it. Kept rows are rows of the export, not averages, so a
// point shows what the .json export has at its time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/explain/folded.h"
#include "core/explain/peak.h"
#include "core/explain/tables.h"

namespace memtl {

inline constexpr size_t kChartBuckets = 2000;
// The largest tensors alive at each device's peak that the report lists.
inline constexpr size_t kReportLargestTensors = 20;
// The flame graph's live tensors (the largest; the others by category)
// and stacks (ReportFlame) per device at most: describing each of the
// 560,000 tensors alive at the peak of the generated 10^7-event trace cost
// 10 s and 270 MiB, and put stacks in the page that are each far narrower
// than a pixel.
inline constexpr size_t kReportFlameTensors = 10000;
inline constexpr size_t kReportFlameStacks = 3000;

struct ChartPoint {
  int64_t time_us = 0;             // the row's time, as the .json export writes it
  std::array<int64_t, 8> bytes{};  // by category, in the export's order
  uint32_t op = kNone32;           // index into ChartSeries::ops; kNone32: not known
  int64_t last_ns = -1;            // the time of the row's last event (-1: before the profile)
};

// The op running at a point: the top-level op (a node of the data-flow
// graph) that started last at or before the row's last event.
struct RunningOp {
  std::string op;  // "aten::conv2d"
  std::string module;
  std::string phase;
  bool operator<(const RunningOp& o) const {
    return std::tie(op, module, phase) < std::tie(o.op, o.module, o.phase);
  }
};

struct ChartSeries {
  size_t rows = 0;  // the export's rows, before sampling
  std::vector<ChartPoint> points;
  std::vector<RunningOp> ops;
  bool sampled() const { return points.size() < rows; }
};

// The export's rows of `device` (CoalescedRows), sampled as above; no ops.
ChartSeries SampleRows(const std::vector<TimelineEvent>& timeline, const CategoryDict& categories,
                       DeviceIndex device, size_t buckets = kChartBuckets);

// A standard change the report's "What would help" tried (core/plan/help.h),
// with the peak whatif predicts for it.
struct HelpRow {
  std::string change;  // in words: "ZeRO-1 at 8 ranks"
  std::string flags;   // the memtl whatif flags that replay it
  int64_t peak = 0;    // predicted, bytes
  int64_t saved = 0;   // at the peak, measured minus predicted
  std::string trust;   // how far the prediction was checked, and what it leaves out
};

struct DeviceReport {
  DeviceIndex device = 0;
  std::string name;
  PeakReport peak;
  MemoryTables tables;
  bool has_tables = false;  // false: made from the timeline alone
  ChartSeries series;
  // The allocator's reserved total where it changes (time in us, bytes),
  // when the trace reports it (a Kineto trace's "Total Reserved"): the
  // chart draws it as a line of its own, not a category.
  std::vector<std::pair<int64_t, int64_t>> reserved;
  // What would help, the most bytes saved first (empty: nothing tried
  // saves any, or the report was made from the timeline alone).
  std::vector<HelpRow> help;
  // The bytes alive at the peak as folded stacks (ReportFlame of FoldPeak
  // of the kReportFlameTensors largest), adding up to peak.bytes; by
  // category alone when the report was made from the timeline alone.
  std::vector<FoldedStack> flame;
};

struct ProfilerStep {
  std::string name;  // "ProfilerStep#3"
  int64_t time_us = 0;
};

// The devices a report holds at most: each costs a chart series, a peak
// and tables, and on the page a section with its PNG, so a trace of
// thousands of devices took minutes and gigabytes for a page no browser
// opens.
inline constexpr size_t kReportMaxDevices = 16;

struct Report {
  // Those with memory events, in AcceleratorsFirst order: all of them, or
  // where there are more than kReportMaxDevices, the selected device and
  // those with the highest peaks (ReportedDevices).
  std::vector<DeviceReport> devices;
  size_t left_out = 0;              // devices with memory events not in `devices`
  std::vector<ProfilerStep> steps;  // by time
  bool inferred = false;            // the categories are inferred (ExplainInput::inferred)
};

// `stacks` (FoldPeak's) as the report keeps them: the `keep` largest in
// their order, and the rest summed per category under one frame,
// "(N smaller stacks)", so that the bytes still add up to the peak.
std::vector<FoldedStack> ReportFlame(std::vector<FoldedStack> stacks,
                                     size_t keep = kReportFlameStacks);

// The trace's devices as reports list them: accelerators first, then cpu,
// each group in the trace's order.
std::vector<DeviceIndex> AcceleratorsFirst(const Trace& trace);

// The devices with memory events a report holds, in AcceleratorsFirst
// order (Report::devices says which); `left_out` gets how many it leaves.
// The highest peaks rather than the first devices: they are what a reader
// of a memory report looks for, and the trace's order of devices says
// nothing.
std::vector<DeviceIndex> ReportedDevices(const Trace& trace,
                                         const std::vector<TimelineEvent>& timeline,
                                         DeviceIndex selected, size_t* left_out);

// The whole report, accelerators first, then cpu; `top` largest tensors
// alive at each device's peak.
// `known`, when given, is ExplainPeak(in, top) already made (the pipeline's
// PipelineOptions::explain_peak): its walks of the timeline are not redone.
Report MakeReport(const ExplainInput& in, size_t top, const PeakReport* known = nullptr);

// What an export can still make from the timeline alone (no tables, steps
// or ops): the chart of every device and the peak's categories; `peak`,
// when given, is the report of `device`.
Report ReportFromTimeline(const Trace& trace, const std::vector<TimelineEvent>& timeline,
                          const CategoryDict& categories, const PeakReport* peak,
                          DeviceIndex device);

}  // namespace memtl

// The report's data (report.h): the sampled rows of each device, the op
// running at each kept row, the flame graph's stacks, and the steps.
#include "core/explain/report.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <numeric>
#include <utility>

namespace memtl {

namespace {

struct Row {
  size_t index = 0;
  int64_t time_us = 0;
  int64_t last_ns = -1;
  std::array<int64_t, 9> sizes{};
  int64_t total() const {
    int64_t t = 0;
    for (const int64_t b : sizes) t += b;
    return t;
  }
};

// The rows of `device` exactly as the exports make them (WalkRows in
// timeline.cpp: pre-existing memory shown at the smallest positive time),
// each with the time of its last event. A unit test compares them with
// CoalescedRows on every fixture.
template <typename Fn>
void WalkRows(const std::vector<TimelineEvent>& timeline, const CategoryDict& cats,
              DeviceIndex device, Fn&& fn) {
  int64_t t_min = -1;
  for (const TimelineEvent& e : timeline) {
    if (e.device != device) continue;
    const int64_t t = MicrosOf(e);
    if (t_min == -1 || (t < t_min && t > 0)) t_min = t;
  }
  Row r;
  bool any = false;
  int64_t last = 0;
  auto emit = [&] {
    r.time_us = last < 0 ? t_min : last;
    fn(r);
    ++r.index;
  };
  for (const TimelineEvent& e : timeline) {
    if (e.device != device) continue;
    const int64_t t = MicrosOf(e);
    if (any && t != last) emit();
    any = true;
    last = t;
    r.last_ns = e.time;
    switch (e.action) {
      case Action::kPreexisting:
      case Action::kCreate:
        r.sizes[CategoryIndexOf(cats, e, e.version()) + 1] += e.bytes;
        break;
      case Action::kIncrementVersion:
        r.sizes[CategoryIndexOf(cats, e, e.version()) + 1] -= e.bytes;
        r.sizes[CategoryIndexOf(cats, e, e.version().next()) + 1] += e.bytes;
        break;
      case Action::kDestroy:
        r.sizes[CategoryIndexOf(cats, e, e.version()) + 1] -= e.bytes;
        break;
    }
  }
  if (any) emit();
}

ChartPoint PointOf(const Row& r) {
  ChartPoint p;
  p.time_us = r.time_us;
  for (int i = 0; i < 8; ++i) p.bytes[i] = r.sizes[i + 1];
  p.last_ns = r.last_ns;
  return p;
}

}  // namespace

ChartSeries SampleRows(const std::vector<TimelineEvent>& timeline, const CategoryDict& categories,
                       DeviceIndex device, size_t buckets) {
  ChartSeries s;
  int64_t first = 0, last = 0;
  WalkRows(timeline, categories, device, [&](const Row& r) {
    if (r.index == 0) first = r.time_us;
    last = r.time_us;
    s.rows = r.index + 1;
  });
  if (s.rows <= 4 * buckets) {
    s.points.reserve(s.rows);
    WalkRows(timeline, categories, device, [&](const Row& r) { s.points.push_back(PointOf(r)); });
    return s;
  }
  // Per bucket of time: its first, lowest, highest and last rows, in order.
  const auto span = static_cast<unsigned __int128>(last - first) + 1;
  size_t bucket = 0;
  Row lo, hi, first_row, prev;
  auto flush = [&] {
    std::array<const Row*, 4> kept = {&first_row, &lo, &hi, &prev};
    std::sort(kept.begin(), kept.end(),
              [](const Row* a, const Row* b) { return a->index < b->index; });
    for (size_t i = 0; i < kept.size(); ++i) {
      if (i == 0 || kept[i]->index != kept[i - 1]->index) s.points.push_back(PointOf(*kept[i]));
    }
  };
  WalkRows(timeline, categories, device, [&](const Row& r) {
    const auto b =
        static_cast<size_t>(static_cast<unsigned __int128>(r.time_us - first) * buckets / span);
    if (r.index == 0 || b != bucket) {
      if (r.index != 0) flush();
      bucket = b;
      lo = hi = first_row = r;
    } else {
      const int64_t total = r.total();
      if (total < lo.total()) lo = r;
      if (total > hi.total()) hi = r;
    }
    prev = r;
  });
  flush();
  return s;
}

std::vector<FoldedStack> ReportFlame(std::vector<FoldedStack> stacks, size_t keep) {
  if (stacks.size() <= keep) return stacks;
  // The largest, ties in the stacks' order, so that a trace gives one page.
  std::vector<size_t> order(stacks.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return stacks[a].bytes > stacks[b].bytes; });
  std::vector<bool> kept(stacks.size(), false);
  for (size_t i = 0; i < keep; ++i) kept[order[i]] = true;
  std::vector<FoldedStack> out;
  out.reserve(keep + 8);
  std::array<FoldedStack, 8> rest;
  for (size_t i = 0; i < stacks.size(); ++i) {
    if (kept[i]) {
      out.push_back(std::move(stacks[i]));
      continue;
    }
    const size_t c = stacks[i].category >= 0 && stacks[i].category < 8
                         ? static_cast<size_t>(stacks[i].category)
                         : static_cast<size_t>(kUnknownIndex);
    if (rest[c].frames.empty()) rest[c].frames = {"", stacks[i].frames.back()};
    rest[c].category = static_cast<int>(c);
    rest[c].bytes += stacks[i].bytes;
  }
  const std::string frame = "(" + std::to_string(stacks.size() - keep) + " smaller stacks)";
  for (FoldedStack& r : rest) {
    if (r.frames.empty()) continue;
    r.frames[0] = frame;
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<DeviceIndex> AcceleratorsFirst(const Trace& trace) {
  std::vector<DeviceIndex> order;
  for (const bool cpu : {false, true}) {
    for (size_t d = 0; d < trace.devices.size(); ++d) {
      if (trace.devices[d].name.starts_with("cpu") == cpu)
        order.push_back(static_cast<DeviceIndex>(d));
    }
  }
  return order;
}

std::vector<DeviceIndex> ReportedDevices(const Trace& trace,
                                         const std::vector<TimelineEvent>& timeline,
                                         DeviceIndex selected, size_t* left_out) {
  const std::vector<int64_t> peaks = PeakPerDevice(timeline, trace.devices.size());
  std::vector<DeviceIndex> with_events;
  for (const DeviceIndex d : AcceleratorsFirst(trace)) {
    if (peaks[d] >= 0) with_events.push_back(d);
  }
  *left_out = 0;
  if (with_events.size() <= kReportMaxDevices) return with_events;
  std::vector<DeviceIndex> kept = with_events;
  std::stable_sort(kept.begin(), kept.end(), [&](DeviceIndex a, DeviceIndex b) {
    if ((a == selected) != (b == selected)) return a == selected;
    return peaks[a] > peaks[b];
  });
  kept.resize(kReportMaxDevices);
  std::vector<DeviceIndex> out;
  for (const DeviceIndex d : with_events) {
    if (std::find(kept.begin(), kept.end(), d) != kept.end()) out.push_back(d);
  }
  *left_out = with_events.size() - out.size();
  return out;
}

Report MakeReport(const ExplainInput& in, size_t top, const PeakReport* known) {
  const Trace& trace = in.trace;
  Report report;
  report.inferred = in.inferred != nullptr;
  const std::vector<MemoryTables> tables = ComputeTables(in);

  // Top-level ops by start time, for the op running at each point.
  std::vector<std::pair<int64_t, uint32_t>> starts;
  for (const FlowNode& n : in.graph.nodes()) {
    if (trace.events[n.event].kind != EventKind::kAlloc)
      starts.emplace_back(trace.event_t0[n.event], n.event);
  }
  std::stable_sort(starts.begin(), starts.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });

  for (const DeviceIndex device :
       ReportedDevices(trace, in.timeline, in.device, &report.left_out)) {
    const size_t d = device;
    ChartSeries series = SampleRows(in.timeline, in.categories, device);
    if (series.rows == 0) continue;
    std::map<RunningOp, uint32_t> seen;
    for (ChartPoint& p : series.points) {
      if (p.last_ns < 0) continue;
      const auto it = std::upper_bound(
          starts.begin(), starts.end(), p.last_ns,
          [](int64_t t, const std::pair<int64_t, uint32_t>& s) { return t < s.first; });
      if (it == starts.begin()) continue;
      const uint32_t event = std::prev(it)->second;
      EventContext where = ContextOf(trace, in.tree, event);
      RunningOp op{trace.Name(trace.events[event]), std::move(where.module),
                   std::move(where.phase)};
      const auto [at, added] = seen.try_emplace(op, static_cast<uint32_t>(series.ops.size()));
      if (added) series.ops.push_back(std::move(op));
      p.op = at->second;
    }
    DeviceReport r;
    r.device = device;
    r.name = trace.devices[d].name;
    ExplainInput at_device = in;
    at_device.device = device;
    r.peak = known != nullptr && device == in.device ? *known : ExplainPeak(at_device, top);
    // The flame graph holds many more live tensors than the table.
    r.flame = ReportFlame(FoldPeak(ExplainPeak(at_device, kReportFlameTensors)));
    r.tables = tables[d];
    r.has_tables = true;
    r.series = std::move(series);
    report.devices.push_back(std::move(r));
  }

  // ProfilerStep#N: the scopes torch.profiler's schedule opens per step.
  for (const auto& [t0, name] : ProfilerSteps(trace))
    report.steps.push_back({name, PyTrueDivTrunc1000(t0)});
  return report;
}

Report ReportFromTimeline(const Trace& trace, const std::vector<TimelineEvent>& timeline,
                          const CategoryDict& categories, const PeakReport* peak,
                          DeviceIndex device) {
  Report report;
  for (const DeviceIndex d : ReportedDevices(trace, timeline, device, &report.left_out)) {
    DeviceReport r;
    r.device = d;
    r.series = SampleRows(timeline, categories, r.device);
    if (r.series.rows == 0) continue;
    r.name = trace.devices[d].name;
    r.peak =
        peak != nullptr && r.device == device ? *peak : FindPeak(timeline, categories, r.device);
    r.peak.device = r.name;
    // Without the analysis no tensor is known: the categories at the peak.
    PeakReport categories = r.peak;
    categories.largest.clear();
    categories.live_tensors = 0;
    categories.untracked_bytes = 0;
    r.flame = FoldPeak(categories);
    report.devices.push_back(std::move(r));
  }
  return report;
}

}  // namespace memtl

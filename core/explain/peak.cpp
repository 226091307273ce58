// The peak explainer (peak.h): one walk of the timeline finds the peak row
// exactly as the exports coalesce rows (CoalescedRows), a second replays the
// events up to the end of that row and keeps, per tensor, the version and
// bytes alive; the graph then names each live version's creating node.
#include "core/explain/peak.h"

#include <algorithm>
#include <cstdio>
#include <string_view>

#include "core/explain/names.h"

namespace memtl {

std::string FragmentationLine(int64_t reserved_at_peak, int64_t peak_bytes) {
  if (reserved_at_peak == 0) return {};
  const int64_t free_bytes = std::max<int64_t>(reserved_at_peak - peak_bytes, 0);
  return "at the peak the allocator reserved " + HumanBytes(reserved_at_peak) + ", of which " +
         HumanBytes(free_bytes) + " free inside its segments (fragmentation)\n";
}

SegmentFree FreeInSegments(const DeviceInfo& device, const InferredCategories& inferred) {
  SegmentFree f;
  f.any = !device.segments_at_peak.empty();
  for (const DeviceInfo::Segment& seg : device.segments_at_peak) {
    std::array<int64_t, 8> held{};
    int64_t live = 0;
    for (const auto& [record, bytes] : seg.held) {
      held[ExportIndex(inferred.Get(record))] += bytes;
      live += bytes;
    }
    const int64_t free_bytes = std::max<int64_t>(seg.bytes - live, 0);
    if (live == 0) {
      f.in_empty += free_bytes;
      continue;
    }
    // The category holding the most of it (the first of a tie).
    const auto most = std::max_element(held.begin(), held.end());
    f.by_holder[static_cast<size_t>(most - held.begin())] += free_bytes;
  }
  return f;
}

std::string SegmentFreeLine(const SegmentFree& f, bool inferred) {
  std::string parts;
  for (int k = 0; k < 8; ++k) {
    if (f.by_holder[k] == 0) continue;
    parts += (parts.empty() ? "" : ", ") + ExportCategoryLabel(k, inferred) + " " +
             HumanBytes(f.by_holder[k]);
  }
  if (parts.empty() && f.in_empty == 0) return {};
  std::string out = "free inside segments, by what holds each most: " +
                    (parts.empty() ? std::string("none") : parts);
  if (f.in_empty != 0) out += "; in segments holding nothing " + HumanBytes(f.in_empty);
  return out + "\n";
}

std::string SegmentFreeJson(const SegmentFree& f) {
  std::string out = "{";
  for (int k = 0; k < 8; ++k)
    out +=
        (k ? "," : "") + JsonString(ExportCategoryName(k)) + ":" + std::to_string(f.by_holder[k]);
  return out + ",\"empty_segments\":" + std::to_string(f.in_empty) + "}";
}

std::string HumanBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while ((v >= 1024 || v <= -1024) && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string SignedBytes(int64_t bytes) {
  if (bytes == 0) return "0 B";
  return (bytes > 0 ? "+" : "-") + HumanBytes(bytes > 0 ? bytes : -bytes);
}

std::string RelativeChange(int64_t before, int64_t after) {
  if (before == 0) return after == 0 ? "" : "new";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%",
                100.0 * static_cast<double>(after - before) / static_cast<double>(before));
  return buf;
}

std::string CategoryLabel(std::optional<Category> c, bool inferred) {
  std::string name(CategoryName(c));
  return inferred && c ? name + " (inferred)" : name;
}

std::string ExportCategoryLabel(int index, bool inferred) {
  std::string name(ExportCategoryName(index));
  return inferred && index != kUnknownIndex ? name + " (inferred)" : name;
}

namespace {

// The names of the ops from the outermost around event `e` to `e` itself
// (when it is an op); none when `e` is kNone32.
std::vector<std::string> OpsAround(const Trace& trace, uint32_t e) {
  std::vector<std::string> ops;
  for (uint32_t p = e; p != kNone32; p = trace.events[p].parent)
    if (trace.events[p].kind == EventKind::kOp) ops.push_back(trace.Name(trace.events[p]));
  std::reverse(ops.begin(), ops.end());
  return ops;
}

// A trace without tensors: the `top` largest allocations alive at the end
// of the peak row (`r.time_us`), from the inference's pairing, with the op
// that made each. A free of memory from before the profile stands for that
// memory until it is freed.
void LargestAllocations(const PeakInput& c, size_t top, PeakReport& r) {
  const Trace& trace = c.trace;
  const InferredCategories& inf = *c.inferred;
  const size_t n = trace.allocs.size();
  std::vector<uint32_t> event_of(n, kNone32);
  for (uint32_t e = 0; e < trace.events.size(); ++e)
    if (trace.events[e].kind == EventKind::kAlloc) event_of[trace.events[e].payload] = e;
  std::vector<uint32_t> live = AllocationsAliveAt(trace, inf, c.device, r.time_us);
  r.live_tensors = live.size();
  auto bytes = [&](uint32_t a) {
    return trace.allocs[a].bytes > 0 ? trace.allocs[a].bytes : -trace.allocs[a].bytes;
  };
  std::stable_sort(live.begin(), live.end(),
                   [&](uint32_t x, uint32_t y) { return bytes(x) > bytes(y); });
  live.resize(std::min(live.size(), top));
  const StepStarts steps = ProfilerSteps(trace);
  for (const uint32_t a : live) {
    LiveTensor t;
    t.alloc = a;
    t.bytes = bytes(a);
    t.category = inf.Get(a);
    const bool before = trace.allocs[a].bytes < 0 || FromBeforeProfile(inf.rule[a]);
    // The op the allocation was made in: the innermost op around it.
    for (uint32_t p = trace.events[event_of[a]].parent; p != kNone32 && !before;
         p = trace.events[p].parent) {
      if (trace.events[p].kind != EventKind::kOp) continue;
      t.creator = p;
      break;
    }
    t.creator_name = before                 ? "before the profile"
                     : t.creator == kNone32 ? "[memory]"
                                            : trace.Name(trace.events[t.creator]);
    t.ops = OpsAround(trace, t.creator);
    EventContext where = ContextOf(trace, c.tree, before ? kNone32 : event_of[a]);
    t.module = std::move(where.module);
    t.phase = std::move(where.phase);
    t.call_site = std::move(where.call_site);
    if (!before) t.step = StepAt(steps, trace.event_t0[event_of[a]]);
    r.largest.push_back(std::move(t));
  }
}

}  // namespace

std::vector<uint32_t> AllocationsAliveAt(const Trace& trace, const InferredCategories& inferred,
                                         DeviceIndex device, int64_t time_us) {
  const size_t n = trace.allocs.size();
  std::vector<uint32_t> event_of(n, kNone32), free_of(n, kNone32);
  for (uint32_t e = 0; e < trace.events.size(); ++e)
    if (trace.events[e].kind == EventKind::kAlloc) event_of[trace.events[e].payload] = e;
  for (uint32_t a = 0; a < n; ++a)
    if (trace.allocs[a].bytes < 0 && inferred.pair[a] != kNone32) free_of[inferred.pair[a]] = a;
  auto us = [&](uint32_t a) { return PyTrueDivTrunc1000(trace.event_t0[event_of[a]]); };
  std::vector<uint32_t> live;
  for (uint32_t a = 0; a < n; ++a) {
    const AllocInfo& info = trace.allocs[a];
    if (info.device != device || event_of[a] == kNone32 || inferred.pair[a] != kNone32) continue;
    const bool alive = info.bytes > 0
                           ? us(a) <= time_us && (free_of[a] == kNone32 || us(free_of[a]) > time_us)
                           : us(a) > time_us;  // memory from before the profile
    if (alive) live.push_back(a);
  }
  return live;
}

PeakReport FindPeak(const std::vector<TimelineEvent>& timeline, const CategoryDict& categories,
                    DeviceIndex device) {
  PeakReport r;
  size_t row = 0;
  int64_t first_time = 0;
  CoalescedRows(timeline, categories, device, [&](int64_t t, const std::array<int64_t, 9>& sizes) {
    int64_t total = 0;
    for (const int64_t b : sizes) total += b;
    if (!r.any || total > r.bytes) {
      r.bytes = total;
      r.time_us = t;
      r.row = row;
      for (int i = 0; i < 8; ++i) r.by_category[i] = sizes[i + 1];
    }
    if (!r.any) first_time = t;
    r.any = true;
    ++row;
  });
  r.since_start_us = r.time_us - first_time;
  return r;
}

PeakReport ExplainPeak(const PeakInput& c, size_t top) {
  const Trace& trace = c.trace;
  PeakReport r = FindPeak(c.timeline, c.categories, c.device);
  r.device = c.device < trace.devices.size() ? trace.devices[c.device].name : "cpu";
  r.inferred = c.inferred != nullptr;
  if (r.inferred && c.device < trace.devices.size()) {
    r.max_reserved = trace.devices[c.device].max_total_reserved;
    r.reserved_at_peak = trace.devices[c.device].reserved_at_peak;
    r.segment_free = FreeInSegments(trace.devices[c.device], *c.inferred);
  }
  if (!r.any) return r;

  // Replay through the end of the peak row: per key, the version alive.
  constexpr int32_t kDead = -1;
  PerKey<int32_t> alive(c.keys.size(), kDead);
  PerKey<int64_t> bytes(c.keys.size(), 0);
  size_t row = 0;
  bool started = false;
  int64_t last = 0;
  for (const TimelineEvent& e : c.timeline) {
    if (e.device != c.device) continue;
    const int64_t t = MicrosOf(e);
    if (started && t != last && ++row > r.row) break;
    started = true;
    last = t;
    const int64_t sign = e.action == Action::kDestroy ? -1 : 1;
    if (!e.has_key()) {
      if (e.action != Action::kIncrementVersion) r.untracked_bytes += sign * e.bytes;
      continue;
    }
    switch (e.action) {
      case Action::kPreexisting:
      case Action::kCreate:
        alive[e.key()] = e.version().value();
        bytes[e.key()] = e.bytes;
        break;
      case Action::kIncrementVersion:
        alive[e.key()] = e.version().next().value();
        break;
      case Action::kDestroy:
        alive[e.key()] = kDead;
        break;
    }
  }

  if (r.inferred) {
    LargestAllocations(c, top, r);
    return r;
  }
  const DataFlowGraph& g = c.graph;
  const PerValue<uint32_t> creator_of_value = CreatorOfValues(g);
  const StepStarts steps = ProfilerSteps(trace);

  std::vector<KeySlot> live;
  for (const KeySlot k : c.keys.slots()) {
    if (alive[k] != kDead) live.push_back(k);
  }
  r.live_tensors = live.size();
  std::stable_sort(live.begin(), live.end(),
                   [&](KeySlot x, KeySlot y) { return bytes[x] > bytes[y]; });
  live.resize(std::min(live.size(), top));
  std::vector<KeySlot> shown = live;
  std::sort(shown.begin(), shown.end());
  const TensorNames names = NameModelState(c, &shown);
  for (const KeySlot k : live) {
    LiveTensor t;
    if (const auto it = names.find(k.value()); it != names.end()) t.name = it->second.text;
    t.tensor = c.keys[k].id.value();
    t.version = alive[k];
    t.bytes = bytes[k];
    t.category = c.categories.Get(k, Version(t.version));
    if (g.last_version(k).valid()) t.creator = creator_of_value[g.value(k, Version(0))];
    t.creator_name =
        t.creator == kNone32 ? "before the profile" : trace.Name(trace.events[t.creator]);
    t.ops = OpsAround(trace, t.creator);
    EventContext where = ContextOf(trace, c.tree, t.creator);
    t.module = std::move(where.module);
    t.phase = std::move(where.phase);
    t.call_site = std::move(where.call_site);
    if (t.creator != kNone32) t.step = StepAt(steps, trace.event_t0[t.creator]);
    r.largest.push_back(std::move(t));
  }
  return r;
}

const std::string& ModuleCell(const LiveTensor& t) { return t.name.empty() ? t.module : t.name; }

std::string LiveName(const LiveTensor& t) {
  return t.alloc != kNone32
             ? "A" + std::to_string(t.alloc)
             : "T" + std::to_string(t.tensor) + "(v" + std::to_string(t.version) + ")";
}

std::string FormatPeak(const PeakReport& r) {
  if (!r.any) return "no memory events on " + r.device + "\n";
  char buf[512];
  std::snprintf(buf, sizeof buf, "peak of %s: %s at %.3f ms (%zu %s alive", r.device.c_str(),
                HumanBytes(r.bytes).c_str(), static_cast<double>(r.since_start_us) / 1000.0,
                r.live_tensors, r.inferred ? "allocations" : "tensors");
  std::string out = buf;
  out += r.untracked_bytes != 0 && !r.inferred
             ? ", " + HumanBytes(r.untracked_bytes) + " in untracked allocations)\n"
             : ")\n";
  if (r.max_reserved != 0)
    out += "the allocator reserved at most " + HumanBytes(r.max_reserved) + " (Total Reserved)\n";
  out += FragmentationLine(r.reserved_at_peak, r.bytes);
  out += SegmentFreeLine(r.segment_free, r.inferred);
  if (r.inferred) {
    out +=
        "\ncategories are inferred: the trace records no tensors, so each allocation's category "
        "comes from the scopes around it and its lifetime (memtl explain TRACE A<n> says "
        "which rule)\n";
  }
  out += "\nby category:\n";
  for (int i = 0; i < 8; ++i) {
    if (r.by_category[i] == 0) continue;
    std::snprintf(
        buf, sizeof buf, r.inferred ? "  %-27s %12s  %5.1f%%\n" : "  %-16s %12s  %5.1f%%\n",
        ExportCategoryLabel(i, r.inferred).c_str(), HumanBytes(r.by_category[i]).c_str(),
        r.bytes > 0 ? 100.0 * static_cast<double>(r.by_category[i]) / static_cast<double>(r.bytes)
                    : 0.0);
    out += buf;
  }
  if (r.largest.empty()) return out;  // --top 0, or nothing alive: no table to head
  out += r.inferred ? "\nlargest allocations alive at the peak:\n"
                    : "\nlargest tensors alive at the peak:\n";
  // The step and call site columns only when some tensor has one; the
  // module column as wide as its longest cell (up to a bound), so the call
  // site after it lines up.
  bool steps = false, sites = false;
  size_t module_width = 0;
  for (const LiveTensor& t : r.largest) {
    steps |= !t.step.empty();
    sites |= !t.call_site.empty();
    module_width = std::max(module_width, TextCell(ModuleCell(t)).size());
  }
  module_width = std::clamp<size_t>(module_width, 6, 48);
  auto line = [&](const std::string& bytes, std::string_view category, const std::string& tensor,
                  const std::string& phase, const std::string& step, const std::string& op,
                  const std::string& module, const std::string& call_site) {
    std::snprintf(buf, sizeof buf,
                  r.inferred ? "  %12s  %-27s %-12s %-10s " : "  %12s  %-16s %-12s %-10s ",
                  bytes.c_str(), std::string(category).c_str(), tensor.c_str(), phase.c_str());
    std::string l = buf;
    if (steps) {
      std::snprintf(buf, sizeof buf, "%-16s ", step.c_str());
      l += buf;
    }
    std::snprintf(buf, sizeof buf, "%-32s ", op.c_str());
    l += buf;
    l += module;
    if (sites) {
      if (module.size() < module_width) l.append(module_width - module.size(), ' ');
      l += "  " + call_site;
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  };
  line("bytes", "category", r.inferred ? "allocation" : "tensor", "phase", "step", "created by",
       "module", "call site");
  for (const LiveTensor& t : r.largest) {
    // Names from the trace, escaped so that none breaks a row (TextCell).
    line(HumanBytes(t.bytes), CategoryLabel(t.category, r.inferred), LiveName(t), t.phase,
         TextCell(t.step), TextCell(t.creator_name), TextCell(ModuleCell(t)),
         TextCell(t.call_site));
  }
  // A parameter only an optimizer reports has no name the trace can give:
  // say where one comes from.
  if (std::any_of(r.largest.begin(), r.largest.end(),
                  [](const LiveTensor& t) { return t.name.starts_with(kOptimizerParam); })) {
    out +=
        "\n\"optimizer param N\": a parameter no module call reported (a torch.compile'd "
        "model, or a submodule whose parent uses its weights without calling it); "
        "memtl.save(prof, path, model=model) names it as model.named_parameters() does\n";
  }
  return out;
}

std::string PeakJson(const PeakReport& r) {
  std::string out =
      "{\"device\":" + JsonString(r.device) + ",\"any\":" + (r.any ? "true" : "false");
  out += ",\"bytes\":" + std::to_string(r.bytes) + ",\"time_us\":" + std::to_string(r.time_us) +
         ",\"since_start_us\":" + std::to_string(r.since_start_us) +
         ",\"live_tensors\":" + std::to_string(r.live_tensors) +
         ",\"untracked_bytes\":" + std::to_string(r.untracked_bytes) +
         (r.inferred ? ",\"inferred\":true" : "") +
         (r.max_reserved != 0 ? ",\"max_reserved\":" + std::to_string(r.max_reserved) : "") +
         (r.reserved_at_peak != 0 ? ",\"reserved_at_peak\":" + std::to_string(r.reserved_at_peak)
                                  : "") +
         (r.segment_free.any ? ",\"segment_free\":" + SegmentFreeJson(r.segment_free) : "") +
         ",\"by_category\":{";
  for (int i = 0; i < 8; ++i) {
    out +=
        (i ? "," : "") + JsonString(ExportCategoryName(i)) + ":" + std::to_string(r.by_category[i]);
  }
  out += "},\"largest\":[";
  for (size_t i = 0; i < r.largest.size(); ++i) {
    const LiveTensor& t = r.largest[i];
    out += std::string(i ? "," : "") +
           (t.alloc != kNone32 ? "{\"allocation\":" + std::to_string(t.alloc) + ",\"tensor\":null"
                               : "{\"tensor\":" + std::to_string(t.tensor)) +
           ",\"version\":" + std::to_string(t.version) + ",\"bytes\":" + std::to_string(t.bytes) +
           ",\"category\":" + JsonString(CategoryName(t.category)) +
           ",\"created_by\":" + JsonString(t.creator_name) + ",\"module\":" + JsonString(t.module) +
           ",\"name\":" + JsonString(t.name) + ",\"phase\":" + JsonString(t.phase) +
           ",\"step\":" + JsonString(t.step) + ",\"call_site\":" + JsonString(t.call_site) + "}";
  }
  return out + "]}\n";
}

}  // namespace memtl

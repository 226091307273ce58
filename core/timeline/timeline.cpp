// Timeline construction and coalescing, ported from PyTorch's
// MemoryProfile.timeline and MemoryProfileTimeline._coalesce_timeline.
#include "core/timeline/timeline.h"

#include <algorithm>
#include <climits>
#include <cstdio>

#include "core/model/flat_map.h"

namespace memtl {

std::string_view ActionName(Action a) {
  switch (a) {
    case Action::kPreexisting:
      return "preexisting";
    case Action::kCreate:
      return "create";
    case Action::kIncrementVersion:
      return "increment_version";
    case Action::kDestroy:
      return "destroy";
  }
  return "?";
}

namespace {

// Whether PyTorch's category snapshot has the key: the graph mentions it, or
// a pass categorized it by id (the keys of passes/queries.cpp's
// AllTensorVersions, the same rule).
bool InSnapshot(const DataFlowGraph& graph, const CategoryDict& cats, KeySlot key) {
  return graph.last_version(key).valid() || cats.set_by_id(key);
}

bool TimelineBefore(const TimelineEvent& a, const TimelineEvent& b) {
  return a.time != b.time ? a.time < b.time : a.action < b.action;
}

}  // namespace

void SortNearlySorted(TimelineEvent* first, TimelineEvent* last) {
  const size_t n = static_cast<size_t>(last - first);
  size_t budget = 16 * n + 4096;  // element moves
  for (size_t i = 1; i < n; ++i) {
    if (!TimelineBefore(first[i], first[i - 1])) continue;
    const TimelineEvent v = first[i];
    size_t j = i;
    while (j > 0 && TimelineBefore(v, first[j - 1]) && budget > 0) {
      first[j] = first[j - 1];
      --j;
      --budget;
    }
    first[j] = v;  // ahead only of larger elements: equal ones keep their order
    if (budget == 0) {
      std::stable_sort(first, last, TimelineBefore);
      return;
    }
  }
}

Expected<std::vector<TimelineEvent>> BuildTimeline(const OpTree& tree, const KeyTable& keys,
                                                   const DataFlowGraph& graph, const SizeMap& sizes,
                                                   const std::vector<bool>& untracked_live,
                                                   const CategoryDict& cats, Diagnostics& diag,
                                                   const std::vector<uint8_t>& inferred) {
  const Trace& trace = tree.trace();
  if (untracked_live.size() != trace.allocs.size()) {
    return Status::Error("internal error: the untracked allocations' liveness has " +
                         std::to_string(untracked_live.size()) + " entries for " +
                         std::to_string(trace.allocs.size()) + " allocation records");
  }
  if (!inferred.empty() && inferred.size() != trace.allocs.size()) {
    return Status::Error("internal error: the inferred categories have " +
                         std::to_string(inferred.size()) + " entries for " +
                         std::to_string(trace.allocs.size()) + " allocation records");
  }
  // Allocations with no tensor identity first, in their own array; the
  // keyed events go after room for them in `out`, and a merge puts both in
  // order at the end.
  std::vector<TimelineEvent> unknown;
  unknown.reserve(2 * trace.allocs.size());  // an upper bound, never regrown

  // Allocations in tree order: tensor allocations remember their times (the
  // last one seen per key); untracked ones go straight to the timeline, as
  // (pointer, device) liveness made them (UntrackedAllocationsLive).
  constexpr int64_t kNever = INT64_MIN;
  PerKey<int64_t> alloc_time(keys.size(), kNever), free_time(keys.size(), kNever);
  for (uint32_t e : tree.preorder()) {
    const Event& ev = trace.events[e];
    if (ev.kind != EventKind::kAlloc) continue;
    const AllocInfo& a = trace.allocs[ev.payload];
    const bool is_allocation = a.bytes > 0;
    if (const KeySlot key = keys.SlotOfAlloc(ev.payload); key.valid()) {
      (is_allocation ? alloc_time : free_time)[key] = trace.event_t0[e];
      continue;
    }
    TimelineEvent te;
    te.device = a.device;
    te.time = trace.event_t0[e];
    // The inferred category, where there is one (TimelineEvent::inferred).
    if (!inferred.empty() && inferred[ev.payload] < kNumCategories)
      te.ver = inferred[ev.payload] + 1;
    if (is_allocation) {
      te.action = untracked_live[ev.payload] ? Action::kIncrementVersion : Action::kCreate;
      te.bytes = a.bytes;
      unknown.push_back(te);
    } else {
      te.action = Action::kDestroy;
      te.bytes = -a.bytes;
      unknown.push_back(te);
      if (!untracked_live[ev.payload]) {
        te.time = -1;
        te.action = Action::kPreexisting;
        unknown.push_back(te);
      }
    }
  }

  std::vector<TimelineEvent> out;
  out.reserve(unknown.size() + graph.edges().size() + graph.edges().size() / 4 + 16);
  out.resize(unknown.size());
  auto push = [&](int64_t t, Action action, KeySlot key, Version version) {
    TimelineEvent te;
    te.time = t;
    te.action = action;
    te.slot = key.value();
    te.device = keys[key].device;
    te.ver = version.value();
    if (!sizes.contains(key)) {
      diag.Add("tensor with no known size",
               "T" + std::to_string(keys[key].id.value()) + " counted as 0 bytes");
    }
    te.bytes = sizes[key];
    out.push_back(te);
  };
  // Keys in the snapshot (InSnapshot) with no allocation existed
  // before the trace began.
  for (const KeySlot k : keys.slots()) {
    if (InSnapshot(graph, cats, k) && alloc_time[k] == kNever)
      push(-1, Action::kPreexisting, k, Version(0));
  }
  for (const auto& node : graph.nodes()) {
    for (const FlowEdge* e = graph.begin(node); e != graph.end(node); ++e) {
      const KeySlot key = e->key();
      if (e->is_allocation()) {
        push(alloc_time[key], Action::kCreate, key, Version(0));
      } else if (e->mutated == 1) {
        push(trace.event_t0[node.event], Action::kIncrementVersion, key, e->input());
      }
      if (e->is_deletion())
        push(free_time[key], Action::kDestroy, key, std::max(graph.last_version(key), Version(0)));
    }
  }
  // A split storage ends, unseen, just before its address is allocated
  // again (a nanosecond before, so that the two never count together).
  for (const KeyTable::UnseenEnd& end : keys.ended_unseen) {
    const int64_t t = trace.event_t0[end.event];
    push(t > 0 ? t - 1 : t, Action::kDestroy, end.key,
         std::max(graph.last_version(end.key), Version(0)));
  }
  // PyTorch sorts stably by (time, action). Both runs are nearly in that
  // order already (records arrive in time order; only events inside one op
  // are out of place), so each is insertion-sorted in place, and the merge
  // takes from the unknown run first on ties, as it was inserted first.
  const size_t a = unknown.size();
  SortNearlySorted(unknown.data(), unknown.data() + a);
  SortNearlySorted(out.data() + a, out.data() + out.size());
  size_t w = 0, i = 0, j = a;
  while (i < a && j < out.size())
    out[w++] = TimelineBefore(out[j], unknown[i]) ? out[j++] : unknown[i++];
  while (i < a) out[w++] = unknown[i++];
  return out;
}

int CategoryIndexOf(const CategoryDict& cats, const TimelineEvent& e, Version version) {
  return e.has_key() ? ExportIndex(cats.Get(e.key(), version)) : ExportIndex(e.inferred());
}

namespace {

// PyTrueDivTrunc1000 of a magnitude up to 2^63 (the result is below 2^54),
// in 64-bit integers. Python rounds the exact quotient x = q + r/1000 to 53
// significant bits, half to even, then truncates.
int64_t TrueDivTrunc1000(uint64_t t) {
  // Below 2^53 the operands are exact doubles and IEEE division rounds
  // correctly, as Python's int / int does.
  if (t < (uint64_t{1} << 53)) return static_cast<int64_t>(static_cast<double>(t) / 1000.0);
  const uint64_t q = t / 1000;
  const uint64_t r = t % 1000;
  const int bits = 64 - __builtin_clzll(q);
  if (bits <= 53) {
    // x's grid is 2^-k above the integer q: truncated, x is q unless r/1000
    // rounds up to 1 on that grid, i.e. unless it is at least halfway from
    // the grid's last point below 1 (1 - 2^-k) to 1. A tie goes to the even
    // mantissa: q + 1's when k > 0, q's or q + 1's by q's parity when k = 0.
    const int k = 53 - bits;
    if (k == 0) return static_cast<int64_t>(q + (r > 500 || (r == 500 && (q & 1)) ? 1 : 0));
    const bool up = (r << (k + 1)) >= 1000 * ((uint64_t{1} << (k + 1)) - 1);
    return static_cast<int64_t>(q + (up ? 1 : 0));
  }
  // 54 or 55 bits: the grid is 2^s, so the rounded quotient is an integer
  // (a multiple of 2^s) and truncation keeps it.
  const int s = bits - 53;
  const uint64_t d = uint64_t{1000} << s;
  uint64_t n = t / d;
  const uint64_t rem = t % d;
  if (2 * rem > d || (2 * rem == d && (n & 1))) ++n;
  return static_cast<int64_t>(n << s);
}

}  // namespace

int64_t MicrosOf(const TimelineEvent& e) { return e.time == -1 ? -1 : PyTrueDivTrunc1000(e.time); }

int64_t PyTrueDivTrunc1000(int64_t t) {
  // int() truncates toward zero and the rounding is symmetric, so the sign
  // comes off first; in unsigned arithmetic, where -(-2^63) exists.
  const auto magnitude = static_cast<uint64_t>(t);
  return t < 0 ? -TrueDivTrunc1000(0 - magnitude) : TrueDivTrunc1000(magnitude);
}

namespace {

int64_t MinTime(const std::vector<TimelineEvent>& timeline, DeviceIndex device) {
  int64_t t_min = -1;
  for (const auto& e : timeline) {
    if (e.device != device) continue;
    const int64_t t = MicrosOf(e);
    if (t_min == -1 || (t < t_min && t > 0)) t_min = t;
  }
  return t_min;
}

}  // namespace

void CoalescedTimes(const std::vector<TimelineEvent>& timeline, DeviceIndex device,
                    const std::function<void(int64_t)>& time) {
  const int64_t t_min = MinTime(timeline, device);
  bool any = false;
  int64_t last = 0;
  for (const auto& e : timeline) {
    if (e.device != device) continue;
    const int64_t t = MicrosOf(e);
    if (any && t == last) continue;
    any = true;
    last = t;
    time(t < 0 ? t_min : t);
  }
}

namespace {

// The row walk behind CoalescedSizes and CoalescedRows; `t_min` replaces
// the pre-existing time (-1) in the times passed to `row`.
template <typename Row>
void WalkRows(const std::vector<TimelineEvent>& timeline, const CategoryDict& cats,
              DeviceIndex device, int64_t t_min, Row&& row) {
  auto shown = [t_min](int64_t t) { return t < 0 ? t_min : t; };
  // A row is the sizes after every event at its time: it is emitted when the
  // next time starts, and at the end.
  std::array<int64_t, 9> sizes{};
  bool any = false;
  int64_t last = 0;
  auto update = [&](const TimelineEvent& e, Version version, int64_t delta) {
    sizes[CategoryIndexOf(cats, e, version) + 1] += delta;
  };
  for (const auto& e : timeline) {
    if (e.device != device) continue;
    const int64_t t = MicrosOf(e);
    if (any && t != last) row(shown(last), sizes);
    any = true;
    last = t;
    switch (e.action) {
      case Action::kPreexisting:
      case Action::kCreate:
        update(e, e.version(), e.bytes);
        break;
      case Action::kIncrementVersion:
        update(e, e.version(), -e.bytes);
        update(e, e.version().next(), e.bytes);
        break;
      case Action::kDestroy:
        update(e, e.version(), -e.bytes);
        break;
    }
  }
  if (any) row(shown(last), sizes);
}

}  // namespace

void CoalescedSizes(const std::vector<TimelineEvent>& timeline, const CategoryDict& cats,
                    DeviceIndex device,
                    const std::function<void(const std::array<int64_t, 9>&)>& row) {
  WalkRows(timeline, cats, device, 0,
           [&](int64_t, const std::array<int64_t, 9>& sizes) { row(sizes); });
}

void CoalescedRows(const std::vector<TimelineEvent>& timeline, const CategoryDict& cats,
                   DeviceIndex device,
                   const std::function<void(int64_t, const std::array<int64_t, 9>&)>& row) {
  WalkRows(timeline, cats, device, MinTime(timeline, device), row);
}

std::vector<int64_t> PeakPerDevice(const std::vector<TimelineEvent>& timeline, size_t num_devices) {
  struct Live {
    int64_t bytes = 0;
    int64_t row_us = 0;
    bool any = false;
  };
  std::vector<Live> live(num_devices);
  std::vector<int64_t> peak(num_devices, -1);
  for (const TimelineEvent& e : timeline) {
    if (e.device >= num_devices) continue;
    Live& d = live[e.device];
    if (const int64_t t = MicrosOf(e); d.any && t != d.row_us) {
      peak[e.device] = std::max(peak[e.device], d.bytes);  // the row before ends
      d.row_us = t;
    } else if (!d.any) {
      d.any = true;
      d.row_us = t;
    }
    // A version bump moves bytes between categories, not in or out.
    if (e.action == Action::kDestroy) d.bytes -= e.bytes;
    if (e.action == Action::kCreate || e.action == Action::kPreexisting) d.bytes += e.bytes;
  }
  for (size_t d = 0; d < num_devices; ++d) {
    if (live[d].any) peak[d] = std::max(peak[d], live[d].bytes);
  }
  return peak;
}

CoalescedTimeline Coalesce(const std::vector<TimelineEvent>& timeline, const CategoryDict& cats,
                           DeviceIndex device) {
  CoalescedTimeline out;
  CoalescedTimes(timeline, device, [&](int64_t t) { out.times.push_back(t); });
  CoalescedSizes(timeline, cats, device,
                 [&](const std::array<int64_t, 9>& row) { out.sizes.push_back(row); });
  return out;
}

namespace {

// The record behind a timeline entry, for an error message: the first
// allocation event at its time on its device with its key (or none), else
// the first event at its time (a version bump's op).
std::string RecordOf(const Trace& trace, const KeyTable& keys, const TimelineEvent& e) {
  if (e.action == Action::kPreexisting && e.has_key()) {
    return "T" + std::to_string(keys[e.key()].id.value()) +
           " (pre-existing, sized by its observations)";
  }
  uint32_t found = kNone32;
  for (uint32_t i = 0; i < trace.events.size() && found == kNone32; ++i) {
    const Event& ev = trace.events[i];
    if (ev.kind != EventKind::kAlloc || trace.allocs[ev.payload].device != e.device) continue;
    if (trace.event_t0[i] == e.time && keys.SlotOfAlloc(ev.payload) == e.key()) found = i;
  }
  for (uint32_t i = 0; i < trace.events.size() && found == kNone32; ++i) {
    if (trace.event_t0[i] == e.time) found = i;
  }
  if (found == kNone32) return "t=" + std::to_string(e.time);
  return "\"" + trace.Name(trace.events[found]).substr(0, 80) + "\" (event " +
         std::to_string(found) + ", t=" + std::to_string(e.time) + ")";
}

}  // namespace

Status CheckTimelineSums(const Trace& trace, const KeyTable& keys,
                         const std::vector<TimelineEvent>& timeline, const CategoryDict& cats,
                         Diagnostics& diag) {
  // Per device, the bytes of each category and the sum of their
  // magnitudes, which bounds every sum an export forms of them. Within one
  // time the walk adds event by event, so every event is checked, not just
  // the rows.
  //
  // The same walk counts the rows (WalkRows': the total after every event
  // of one microsecond) whose live bytes are below zero. The timeline pairs
  // allocations without a tensor to their frees in the op tree's pre-order
  // (PyTorch's rule) and orders everything by time; where the two orders
  // disagree (records not in pre-order, roots whose times go backwards, a
  // time before t=-1 where memory from before profiling is counted), a row
  // holds less than nothing, as PyTorch's would. Counted, so that such a
  // number is never silent (an error with --strict).
  struct Sums {
    std::array<int64_t, 9> bytes{};
    __int128 magnitude = 0;
    __int128 total = 0;    // the live bytes, all categories together
    int64_t row_us = 0;    // the current row's microsecond
    int64_t row_time = 0;  // and the time of its first event, for the message
    bool any = false;
  };
  const size_t num_devices = trace.devices.size();
  std::vector<Sums> devices(num_devices + 1);
  constexpr __int128 kMax = INT64_MAX;
  uint64_t negative_rows = 0;
  std::string example;
  auto end_row = [&](size_t d) {
    const Sums& s = devices[d];
    if (d >= num_devices || !s.any || s.total >= 0) return;
    if (negative_rows++ == 0) {
      example = trace.devices[d].name + " at t=" + std::to_string(s.row_time) +
                " ns: " + std::to_string(static_cast<int64_t>(s.total)) + " B";
    }
  };
  for (const TimelineEvent& e : timeline) {
    const size_t di = std::min<size_t>(e.device, num_devices);
    Sums& d = devices[di];
    if (const int64_t t = MicrosOf(e); !d.any || t != d.row_us) {
      end_row(di);
      d.any = true;
      d.row_us = t;
      d.row_time = e.time;
    }
    auto add = [&](Version version, int64_t delta) {
      int64_t& b = d.bytes[CategoryIndexOf(cats, e, version) + 1];
      const __int128 now = static_cast<__int128>(b) + delta;
      d.magnitude += (now < 0 ? -now : now) - (b < 0 ? -__int128{b} : __int128{b});
      if (d.magnitude > kMax) return false;
      b = static_cast<int64_t>(now);
      d.total += delta;
      return true;
    };
    const int64_t bytes = e.bytes;
    const bool ok = e.action == Action::kIncrementVersion
                        ? add(e.version(), -bytes) && add(e.version().next(), bytes)
                    : e.action == Action::kDestroy ? add(e.version(), -bytes)
                                                   : add(e.version(), bytes);
    if (!ok) {
      const std::string device = di < num_devices ? trace.devices[di].name : "?";
      return Status::Error("the live bytes on " + device + " pass 2^63-1 at " +
                           RecordOf(trace, keys, e) + " (" + std::to_string(bytes) +
                           " bytes); no 64-bit total can hold them");
    }
  }
  for (size_t d = 0; d < num_devices; ++d) end_row(d);
  if (negative_rows > 0) {
    diag.Add("live bytes below zero (the trace's order and its times disagree)", example,
             negative_rows);
  }
  return Status();
}

std::string FormatTimeline(const Trace& trace, const KeyTable& keys,
                           const std::vector<TimelineEvent>& timeline, const CategoryDict& cats) {
  std::string out;
  char buf[256];
  for (const auto& e : timeline) {
    std::string key = e.has_key() ? "T" + std::to_string(keys[e.key()].id.value()) + "(v" +
                                        std::to_string(e.version().value()) + ")"
                                  : std::string("[memory]");
    std::string cat(e.has_key() ? CategoryName(cats.Get(e.key(), e.version())) : "unknown");
    if (const auto inferred = e.inferred())
      cat = std::string(CategoryName(inferred)) + " (inferred)";
    if (e.action == Action::kIncrementVersion && e.has_key()) {
      const std::string next(CategoryName(cats.Get(e.key(), e.version().next())));
      if (next != cat) cat += " -> " + next;
    }
    std::snprintf(buf, sizeof buf, "%-18s %-16s %12lld B  %s",
                  std::string(ActionName(e.action)).c_str(), key.c_str(),
                  static_cast<long long>(e.bytes), cat.c_str());
    out += buf;
    if (trace.devices.size() > 1) out += "  " + trace.devices[e.device].name;
    out += '\n';
  }
  return out;
}

}  // namespace memtl

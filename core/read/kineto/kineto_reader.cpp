// Kineto traces into the Trace (kineto_reader.h): the parts of the stream
// (kineto_stream.h) parsed into compact records (kineto_parse.h), then
// nested by time per thread, emitted in pre-order with roots in start-time
// order, and the allocated totals checked against the trace's own, with the
// memory events replayed in time order (the allocator's).
#include "core/read/kineto/kineto_reader.h"

#include <algorithm>
#include <new>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/model/checked.h"
#include "core/model/flat_map.h"
#include "core/model/quote.h"
#include "core/read/common/kineto_stream.h"
#include "core/read/kineto/kineto_nesting.h"
#include "core/read/kineto/kineto_parse.h"
#include "core/read/kineto/kineto_pre_profile.h"

namespace memtl {

namespace {

using read::KinetoEvent;
using read::KinetoKind;
using read::KinetoMemory;
using read::KinetoParser;
using read::Nesting;

// Sort rank at one start time: python calls around the ops they call,
// annotations around ops, memory events inside all of them.
int Rank(KinetoKind k) {
  switch (k) {
    case KinetoKind::kPython:
      return 0;
    case KinetoKind::kAnnotation:
      return 1;
    case KinetoKind::kOp:
      return 2;
    case KinetoKind::kMemory:
      break;
  }
  return 3;
}

// Kineto has no parent links: an event's parent is the innermost op or
// python call on its thread whose span holds it. Intervals are [start, end)
// among themselves (back-to-back ops are siblings), and one that ends after
// another is not inside it, though it starts there (a record_function is
// entered in a python call that returns before it ends); a memory event at
// an op's very end is still inside it (traces of whole microseconds round
// an op's end down onto its last frees).
Nesting Nest(const std::vector<KinetoEvent>& ev) {
  Nesting n;
  n.order.resize(ev.size());
  for (uint32_t i = 0; i < ev.size(); ++i) n.order[i] = i;
  std::sort(n.order.begin(), n.order.end(), [&](uint32_t a, uint32_t b) {
    const KinetoEvent& x = ev[a];
    const KinetoEvent& y = ev[b];
    if (x.thread != y.thread) return x.thread < y.thread;
    if (x.ts != y.ts) return x.ts < y.ts;
    const bool xm = x.kind == KinetoKind::kMemory, ym = y.kind == KinetoKind::kMemory;
    if (xm != ym) return ym;
    if (x.dur != y.dur) return x.dur > y.dur;
    if (Rank(x.kind) != Rank(y.kind)) return Rank(x.kind) < Rank(y.kind);
    return a < b;
  });
  n.parent.assign(ev.size(), kNone32);
  std::vector<uint32_t> stack;
  for (uint32_t pos = 0; pos < n.order.size(); ++pos) {
    const KinetoEvent& e = ev[n.order[pos]];
    if (pos > 0 && ev[n.order[pos - 1]].thread != e.thread) stack.clear();
    const bool memory = e.kind == KinetoKind::kMemory;
    while (!stack.empty()) {
      const KinetoEvent& top = ev[n.order[stack.back()]];
      const int64_t end = top.ts + top.dur;
      if (memory ? e.ts <= end : e.ts < end && e.ts + e.dur <= end) break;
      stack.pop_back();
    }
    if (stack.empty()) {
      n.roots.push_back({pos, pos, e.ts});
    } else {
      n.parent[pos] = stack.back();
    }
    if (!memory) stack.push_back(pos);
  }
  for (size_t r = 0; r < n.roots.size(); ++r)
    n.roots[r].end =
        r + 1 < n.roots.size() ? n.roots[r + 1].begin : static_cast<uint32_t>(n.order.size());
  std::stable_sort(n.roots.begin(), n.roots.end(),
                   [](const Nesting::Root& a, const Nesting::Root& b) { return a.ts < b.ts; });
  return n;
}

// The memory events (indices into `ev`) in the allocator's order: by
// time, ties in emission order (roots in start-time order, each subtree in
// pre-order). Emission order itself is not the allocator's where roots of
// two threads overlap in time (on a GPU the backward pass runs on the
// autograd engine's device thread): the caching allocator hands a freed
// block out again at once, so in emission order an address can be
// allocated again before the free that released it.
std::vector<uint32_t> MemoryInTimeOrder(const std::vector<KinetoEvent>& ev, const Nesting& n) {
  std::vector<uint32_t> order;
  for (const Nesting::Root& root : n.roots)
    for (uint32_t pos = root.begin; pos < root.end; ++pos)
      if (ev[n.order[pos]].kind == KinetoKind::kMemory) order.push_back(n.order[pos]);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return ev[a].ts < ev[b].ts; });
  return order;
}

// The memory events' addresses and what each changes in the timeline's
// total, replayed in time order (`by_time`), the order in which the
// timeline pairs the allocations without a tensor of a trace read from
// Kineto (TraceHeader::pairs_in_time_order): an allocation at a live
// address changes nothing (a version bump), a free of an address never
// allocated in the profile was memory from before it (pre-existing).
struct Replay {
  std::vector<uint64_t> addr;        // per memory record
  std::vector<int64_t> change;       // per memory record: its change of the total
  std::vector<int64_t> preexisting;  // per device
  uint64_t reused_live = 0;
  uint64_t paired_by_size = 0;
  // Whether a device's memory from before the profile passes 2^63-1
  // bytes, and the event (index into `ev`) where it does.
  bool overflow = false;
  uint32_t overflow_event = 0;
};

Replay ReplayMemory(const std::vector<KinetoEvent>& ev, const std::vector<KinetoMemory>& mem,
                    const std::vector<uint32_t>& by_time, size_t num_devices) {
  Replay r;
  r.addr.resize(mem.size());
  r.change.resize(mem.size());
  r.preexisting.assign(num_devices, 0);
  struct Live {
    uint64_t addr;
    DeviceIndex device;
    bool operator==(const Live&) const = default;
  };
  struct LiveHash {
    size_t operator()(const Live& l) const { return std::hash<uint64_t>()(l.addr) ^ l.device; }
  };
  std::unordered_map<Live, bool, LiveHash> live;
  // Without addresses: per (device, size), the synthetic addresses live.
  std::unordered_map<uint64_t, std::vector<uint64_t>> by_size;
  uint64_t next_synthetic = uint64_t{1} << 63;
  for (const uint32_t i : by_time) {
    const KinetoEvent& e = ev[i];
    const KinetoMemory& m = mem[e.ref];
    uint64_t addr = m.addr;
    if (!m.has_addr) {
      const uint64_t size_key =
          static_cast<uint64_t>(m.bytes > 0 ? m.bytes : -m.bytes) << 16 | m.device;
      std::vector<uint64_t>& stack = by_size[size_key];
      if (m.bytes > 0 || stack.empty()) {
        addr = next_synthetic++;
        if (m.bytes > 0) stack.push_back(addr);
      } else {
        addr = stack.back();
        stack.pop_back();
        ++r.paired_by_size;
      }
    }
    r.addr[e.ref] = addr;
    const Live key{addr, m.device};
    if (m.bytes > 0) {
      if (!live.emplace(key, true).second) {
        ++r.reused_live;
        r.change[e.ref] = 0;
      } else {
        r.change[e.ref] = m.bytes;
      }
    } else {
      if (live.erase(key) == 0) {
        const std::optional<int64_t> sum = CheckedSub(r.preexisting[m.device], m.bytes);
        if (!sum) {
          r.overflow = true;
          r.overflow_event = i;
          return r;
        }
        r.preexisting[m.device] = *sum;
      }
      r.change[e.ref] = m.bytes;
    }
  }
  return r;
}

Status BytesOverflow(const std::string& name, const std::string& device, int64_t t_ns) {
  return Status::Error(name + ": the allocated bytes on " + device + " pass 2^63-1 at t=" +
                       std::to_string(t_ns) + " ns (the trace's \"Bytes\" add up past any memory)");
}

// Every time memtl makes of the trace's: baseTimeNanoseconds plus an
// event's "ts" (and an op's "dur"), each below 2^62 as read, so only the
// sums can overflow. A base time that puts events past 2^63-1 ns is an
// error: which event is first or nested in which would be wrong.
Status CheckTimes(const KinetoParser& p, const std::string& name) {
  for (const KinetoEvent& e : p.events) {
    const std::optional<int64_t> start = CheckedAdd(p.base_ns, e.ts);
    const std::optional<int64_t> end =
        start && e.kind != KinetoKind::kMemory ? CheckedAdd(*start, e.dur) : start;
    if (!end) {
      return Status::Error(name + ": \"baseTimeNanoseconds\" " + std::to_string(p.base_ns) +
                           " plus an event's \"ts\" (" + std::to_string(e.ts) + " ns)" +
                           (start ? " and \"dur\" (" + std::to_string(e.dur) + " ns)" : "") +
                           " is past 2^63-1 ns");
    }
  }
  return {};
}

// Per device, the memory allocated before the profile and never freed in
// it (from the trace's first "Total Allocated"), and the check of every
// later total: a change of memtl's total that differs from the
// allocator's is counted, and the totals are compared again from there.
Expected<std::vector<int64_t>> CheckTotals(const Trace& t, const std::vector<KinetoEvent>& ev,
                                           const std::vector<KinetoMemory>& mem,
                                           const std::vector<uint32_t>& by_time, const Replay& r,
                                           int64_t base_ns, const std::string& name,
                                           Diagnostics& diag) {
  const size_t num_devices = t.devices.size();
  std::vector<int64_t> running = r.preexisting;  // memtl's total
  std::vector<int64_t> unseen(num_devices, 0);
  std::vector<int64_t> offset(num_devices, 0);  // trace's total - memtl's
  std::vector<bool> calibrated(num_devices, false);
  for (const uint32_t i : by_time) {
    const KinetoMemory& m = mem[ev[i].ref];
    // Every sum of the trace's bytes is checked: past 2^63-1 it is an
    // error, as the timeline's live bytes are, never a wrapped total.
    const std::optional<int64_t> total = CheckedAdd(running[m.device], r.change[ev[i].ref]);
    const std::optional<int64_t> diff =
        total ? CheckedSub(m.total_allocated, *total) : std::nullopt;
    const std::optional<int64_t> shown =
        total ? CheckedAdd(*total, unseen[m.device]) : std::nullopt;
    if (!total || (m.has_total && (!diff || !shown)))
      return BytesOverflow(name, t.devices[m.device].name, base_ns + ev[i].ts);
    running[m.device] = *total;
    if (!m.has_total) continue;
    if (!calibrated[m.device]) {
      calibrated[m.device] = true;
      offset[m.device] = *diff;
      unseen[m.device] = std::max<int64_t>(*diff, 0);
      if (*diff < 0) {  // memtl counts more than the allocator holds
        diag.Add("allocated total that differs from the trace's \"Total Allocated\"",
                 t.devices[m.device].name + " at t=" + std::to_string(base_ns + ev[i].ts) +
                     " ns: memtl " + std::to_string(running[m.device]) + " B, the trace " +
                     std::to_string(m.total_allocated) + " B");
      }
      continue;
    }
    if (*diff != offset[m.device]) {
      diag.Add("allocated total that differs from the trace's \"Total Allocated\"",
               t.devices[m.device].name + " at t=" + std::to_string(base_ns + ev[i].ts) +
                   " ns: memtl " + std::to_string(*shown) + " B, the trace " +
                   std::to_string(m.total_allocated) + " B");
      offset[m.device] = *diff;
    }
  }
  return unseen;
}

// The reserved totals where they change, in time order, of the devices
// that report one other than 0.
std::vector<ReservedPoint> ReservedSeries(const std::vector<KinetoEvent>& ev,
                                          const std::vector<KinetoMemory>& mem,
                                          const std::vector<uint32_t>& by_time, int64_t base_ns,
                                          size_t num_devices) {
  std::vector<ReservedPoint> points;
  std::vector<int64_t> last(num_devices, -1);
  std::vector<bool> nonzero(num_devices, false);
  for (const uint32_t i : by_time) {
    const KinetoMemory& m = mem[ev[i].ref];
    if (!m.has_reserved || m.total_reserved == last[m.device]) continue;
    last[m.device] = m.total_reserved;
    nonzero[m.device] = nonzero[m.device] || m.total_reserved != 0;
    points.push_back({base_ns + ev[i].ts, m.total_reserved, m.device});
  }
  std::erase_if(points, [&](const ReservedPoint& p) { return !nonzero[p.device]; });
  return points;
}

Expected<KinetoRead> Build(KinetoParser& p, KinetoRead r, const std::string& name) {
  Trace& t = r.trace;
  if (p.memory.empty()) {
    return Status::Error(
        name +
        ": this Kineto trace has no [memory] events (profile_memory was off); record with "
        "torch.profiler.profile(profile_memory=True, record_shapes=True, with_stack=True) and "
        "prof.export_chrome_trace(\"trace.json\"), or save with memtl.save(prof, "
        "\"run.trace.jsonl.gz\") for categories");
  }
  if (p.events.size() + t.devices.size() >= kMaxEvents)
    return Status::Error(name + ": more than 2^30 events");
  if (Status s = CheckTimes(p, name); !s.ok()) return s;
  t.header.version = kTraceFormatVersion;
  t.header.rank = p.rank;
  t.header.world_size = p.world_size;
  t.header.producer = p.schema_version >= 0
                          ? "kineto (schemaVersion " + std::to_string(p.schema_version) + ")"
                          : "kineto";
  t.header.profile_memory = p.profile_memory;
  t.header.pairs_in_time_order = true;
  const Nesting n = Nest(p.events);
  const std::vector<uint32_t> by_time = MemoryInTimeOrder(p.events, n);
  const Replay replay = ReplayMemory(p.events, p.memory, by_time, t.devices.size());
  if (replay.overflow) {
    const KinetoEvent& e = p.events[replay.overflow_event];
    return BytesOverflow(name, t.devices[p.memory[e.ref].device].name, p.base_ns + e.ts);
  }
  if (replay.reused_live > 0) {
    r.diagnostics.Add("allocation at an address already live (a free missing from the trace?)",
                      "counted as PyTorch counts it: no change of the total", replay.reused_live);
  }
  if (replay.paired_by_size > 0) {
    r.diagnostics.Add("free paired with an allocation by its size (the trace has no \"Addr\")",
                      "the latest live allocation of that size on that device",
                      replay.paired_by_size);
  }
  const Expected<std::vector<int64_t>> checked =
      CheckTotals(t, p.events, p.memory, by_time, replay, p.base_ns, name, r.diagnostics);
  if (!checked.ok()) return checked.status();
  const std::vector<int64_t>& unseen = checked.value();
  r.reserved = ReservedSeries(p.events, p.memory, by_time, p.base_ns, t.devices.size());

  // Memory from before the profile that the events never free: one
  // allocation per device at its first memory event, as a root.
  std::vector<int64_t> first_ts(t.devices.size(), INT64_MAX);
  for (const KinetoEvent& e : p.events)
    if (e.kind == KinetoKind::kMemory)
      first_ts[p.memory[e.ref].device] = std::min(first_ts[p.memory[e.ref].device], e.ts);
  // Split by what the trace says of it (kineto_pre_profile.h), but not for
  // the execution-trace join, which maps that memory to its tensors.
  const read::PreProfileSplit split =
      p.want_rf_ids ? read::PreProfileSplit{std::vector<int64_t>(unseen.size(), 0),
                                            std::vector<int64_t>(unseen.size(), 0)}
                    : read::SplitPreProfile(p, t.strings, n, unseen);
  uint64_t next_synthetic = kPreProfileAddress;
  auto add_block = [&](int64_t bytes, size_t d, uint64_t address) {
    Event e;
    e.kind = EventKind::kAlloc;
    e.payload = static_cast<uint32_t>(t.allocs.size());
    AllocInfo a;
    a.bytes = std::min(bytes, kMaxAllocBytes);
    a.device = static_cast<DeviceIndex>(d);
    t.allocs.push_back(a);
    t.alloc_ptrs.push_back(address);
    t.events.push_back(e);
    t.event_t0.push_back(p.base_ns + first_ts[d]);
  };
  for (size_t d = 0; d < unseen.size(); ++d) {
    if (unseen[d] <= 0) continue;
    const int64_t rest = unseen[d] - split.leaves[d] - split.state[d];
    if (rest > 0) add_block(rest, d, next_synthetic++);
    if (split.leaves[d] > 0)
      add_block(split.leaves[d], d, PreProfileAddress(PreProfilePart::kLeaves, d));
    if (split.state[d] > 0)
      add_block(split.state[d], d, PreProfileAddress(PreProfilePart::kOptimizerState, d));
  }

  constexpr std::string_view kEvaluate = "autograd::engine::evaluate_function: ";
  std::vector<uint32_t> index_of(n.order.size(), kNone32);
  for (const Nesting::Root& root : n.roots) {
    for (uint32_t pos = root.begin; pos < root.end; ++pos) {
      const KinetoEvent& k = p.events[n.order[pos]];
      Event e;
      const uint32_t parent_pos = n.parent[pos];
      e.parent = parent_pos == kNone32 ? kNone32 : index_of[parent_pos];
      switch (k.kind) {
        case KinetoKind::kOp:
        case KinetoKind::kAnnotation: {
          OpInfo op;
          op.args_begin = 0;
          op.refs_begin = 0;
          op.name = k.ref & (kMaxNames - 1);
          op.scope =
              k.kind == KinetoKind::kAnnotation ? RecordScope::kUserScope : RecordScope::kFunction;
          // Kineto names no scopes: a backward function is the op that
          // autograd's "evaluate_function: NAME" wraps.
          if (k.kind == KinetoKind::kOp && e.parent != kNone32) {
            const Event& pe = t.events[e.parent];
            if (pe.kind == EventKind::kOp) {
              const std::string& pname = t.strings.Get(t.ops[pe.payload].name);
              if (pname.size() > kEvaluate.size() && pname.starts_with(kEvaluate) &&
                  std::string_view(pname).substr(kEvaluate.size()) == t.strings.Get(k.ref))
                op.scope = RecordScope::kBackwardFunction;
            }
          }
          e.kind = EventKind::kOp;
          e.payload = static_cast<uint32_t>(t.ops.size());
          t.ops.push_back(op);
          if (p.want_rf_ids) {
            r.op_rf.push_back(k.rf != 0 ? p.rf_ids[k.rf] : 0);
            r.op_end.push_back(p.base_ns + k.ts + k.dur);
          }
          break;
        }
        case KinetoKind::kPython:
          e.kind = EventKind::kPy;
          e.payload = static_cast<uint32_t>(t.py_names.size());
          t.py_names.push_back(k.ref);
          t.py_linked.push_back(false);
          break;
        case KinetoKind::kMemory: {
          const KinetoMemory& m = p.memory[k.ref];
          e.kind = EventKind::kAlloc;
          e.payload = static_cast<uint32_t>(t.allocs.size());
          AllocInfo a;
          a.bytes = m.bytes;
          a.device = m.device;
          t.allocs.push_back(a);
          t.alloc_ptrs.push_back(replay.addr[k.ref]);
          DeviceInfo& d = t.devices[m.device];
          if (m.has_total)
            d.max_total_allocated = std::max(d.max_total_allocated, m.total_allocated);
          if (m.has_reserved)
            d.max_total_reserved = std::max(d.max_total_reserved, m.total_reserved);
          break;
        }
      }
      index_of[pos] = static_cast<uint32_t>(t.events.size());
      t.events.push_back(e);
      t.event_t0.push_back(p.base_ns + k.ts);
    }
  }
  t.Finish();
  return r;
}

Expected<KinetoRead> Read(OpenedInput in, const ReadOptions& options) {
  LineSource& src = *in.src;
  const std::string name = QuotePath(src.name());
  KinetoRead r;
  KinetoParser parser(&r.trace, &r.diagnostics);
  parser.want_rf_ids = !options.et_path.empty();
  read::KinetoStream stream(src, std::move(in.head), options.progress);
  try {
    bool done = false;
    while (!done) {
      switch (stream.Next()) {
        case read::KinetoStream::Part::kEnd:
          done = true;
          break;
        case read::KinetoStream::Part::kMember:
          parser.Member(stream.key(), stream.value());
          break;
        case read::KinetoStream::Part::kEvent:
          parser.Element(stream.value(), stream.events(), stream.line());
          break;
        case read::KinetoStream::Part::kCut: {
          const Status& input = src.status();
          const bool truncated = input.ok() || input.code() == StatusCode::kTruncated;
          if (!input.ok() && !(options.partial && truncated)) return input;
          if (!options.partial) {
            const uint64_t n = stream.events();
            return Status::Error(name + ": the trace is cut off after " + std::to_string(n) +
                                 (n == 1 ? " event" : " events") +
                                 " (the run was killed?); use --partial to analyze the events "
                                 "that are complete");
          }
          r.info.stopped_early = true;
          r.info.stopped_at_line = stream.line() + 1;
          done = true;
          break;
        }
      }
    }
  } catch (const read::KinetoStructureError& e) {
    return Status::Error(name + ": line " + std::to_string(stream.line()) + ": " + e.what());
  }
  r.info.lines = stream.line();
  return Build(parser, std::move(r), name);
}

Expected<KinetoRead> ReadGuarded(OpenedInput in, const ReadOptions& options) {
  const std::string name = QuotePath(in.src->name());
  return OutOfMemoryIsAnError(name, [&] { return Read(std::move(in), options); });
}

}  // namespace

Expected<KinetoRead> ReadKinetoInput(OpenedInput input, const ReadOptions& options) {
  return ReadGuarded(std::move(input), options);
}

Expected<KinetoRead> ReadKinetoString(std::string data, const std::string& name,
                                      const ReadOptions& options) {
  auto opened = OpenMemoryInput(std::move(data), name);
  if (!opened.ok()) return opened.status();
  OpenedInput& in = opened.value();
  if (in.format != InputFormat::kKineto)
    return Status::Error(QuotePath(name) + ": not a Kineto trace (" +
                         std::string(FormatName(in.format)) + ")");
  return ReadGuarded(std::move(in), options);
}

}  // namespace memtl

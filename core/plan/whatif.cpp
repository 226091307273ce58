// memtl whatif (whatif.h): the timeline as spans, and the replay that
// applies the changes to them and sums them again (whatif_sweep.cpp).
#include "core/plan/whatif.h"

#include <fnmatch.h>

#include <algorithm>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "core/explain/peak.h"
#include "core/plan/whatif_spans.h"

namespace memtl {

bool WhatIfChanges::Any() const {
  return shard_optimizer > 1 || shard_grads > 1 || shard_params > 1 || !checkpoint.empty() ||
         set_to_none.has_value() || !optimizer.empty() ||
         std::any_of(dtype_bytes.begin(), dtype_bytes.end(), [](int b) { return b > 0; });
}

const std::vector<OptimizerKind>& KnownOptimizers() {
  // From torch/optim's single-tensor implementations: the state tensors of
  // a parameter's size each keeps (their scalar step counts aside), and the
  // parameter-sized temporaries alive at once while it updates one
  // (Adam's `exp_avg_sq.sqrt()` and its quotient). docs/planning.md says
  // which were checked against real runs.
  static const std::vector<OptimizerKind> kinds = {
      {"sgd", 0, 0},
      {"sgd-momentum", 1, 0},
      {"adam", 2, 2},
      {"adamw", 2, 2},
      {"adam-amsgrad", 3, 2},
      {"adamax", 2, 1},
      {"nadam", 2, 2},
      {"radam", 2, 2},
      {"adagrad", 1, 1},
      {"rmsprop", 1, 1},
      {"rmsprop-momentum", 2, 1},
      {"adadelta", 2, 2},
      {"rprop", 2, 2},
      {"asgd", 2, 1},
  };
  return kinds;
}

int DtypeBytes(std::string_view dtype) {
  static const std::vector<std::pair<std::string_view, int>> kSizes = {
      {"float32", 4}, {"float", 4},   {"fp32", 4}, {"float64", 8},       {"double", 8},
      {"fp64", 8},    {"float16", 2}, {"half", 2}, {"fp16", 2},          {"bfloat16", 2},
      {"bf16", 2},    {"float8", 1},  {"fp8", 1},  {"float8_e4m3fn", 1}, {"float8_e5m2", 1}};
  for (const auto& [n, b] : kSizes) {
    if (dtype == n) return b;
  }
  return 0;
}

namespace whatif {

uint32_t CreatorOf(const ExplainInput& in, const PerValue<uint32_t>& creator, KeySlot key,
                   Version version) {
  if (in.graph.num_values() == 0 || key.value() >= in.keys.size() || version.value() < 0 ||
      version.value() >= in.graph.num_versions(key))
    return kNone32;
  return creator[in.graph.value(key, version)];
}

namespace {

bool ModelState(int category) { return category == 0 || category == 1 || category == 5; }

}  // namespace

Selection Select(const ExplainInput& in, const WhatIfChanges& changes,
                 const PerValue<uint32_t>& creator, const LazySubtrees& tree) {
  Selection s;
  s.key.assign(in.keys.size(), false);
  for (int c = 0; c < 8; ++c) s.unkeyed[static_cast<size_t>(c)] = ModelState(c);
  for (const TimelineEvent& e : in.timeline) {
    if (!e.has_key() || e.slot >= s.key.size()) continue;
    const Version v = e.version();
    bool state = ModelState(ExportIndex(in.categories.Get(e.key(), v)));
    if (e.action == Action::kIncrementVersion)
      state |= ModelState(ExportIndex(in.categories.Get(e.key(), v.next())));
    if (state) s.key[e.slot] = true;
  }
  // The keys a call allocates (their first version's creator) when a
  // change needs them: the optimizer step's, the checkpointed calls'.
  std::vector<std::pair<uint32_t, uint32_t>> calls;  // event ranges [first, last]
  const bool step = !changes.optimizer.empty() || changes.shard_optimizer > 1;
  if (!changes.checkpoint.empty()) {
    for (const std::string& pattern : changes.checkpoint) {
      for (const uint32_t m : MatchedModuleCalls(in.trace, tree, pattern))
        calls.emplace_back(m, tree.Get().Last(m));
    }
    std::sort(calls.begin(), calls.end());
  }
  if (!step && calls.empty()) return s;
  // Per key, its largest bytes and when it is freed (kNever: alive at the
  // end), for the calls' own temporaries.
  std::vector<int64_t> bytes, freed;
  if (!calls.empty()) {
    bytes.assign(s.key.size(), 0);
    freed.assign(s.key.size(), kNever);
    for (const TimelineEvent& e : in.timeline) {
      if (!e.has_key() || e.slot >= s.key.size()) continue;
      bytes[e.slot] = std::max<int64_t>(bytes[e.slot], e.bytes);
      freed[e.slot] = e.action == Action::kDestroy ? MicrosOf(e) : kNever;
    }
  }
  OptimizerCalls optim(in.trace);
  for (uint32_t k = 0; k < s.key.size(); ++k) {
    if (s.key[k]) continue;
    const uint32_t c = CreatorOf(in, creator, KeySlot(k), Version(0));
    if (c == kNone32) continue;
    if (step && optim.Inside(c)) {
      s.key[k] = true;
      continue;
    }
    const auto it = std::upper_bound(calls.begin(), calls.end(), std::make_pair(c, kNone32));
    if (it == calls.begin() || std::prev(it)->second < c) continue;
    const uint32_t call = std::prev(it)->first;
    if (freed[k] <= tree.Get().EndUs(call)) {
      int64_t& largest = s.freed_inside[call];
      largest = std::max(largest, bytes[k]);
    } else {
      s.key[k] = true;
    }
  }
  return s;
}

std::vector<Span> SpansOf(const ExplainInput& in, const Selection& selection,
                          const PerValue<uint32_t>& creator) {
  auto creator_of = [&](KeySlot k, Version v) { return CreatorOf(in, creator, k, v); };
  std::vector<Span> spans;
  // Key slot -> its open span (a tensor's key has one at a time); a raw
  // timeline's key is a category, alive many times at once: its other open
  // spans wait in `more`, the latest last.
  constexpr uint32_t kClosed = 0xffffffffu;
  std::vector<uint32_t> open(in.keys.size(), kClosed);
  absl::flat_hash_map<uint32_t, std::vector<uint32_t>> more;
  // Ends an open span of `slot` with `bytes` at `t`; false when none is
  // open (the free then stands alone, as the exports count it).
  auto close = [&](uint32_t slot, int64_t bytes, int64_t t) {
    if (slot < open.size() && open[slot] != kClosed && spans[open[slot]].bytes == bytes) {
      spans[open[slot]].end = t;
      open[slot] = kClosed;
      return true;
    }
    const auto it = more.find(slot);
    if (it == more.end()) return false;
    std::vector<uint32_t>& list = it->second;
    auto pick = std::find_if(list.rbegin(), list.rend(),
                             [&](uint32_t i) { return spans[i].bytes == bytes; });
    if (pick == list.rend()) return false;
    spans[*pick].end = t;
    list.erase(std::next(pick).base());
    return true;
  };
  auto opened = [&](uint32_t slot, size_t index) {
    const auto i = static_cast<uint32_t>(index);
    if (slot < open.size() && open[slot] == kClosed) {
      open[slot] = i;
    } else {
      more[slot].push_back(i);
    }
  };
  for (const TimelineEvent& e : in.timeline) {
    if (e.has_key() ? e.slot >= selection.key.size() || !selection.key[e.slot]
                    : !selection.unkeyed[static_cast<size_t>(ExportIndex(e.inferred()))]) {
      continue;
    }
    const int64_t t = MicrosOf(e);
    Span s;
    s.start = t;
    s.bytes = e.bytes;
    s.device = e.device;
    if (!e.has_key()) {
      // A bump moves no bytes: an event with no key keeps one category.
      if (e.action == Action::kIncrementVersion) continue;
      s.cls = static_cast<uint8_t>(ExportIndex(e.inferred()));
      s.cat = s.cls;
      if (e.action == Action::kDestroy) s.bytes = -s.bytes;
      spans.push_back(s);
      continue;
    }
    s.slot = e.slot;
    Version v = e.version();
    switch (e.action) {
      case Action::kPreexisting:
      case Action::kCreate:
        break;
      case Action::kIncrementVersion:
        if (!close(e.slot, e.bytes, t)) {
          Span gone = s;  // the old version's bytes leave its category
          gone.bytes = -s.bytes;
          gone.slot = KeySlot::kNone;
          gone.cls = gone.cat = static_cast<uint8_t>(CategoryIndexOf(in.categories, e, v));
          spans.push_back(gone);
        }
        v = v.next();
        break;
      case Action::kDestroy:
        if (!close(e.slot, e.bytes, t)) {
          s.bytes = -s.bytes;
          s.slot = KeySlot::kNone;
          s.cls = static_cast<uint8_t>(CategoryIndexOf(in.categories, e, v));
          s.cat = s.cls;
          spans.push_back(s);
        }
        continue;
    }
    s.version = v.value();
    s.creator = creator_of(e.key(), v);
    s.cls = static_cast<uint8_t>(ExportIndex(in.categories.Get(e.key(), v)));
    s.cat = s.cls;
    opened(e.slot, spans.size());
    spans.push_back(s);
  }
  return spans;
}

Subtrees SubtreesOf(const Trace& trace) {
  // Per python call name (string id): whether its calls are asked about.
  std::vector<int8_t> asked(trace.strings.size(), -1);
  auto is_asked = [&](const Event& e) {
    if (e.kind != EventKind::kPy) return false;
    const uint32_t name = trace.py_names[e.payload];
    if (asked[name] < 0) {
      const std::string& s = trace.strings.Get(name);
      asked[name] = s.starts_with("nn.Module: ") || s.find("torch/optim/") != std::string::npos;
    }
    return asked[name] == 1;
  };
  Subtrees out;
  struct Open {
    uint32_t event;
    int64_t end_us;
  };
  std::vector<Open> open;  // the ancestors of the event being read
  auto close = [&](uint32_t last) {
    const Open o = open.back();
    open.pop_back();
    if (!open.empty()) open.back().end_us = std::max(open.back().end_us, o.end_us);
    if (is_asked(trace.events[o.event])) out.Set(o.event, last, o.end_us);
  };
  const auto n = static_cast<uint32_t>(trace.events.size());
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t parent = trace.events[i].parent;
    while (!open.empty() && open.back().event != parent) close(i - 1);
    open.push_back({i, PyTrueDivTrunc1000(trace.event_t0[i])});
  }
  while (!open.empty()) close(n - 1);
  return out;
}

namespace {

constexpr std::string_view kModulePrefix = "nn.Module: ";

bool Matches(const std::string& pattern, const std::string& text) {
  return fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

}  // namespace

std::vector<uint32_t> MatchedModuleCalls(const Trace& trace, const LazySubtrees& tree,
                                         const std::string& pattern) {
  std::vector<uint32_t> calls;
  uint32_t inside_until = 0;  // the last event of the matched call we are in
  bool inside = false;
  for (uint32_t e = 0; e < trace.events.size(); ++e) {
    if (inside && e <= inside_until) continue;
    inside = false;
    const Event& ev = trace.events[e];
    if (ev.kind != EventKind::kPy) continue;
    const std::string& name = trace.Name(ev);
    if (!name.starts_with(kModulePrefix)) continue;
    const std::string own = name.substr(kModulePrefix.size());
    if (!Matches(pattern, own) && !Matches(pattern, ModulePath(trace, e))) continue;
    calls.push_back(e);
    inside = true;
    inside_until = tree.Get().Last(e);
  }
  return calls;
}

std::string SomeModuleNames(const Trace& trace, size_t n) {
  std::set<std::string> names;
  for (uint32_t e = 0; e < trace.events.size() && names.size() < n; ++e) {
    const Event& ev = trace.events[e];
    if (ev.kind != EventKind::kPy) continue;
    const std::string& name = trace.Name(ev);
    if (name.starts_with(kModulePrefix)) names.insert(name.substr(kModulePrefix.size()));
  }
  std::string out;
  for (const std::string& s : names) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "none: the trace was recorded without the python tracer (with_stack)" : out;
}

}  // namespace whatif

namespace {

using whatif::Span;
using whatif::Sweep;
using whatif::Weights;

WhatIfPeak PeakOf(const ExplainInput& in, const whatif::SweepPeak& p, int64_t first_us) {
  WhatIfPeak out;
  out.bytes = p.bytes;
  out.since_start_us = (p.time_us < 0 ? first_us : p.time_us) - first_us;
  out.by_category = p.by_category;
  out.phase = ContextOf(in.trace, in.tree, p.event).phase;
  return out;
}

}  // namespace

namespace {
constexpr int kBuckets = 2000;
}  // namespace

struct WhatIfReplay::Measured {
  ExplainInput in;
  PerValue<uint32_t> creator;  // CreatorOfValues
  whatif::Selection none;      // the measured sweep streams every event
  whatif::LazySubtrees tree;
  struct Device {
    DeviceIndex index = 0;
    int64_t lo = 0, hi = 0;  // the rows' first and last time (the chart's x range)
    whatif::SweepResult sweep;
  };
  std::vector<Device> devices;  // those with memory events
};

WhatIfReplay::WhatIfReplay(const ExplainInput& in, const std::vector<DeviceIndex>* only)
    : m_(std::make_unique<Measured>(
          Measured{in, CreatorOfValues(in.graph), {}, whatif::LazySubtrees(in.trace), {}})) {
  // Each device's rows run from the first at or after 0 (the rows before
  // the profile are drawn there) to the last.
  struct Range {
    bool any = false;
    int64_t first = whatif::kNever, last = -1;
  };
  std::vector<Range> range(in.trace.devices.size());
  std::vector<uint8_t> wanted(in.trace.devices.size(), only == nullptr ? 1 : 0);
  if (only != nullptr) {
    for (const DeviceIndex d : *only) {
      if (d < wanted.size()) wanted[d] = 1;
    }
  }
  for (const TimelineEvent& e : in.timeline) {
    if (e.device >= range.size() || wanted[e.device] == 0) continue;
    Range& r = range[e.device];
    const int64_t t = MicrosOf(e);
    r.any = true;
    r.last = std::max(r.last, t);
    if (t >= 0) r.first = std::min(r.first, t);
  }
  const whatif::Stream all{&in, &m_->none, &m_->creator};
  for (DeviceIndex d = 0; static_cast<size_t>(d) < range.size(); ++d) {
    if (!range[d].any) continue;
    Measured::Device dev;
    dev.index = d;
    dev.lo = range[d].first == whatif::kNever ? -1 : range[d].first;
    dev.hi = std::max(dev.lo, range[d].last);
    dev.sweep = Sweep({}, d, {whatif::Ones()}, dev.lo, dev.hi, kBuckets, all);
    if (dev.sweep.any) m_->devices.push_back(std::move(dev));
  }
}

WhatIfReplay::~WhatIfReplay() = default;

Expected<WhatIfReport> WhatIfReplay::Run(const WhatIfChanges& changes, const std::string& name,
                                         bool curves) const {
  const whatif::Selection selection = whatif::Select(m_->in, changes, m_->creator, m_->tree);
  std::vector<Span> spans = whatif::SpansOf(m_->in, selection, m_->creator);
  return Replay(changes, name, curves, selection, spans);
}

Expected<WhatIfReport> WhatIfReplay::Replay(const WhatIfChanges& changes, const std::string& name,
                                            bool curves, const whatif::Selection& selection,
                                            std::vector<Span>& spans) const {
  const ExplainInput& in = m_->in;
  const whatif::Stream rest{&in, &selection, &m_->creator};
  WhatIfReport report;
  report.trace = name;
  std::vector<Weights> ranks = {whatif::Ones()};
  const whatif::Context ctx{in, name, report, selection, m_->tree};
  if (Status s = whatif::ApplyDtype(ctx, changes, spans); !s.ok()) return s;
  if (Status s = whatif::ApplyOptimizer(ctx, changes, spans, ranks); !s.ok()) return s;
  if (Status s = whatif::ApplySetToNone(ctx, changes, spans); !s.ok()) return s;
  if (Status s = whatif::ApplyCheckpoint(ctx, changes, spans); !s.ok()) return s;
  if (Status s = whatif::ApplyShard(ctx, changes, spans, ranks); !s.ok()) return s;

  for (const Measured::Device& m : m_->devices) {
    const whatif::SweepResult& before = m.sweep;
    const int buckets = curves ? kBuckets : 0;
    // Ranks of one share have one peak: each distinct weight set is swept
    // once.
    std::vector<Weights> distinct;
    std::vector<size_t> of_rank;
    for (const Weights& w : ranks) {
      const auto it = std::find(distinct.begin(), distinct.end(), w);
      of_rank.push_back(static_cast<size_t>(it - distinct.begin()));
      if (it == distinct.end()) distinct.push_back(w);
    }
    whatif::SweepResult after = Sweep(spans, m.index, distinct, m.lo, m.hi, buckets, rest);
    if (after.out_of_range) {
      return Status::Error(QuotePath(name) + ": the predicted peak of " +
                           QuotePath(in.trace.devices[m.index].name) +
                           " is below zero or past what 64 bits hold: no number");
    }
    std::vector<whatif::SweepPeak> per_rank;
    per_rank.reserve(of_rank.size());
    for (const size_t i : of_rank) per_rank.push_back(after.peaks[i]);
    after.peaks = std::move(per_rank);
    WhatIfDevice dev;
    dev.device = in.trace.devices[m.index].name;
    dev.before = PeakOf(in, before.peaks[0], before.first_us);
    size_t top = 0;
    for (size_t r = 0; r < after.peaks.size(); ++r) {
      if (after.peaks[r].bytes > after.peaks[top].bytes) top = r;
    }
    dev.after = PeakOf(in, after.peaks[top], before.first_us);
    if (after.peaks.size() > 1) {
      for (const whatif::SweepPeak& p : after.peaks) dev.rank_peaks.push_back(p.bytes);
    }
    if (curves) {
      // The curve drawn is the largest rank's.
      const std::vector<int64_t> curve =
          top == 0 ? after.curve
                   : Sweep(spans, m.index, {ranks[top]}, m.lo, m.hi, kBuckets, rest).curve;
      for (int b = 0; b < kBuckets; ++b) {
        dev.times_us.push_back((m.hi - m.lo) * b / kBuckets);
        dev.measured.push_back(before.curve[b]);
        dev.predicted.push_back(curve[b]);
      }
    }
    report.devices.push_back(std::move(dev));
  }
  return report;
}

Expected<WhatIfReport> WhatIf(const ExplainInput& in, const WhatIfChanges& changes,
                              const std::string& name) {
  return WhatIfReplay(in).Run(changes, name);
}

}  // namespace memtl

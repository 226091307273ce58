// --shard (whatif.h has its rule): ZeRO-1, ZeRO-2 and ZeRO-3/FSDP replayed
// on the spans of the measured timeline, with ZeroRedundancyOptimizer's
// partition of the parameters over the ranks.
#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "core/explain/names.h"
#include "core/explain/peak.h"
#include "core/plan/whatif_spans.h"

namespace memtl::whatif {

namespace {

// The largest bytes of temporaries a step one parameter at a time holds,
// over parameters of `sizes` in its order: each update makes `temporaries`
// of its parameter's size, and the last of the previous update's is still
// referenced (a Python variable, `denom`, is rebound only after the next
// one is made).
double StepTemporaries(const std::vector<int64_t>& sizes, int temporaries) {
  double top = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const double before = i > 0 ? static_cast<double>(sizes[i - 1]) : 0.0;
    top = std::max(top, temporaries * static_cast<double>(sizes[i]) + before);
  }
  return top;
}

// ZeroRedundancyOptimizer's partition: the parameters, largest first, each
// to the rank holding the fewest bytes so far, which steps them in that
// order. Per rank, its share of the bytes, and its step's temporaries over
// the measured step's: `order` is the sizes of the parameters as the
// measured step updates them, `temporaries` the optimizer's per parameter
// (0: unknown; then the rank's largest parameter over the largest of all).
struct Partition {
  std::vector<double> share, temps;
};
Partition ZeroPartition(const std::vector<Span>& spans, int n, const std::vector<int64_t>& order,
                        int temporaries) {
  absl::flat_hash_map<uint32_t, int64_t> params;
  for (const Span& s : spans) {
    if (s.cls == kParameter && s.keyed()) params[s.slot] = std::max(params[s.slot], s.bytes);
  }
  std::vector<int64_t> sizes;
  for (const auto& [slot, bytes] : params) sizes.push_back(bytes);
  std::sort(sizes.rbegin(), sizes.rend());
  std::vector<int64_t> load(static_cast<size_t>(n), 0);
  std::vector<std::vector<int64_t>> owned(static_cast<size_t>(n));
  int64_t total = 0;
  for (const int64_t b : sizes) {
    const auto r = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[r] += b;
    owned[r].push_back(b);
    total += b;
  }
  const double measured = StepTemporaries(order, temporaries);
  Partition p;
  for (size_t r = 0; r < load.size(); ++r) {
    p.share.push_back(total > 0 ? static_cast<double>(load[r]) / static_cast<double>(total)
                                : 1.0 / n);
    if (temporaries > 0 && measured > 0) {
      p.temps.push_back(StepTemporaries(owned[r], temporaries) / measured);
    } else {
      p.temps.push_back(sizes.empty() || owned[r].empty() ? 0.0
                                                          : static_cast<double>(owned[r].front()) /
                                                                static_cast<double>(sizes.front()));
    }
  }
  return p;
}

// The sizes of the parameters in the order the trace's first optimizer
// step updates them.
std::vector<int64_t> StepOrder(const Context& c, const std::vector<Span>& spans) {
  OptimizerCalls calls(c.in.trace);
  std::vector<std::pair<int64_t, uint32_t>> updates;  // (row, span)
  for (uint32_t i = 0; i < spans.size(); ++i) {
    const Span& s = spans[i];
    if (s.cls == kParameter && s.keyed() && s.version > 0 && s.creator != kNone32 &&
        calls.Inside(s.creator)) {
      updates.emplace_back(s.start, i);
    }
  }
  std::sort(updates.begin(), updates.end());
  std::vector<int64_t> order;
  absl::flat_hash_map<uint32_t, bool> seen;
  for (const auto& [row, i] : updates) {
    if (!seen.emplace(spans[i].slot, true).second) break;  // the next step begins
    order.push_back(spans[i].bytes);
  }
  return order;
}

// A --wrap unit's time windows: its forward calls, and in each backward
// pass from the end of the unit before to its last gradient.
struct Unit {
  std::string path;
  std::vector<uint32_t> params;  // key slots
  int64_t bytes = 0;
  std::vector<std::pair<int64_t, int64_t>> windows;  // rows [first, last]
};

std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> parts;
  size_t at = 0;
  while (at <= path.size()) {
    const size_t next = path.find(" > ", at);
    parts.push_back(path.substr(at, next == std::string::npos ? std::string::npos : next - at));
    if (next == std::string::npos) break;
    at = next + 3;
  }
  return parts;
}

// --shard optimizer (ZeRO-1): each rank's weights as many times as there
// are ranks, OPTIMIZER_STATE and the step's temporaries scaled by its share.
Status ShardOptimizer(const Context& c, const WhatIfChanges& ch, std::vector<Span>& spans,
                      std::vector<Weights>& ranks) {
  const ExplainInput& in = c.in;
  if (!Any(spans, kOptimizerState))
    return Refuse(c, "--shard optimizer: the trace has no OPTIMIZER_STATE bytes");
  const OptimizerKind* now = KnownOptimizer(SteppedOptimizer(in.trace));
  const Partition part = ZeroPartition(spans, ch.shard_optimizer, StepOrder(c, spans),
                                       now != nullptr ? now->temporaries : 0);
  MarkStepTemporaries(c, spans);
  // A step over lists makes temporaries of the rank's whole partition; a
  // step one parameter at a time, of the parameters in its order.
  const bool list_step = ListStep(in.trace);
  const std::vector<double>& temps = list_step ? part.share : part.temps;
  std::vector<Weights> out;
  for (size_t r = 0; r < part.share.size(); ++r) {
    for (Weights w : ranks) {
      w[kOptimizerState] *= part.share[r];
      w[kOptTemp] *= temps[r];
      out.push_back(w);
    }
  }
  ranks = out;
  std::string parts;
  for (const double s : part.share) parts += (parts.empty() ? "" : ", ") + Percent(s);
  c.report.changes.push_back(
      "--shard optimizer=" + std::to_string(ch.shard_optimizer) +
      " (ZeRO-1): OPTIMIZER_STATE divided as ZeroRedundancyOptimizer partitions the "
      "parameters (ranks' shares " +
      parts + "), and the step's temporaries as each rank's " +
      (list_step ? "partition" : "parameters, stepped largest first"));
  return Status();
}

// The --wrap units by path, and the unit of each parameter's and
// gradient's key slot.
struct Units {
  std::map<std::string, Unit> by_path;
  absl::flat_hash_map<uint32_t, std::string> of_slot;
};

// Units: each parameter's outermost module matching --wrap, with its
// parameters' bytes; gradients go to their parameter's unit.
Status FindUnits(const Context& c, const WhatIfChanges& ch, const std::vector<Span>& spans,
                 Units& units) {
  const ExplainInput& in = c.in;
  std::vector<KeySlot> wanted;
  for (const Span& s : spans) {
    if (s.keyed() && (s.cls == kParameter || s.cls == kGradient)) wanted.emplace_back(s.slot);
  }
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  const TensorNames names = ch.wrap.empty() ? TensorNames() : NameModelState(in, &wanted);
  absl::flat_hash_map<std::string, std::string> unit_of_param;  // param's text -> unit path
  for (const auto& [slot, name] : names) {
    if (name.module.empty()) continue;
    const std::vector<std::string> parts = SplitPath(name.module);
    std::string prefix;
    for (const std::string& part : parts) {
      prefix += (prefix.empty() ? "" : " > ") + part;
      if (fnmatch(ch.wrap.c_str(), part.c_str(), 0) == 0 ||
          fnmatch(ch.wrap.c_str(), prefix.c_str(), 0) == 0) {
        unit_of_param[name.text] = prefix;
        units.of_slot[slot] = prefix;
        units.by_path[prefix].path = prefix;
        units.by_path[prefix].params.push_back(slot);
        break;
      }
    }
  }
  if (!ch.wrap.empty() && units.by_path.empty()) {
    return Refuse(c, "--wrap " + Quote(ch.wrap) +
                         ": no module holding parameters matches (modules: " +
                         SomeModuleNames(in.trace, 12) + ")");
  }
  // Gradients to units, by their names ("<parameter> grad").
  for (const auto& [slot, name] : names) {
    constexpr std::string_view kGrad = " grad";
    if (!name.text.ends_with(kGrad)) continue;
    const auto it = unit_of_param.find(name.text.substr(0, name.text.size() - kGrad.size()));
    if (it != unit_of_param.end()) units.of_slot[slot] = it->second;
  }
  absl::flat_hash_map<uint32_t, int64_t> param_bytes;
  for (const Span& s : spans) {
    if (s.cls == kParameter && s.keyed())
      param_bytes[s.slot] = std::max(param_bytes[s.slot], s.bytes);
  }
  for (auto& [path, unit] : units.by_path) {
    for (const uint32_t p : unit.params) unit.bytes += param_bytes[p];
  }
  return Status();
}

// Each unit's backward windows: the gradients' creations in time order,
// split where a forward op runs between two (a new backward pass). Returns
// when each gradient is reduced: gradient slot -> its unit's window end.
absl::flat_hash_map<uint32_t, int64_t> BackwardWindows(const ExplainInput& in,
                                                       const std::vector<Span>& spans,
                                                       Units& units) {
  std::vector<int64_t> forward_us;
  for (const FlowNode& n : in.graph.nodes()) {
    if (!in.tree.in_backward(n.event))
      forward_us.push_back(PyTrueDivTrunc1000(in.trace.event_t0[n.event]));
  }
  std::sort(forward_us.begin(), forward_us.end());
  std::vector<std::pair<int64_t, std::string>> made;
  for (const Span& s : spans) {
    if (s.cls != kGradient || !s.keyed() || s.version != 0 || s.creator == kNone32 ||
        !in.tree.in_backward(s.creator)) {
      continue;
    }
    const auto it = units.of_slot.find(s.slot);
    if (it != units.of_slot.end()) made.emplace_back(s.start, it->second);
  }
  std::sort(made.begin(), made.end());
  absl::flat_hash_map<uint32_t, int64_t> reduced_at;
  {
    int64_t prev_end = -1;
    for (size_t i = 0; i < made.size();) {
      size_t j = i;
      while (j + 1 < made.size() && made[j + 1].second == made[i].second) ++j;
      const int64_t first = made[i].first, last = made[j].first;
      const bool same_pass =
          prev_end >= 0 && std::lower_bound(forward_us.begin(), forward_us.end(), prev_end + 1) ==
                               std::upper_bound(forward_us.begin(), forward_us.end(), first);
      units.by_path[made[i].second].windows.emplace_back(same_pass ? prev_end : first, last);
      prev_end = last;
      i = j + 1;
    }
  }
  for (const Span& s : spans) {
    if (s.cls != kGradient || !s.keyed() || s.version != 0) continue;
    const auto it = units.of_slot.find(s.slot);
    if (it == units.of_slot.end()) continue;
    // The windows are in time order and do not overlap: the last one
    // starting at or before the gradient is the only one that can hold it.
    const auto& windows = units.by_path[it->second].windows;
    const auto w = std::upper_bound(windows.begin(), windows.end(), s.start,
                                    [](int64_t t, const auto& win) { return t < win.first; });
    if (w == windows.begin()) continue;
    if (const auto& [first, last] = *std::prev(w); s.start <= last) reduced_at[s.slot] = last + 1;
  }
  return reduced_at;
}

// --shard grads (ZeRO-2): GRADIENT divided, each gradient whole (kGradFull,
// into `added`) until its unit's backward ends.
Status ShardGrads(const Context& c, const WhatIfChanges& ch,
                  const absl::flat_hash_map<uint32_t, int64_t>& reduced_at,
                  std::vector<Span>& spans, std::vector<Weights>& ranks, std::vector<Span>& added) {
  if (!Any(spans, kGradient)) return Refuse(c, "--shard grads: the trace has no GRADIENT bytes");
  for (Weights& w : ranks) w[kGradient] /= ch.shard_grads;
  for (Span& s : spans) {
    if (s.cls != kGradient) continue;
    const auto it = reduced_at.find(s.slot);
    if (it == reduced_at.end() || s.version != 0 || it->second <= s.start) continue;
    Span full = s;
    full.end = std::min(s.end, it->second);
    full.cls = kGradFull;
    added.push_back(full);
    s.start = full.end;
  }
  c.report.changes.push_back("--shard grads=" + std::to_string(ch.shard_grads) +
                             " (ZeRO-2): GRADIENT divided by " + std::to_string(ch.shard_grads) +
                             (ch.wrap.empty()
                                  ? std::string(" as each is made")
                                  : " once its unit's backward ends (whole until then)"));
  return Status();
}

// --shard params (ZeRO-3, FSDP): PARAMETER divided, each unit's
// parameters gathered whole (kGathered, into `added`) while its forward
// and backward run; parameters outside every unit are kept whole.
void ShardParams(const Context& c, const WhatIfChanges& ch, Units& units, std::vector<Span>& spans,
                 std::vector<Weights>& ranks, std::vector<Span>& added) {
  const ExplainInput& in = c.in;
  for (Weights& w : ranks) w[kParameter] /= ch.shard_params;
  for (Span& s : spans) {
    if (s.cls == kParameter && s.keyed() && !units.of_slot.contains(s.slot)) s.cls = kParamKept;
  }
  const Subtrees& tree = c.tree.Get();
  int64_t largest = 0;
  // Each unit's forward calls: one walk over the module calls.
  for (uint32_t m = 0; m < in.trace.events.size(); ++m) {
    const Event& ev = in.trace.events[m];
    if (ev.kind != EventKind::kPy || !in.trace.Name(ev).starts_with("nn.Module: ")) continue;
    const auto it = units.by_path.find(ModulePath(in.trace, m));
    if (it != units.by_path.end())
      it->second.windows.emplace_back(PyTrueDivTrunc1000(in.trace.event_t0[m]), tree.EndUs(m));
  }
  for (auto& [path, unit] : units.by_path) {
    for (const auto& [first, last] : unit.windows) {
      Span g;
      g.start = first;
      g.end = last + 1;
      g.bytes = unit.bytes;
      g.device = in.device;
      g.cls = kGathered;
      added.push_back(g);
    }
    largest = std::max(largest, unit.bytes);
  }
  c.report.changes.push_back(
      "--shard params=" + std::to_string(ch.shard_params) +
      " (ZeRO-3, FSDP): PARAMETER divided by " + std::to_string(ch.shard_params) + "; " +
      std::to_string(units.by_path.size()) + " units of --wrap " + Quote(ch.wrap) +
      " gathered whole while their forward and backward run (the "
      "largest " +
      HumanBytes(largest) + ")");
}

}  // namespace

Status ApplyShard(const Context& c, const WhatIfChanges& ch, std::vector<Span>& spans,
                  std::vector<Weights>& ranks) {
  if (ch.shard_optimizer > 1) {
    if (Status s = ShardOptimizer(c, ch, spans, ranks); !s.ok()) return s;
  }
  if (ch.shard_grads <= 1 && ch.shard_params <= 1) return Status();
  if (ch.shard_params > 1 && ch.wrap.empty()) {
    return Refuse(c,
                  "--shard params needs --wrap MODULE_PATTERN, the units gathered whole while "
                  "they run (modules: " +
                      SomeModuleNames(c.in.trace, 12) + ")");
  }
  Units units;
  if (Status s = FindUnits(c, ch, spans, units); !s.ok()) return s;
  const absl::flat_hash_map<uint32_t, int64_t> reduced_at = BackwardWindows(c.in, spans, units);
  std::vector<Span> added;
  if (ch.shard_grads > 1) {
    if (Status s = ShardGrads(c, ch, reduced_at, spans, ranks, added); !s.ok()) return s;
  }
  if (ch.shard_params > 1) ShardParams(c, ch, units, spans, ranks, added);
  spans.insert(spans.end(), added.begin(), added.end());
  return Status();
}

}  // namespace memtl::whatif

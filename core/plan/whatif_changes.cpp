// The changes whatif replays (whatif.h has the rule of each), each editing
// the spans of the measured timeline.
#include <fnmatch.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "core/explain/names.h"
#include "core/explain/peak.h"
#include "core/plan/whatif_spans.h"

namespace memtl::whatif {

OptimizerCalls::OptimizerCalls(const Trace& trace)
    : trace_(trace), optim_(trace.strings.size(), -1) {}

bool OptimizerCalls::Inside(uint32_t event) {
  for (uint32_t p = event; p != kNone32 && p < trace_.events.size(); p = trace_.events[p].parent) {
    const Event& e = trace_.events[p];
    if (e.kind != EventKind::kPy) continue;
    const uint32_t name = trace_.py_names[e.payload];
    if (optim_[name] < 0)
      optim_[name] = trace_.strings.Get(name).find("torch/optim/") != std::string::npos ? 1 : 0;
    if (optim_[name] == 1) return true;
  }
  return false;
}

Status Refuse(const Context& c, const std::string& what) {
  return Status::Error(QuotePath(c.name) + ": " + what);
}

std::string Percent(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * f);
  return buf;
}

namespace {

constexpr int kAutogradDetail = 6;

std::string Times(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "x%.3g", f);
  return buf;
}

}  // namespace

bool Any(const std::vector<Span>& spans, int cls) {
  return std::any_of(spans.begin(), spans.end(),
                     [cls](const Span& s) { return s.cls == cls && s.bytes > 0; });
}

namespace {

// Each device's largest bytes of `category` (summed over devices).
int64_t LargestOf(const Trace& trace, const std::vector<Span>& spans, int category) {
  int64_t total = 0;
  for (DeviceIndex d = 0; static_cast<size_t>(d) < trace.devices.size(); ++d) {
    const SweepResult r = Sweep(spans, d, {Ones()});
    if (r.any) total += std::max<int64_t>(r.max_category[category], 0);
  }
  return total;
}

}  // namespace

// Marks what the optimizer step makes and frees (kOptTemp), whatever its
// category (PyTorch's rules call Adam's `exp_avg_sq.sqrt()` a PARAMETER and
// its quotient an ACTIVATION): these scale with the optimizer. How many.
size_t MarkStepTemporaries(const Context& c, std::vector<Span>& spans) {
  OptimizerCalls calls(c.in.trace);
  // The keys allocated in the step (their first version's creator), less
  // those alive at the end (state made lazily, or kept).
  absl::flat_hash_map<uint32_t, bool> made;
  for (const Span& s : spans) {
    if (!s.keyed() || s.bytes <= 0) continue;
    if (s.version == 0 && s.creator != kNone32 && s.cls != kOptimizerState && s.cls != kGradient &&
        calls.Inside(s.creator)) {
      made.emplace(s.slot, true);
    }
    if (s.end == kNever) {
      if (const auto it = made.find(s.slot); it != made.end()) it->second = false;
    }
  }
  size_t n = 0;
  for (Span& s : spans) {
    if (!s.keyed() || s.bytes <= 0) continue;
    const auto it = made.find(s.slot);
    if (it == made.end() || !it->second) continue;
    s.cls = kOptTemp;
    ++n;
  }
  return n;
}

namespace {

// The optimizer steps' rows: each outermost python call into torch/optim/
// but zero_grad, from its start to its subtree's last.
std::vector<std::pair<int64_t, int64_t>> StepWindows(const Trace& trace, const LazySubtrees& lazy) {
  std::vector<std::pair<int64_t, int64_t>> windows;
  const Subtrees& tree = lazy.Get();
  for (uint32_t e = 0; e < trace.events.size(); ++e) {
    const Event& ev = trace.events[e];
    if (ev.kind != EventKind::kPy) continue;
    const std::string& name = trace.Name(ev);
    if (name.find("torch/optim/") == std::string::npos || name.ends_with(": zero_grad")) continue;
    windows.emplace_back(PyTrueDivTrunc1000(trace.event_t0[e]), tree.EndUs(e));
    e = tree.Last(e);  // its calls are inside it
  }
  return windows;
}

}  // namespace

// Whether the step updates lists of tensors at once (a foreach or fused op
// inside an optimizer call: its temporaries span every parameter) rather
// than one parameter at a time (its temporaries are one parameter's).
bool ListStep(const Trace& trace) {
  std::vector<int8_t> list(trace.strings.size(), -1);  // per name: a list op
  OptimizerCalls calls(trace);
  for (uint32_t e = 0; e < trace.events.size(); ++e) {
    const Event& ev = trace.events[e];
    if (ev.kind != EventKind::kOp) continue;
    const uint32_t name = trace.ops[ev.payload].name;
    if (list[name] < 0) {
      const std::string& s = trace.strings.Get(name);
      list[name] = (s.starts_with("aten::_foreach_") && s != "aten::_foreach_zero_") ||
                   s.starts_with("aten::_fused_");
    }
    if (list[name] == 1 && calls.Inside(e)) return true;
  }
  return false;
}

// The optimizer the trace steps ("Optimizer.step#Adam.step" -> "Adam");
// empty when none, "several" when more than one. An optimizer that steps
// another (ZeroRedundancyOptimizer over Adam) is not counted: the inner
// one holds the state.
std::string SteppedOptimizer(const Trace& trace) {
  constexpr std::string_view kStep = "Optimizer.step#";
  constexpr std::array<std::string_view, 3> kWrappers = {
      "ZeroRedundancyOptimizer", "PostLocalSGDOptimizer", "_NamedOptimizer"};
  std::string found;
  for (uint32_t i = 0; i < trace.strings.size(); ++i) {
    const std::string& s = trace.strings.Get(i);
    if (!s.starts_with(kStep)) continue;
    const size_t dot = s.find('.', kStep.size());
    const std::string name =
        s.substr(kStep.size(), dot == std::string::npos ? std::string::npos : dot - kStep.size());
    if (std::find(kWrappers.begin(), kWrappers.end(), name) != kWrappers.end()) continue;
    if (found.empty()) found = name;
    if (found != name) return "several";
  }
  return found;
}

namespace {

std::string Lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

}  // namespace

const OptimizerKind* KnownOptimizer(const std::string& name) {
  const std::string lower = Lower(name);
  for (const OptimizerKind& k : KnownOptimizers()) {
    if (lower == k.name) return &k;
  }
  return nullptr;
}

namespace {

// The dtype of a key, as its shape was printed ("[4, 8] float32"); empty
// when none was kept.
std::string_view DtypeOf(const ExplainInput& in, uint32_t slot) {
  const std::string_view shape = ShapeOf(in, KeySlot(slot));
  const size_t space = shape.rfind(' ');
  return space == std::string_view::npos ? std::string_view() : shape.substr(space + 1);
}

}  // namespace

Status ApplyDtype(const Context& c, const WhatIfChanges& ch, std::vector<Span>& spans) {
  static constexpr std::array<int, 3> kCategory = {kParameter, kGradient, kOptimizerState};
  static constexpr std::array<const char*, 3> kFlag = {"params", "grads", "optimizer"};
  for (size_t k = 0; k < 3; ++k) {
    const int to = ch.dtype_bytes[k];
    if (to == 0) continue;
    if (!Any(spans, kCategory[k])) {
      return Refuse(c, std::string("--dtype ") + kFlag[k] + ": the trace has no " +
                           std::string(ExportCategoryName(kCategory[k])) + " bytes");
    }
    int64_t before = 0, after = 0;
    size_t assumed = 0;
    // The element size of a span's tensor (float32 where the trace kept
    // no dtype; 0 for an integer, which stays).
    auto size_of = [&](const Span& s, bool count) {
      if (!s.keyed()) return 4;
      const std::string_view dtype = DtypeOf(c.in, s.slot);
      if (dtype.empty()) {
        assumed += count ? 1 : 0;
        return 4;
      }
      return DtypeBytes(dtype);
    };
    // Scaled, the bytes must still sum within 64 bits (a prediction past
    // them is no number): checked in doubles before any is changed.
    double scaled = 0;
    for (const Span& s : spans) {
      if (s.cls != kCategory[k] || s.bytes <= 0) continue;
      if (const int from = size_of(s, false); from > 0)
        scaled += static_cast<double>(s.bytes) * to / from;
    }
    if (scaled >= 0x1p62) {
      return Refuse(
          c, std::string("--dtype ") + kFlag[k] + ": the scaled bytes pass what 64 bits hold");
    }
    for (Span& s : spans) {
      if (s.cls != kCategory[k]) continue;
      const int from = size_of(s, true);
      if (from == 0) continue;  // an integer (a step count): kept
      before += std::max<int64_t>(s.bytes, 0);
      s.bytes = s.bytes % from == 0 ? s.bytes / from * to : std::llround(s.bytes * 1.0 * to / from);
      after += std::max<int64_t>(s.bytes, 0);
    }
    c.report.changes.push_back(std::string("--dtype ") + kFlag[k] + ": " +
                               std::string(ExportCategoryName(kCategory[k])) + " bytes " +
                               Times(before > 0 ? static_cast<double>(after) / before : 1.0) +
                               " (" + std::to_string(to) + " bytes per element)");
    if (assumed > 0) {
      c.report.notes.push_back(std::to_string(assumed) + " " +
                               std::string(ExportCategoryName(kCategory[k])) +
                               " spans have no dtype in the trace: taken as float32");
    }
  }
  return Status();
}

Status ApplyOptimizer(const Context& c, const WhatIfChanges& ch, std::vector<Span>& spans,
                      std::vector<Weights>& ranks) {
  if (ch.optimizer.empty()) return Status();
  const auto& known = KnownOptimizers();
  const auto to = std::find_if(known.begin(), known.end(),
                               [&](const OptimizerKind& k) { return ch.optimizer == k.name; });
  if (to == known.end()) {
    std::string names;
    for (const OptimizerKind& k : known) names += (names.empty() ? "" : ", ") + std::string(k.name);
    return Status::Error("--optimizer " + Quote(ch.optimizer) + ": not one memtl knows (" + names +
                         ")");
  }
  const std::string stepped = SteppedOptimizer(c.in.trace);
  if (stepped == "several")
    return Refuse(c, "--optimizer: the trace steps several optimizers; whatif replaces one");
  const int64_t state = LargestOf(c.in.trace, spans, kOptimizerState);
  const int64_t grads = LargestOf(c.in.trace, spans, kGradient);
  int from = -1;
  if (grads > 0) {
    from = static_cast<int>(std::llround(static_cast<double>(state) / static_cast<double>(grads)));
  } else if (!stepped.empty()) {
    for (const OptimizerKind& k : known) {
      if (Lower(stepped) == k.name) from = k.states;
    }
  }
  if (from < 0) {
    return Refuse(c,
                  "--optimizer: the trace has no gradients and no optimizer step memtl knows, "
                  "so its optimizer's state per parameter is unknown");
  }
  const OptimizerKind* now = nullptr;
  for (const OptimizerKind& k : known) {
    if (Lower(stepped) == k.name || (Lower(stepped) == "sgd" && from == 1 && k.states == 1 &&
                                     std::string_view(k.name) == "sgd-momentum")) {
      now = &k;
    }
  }
  const std::string was = stepped.empty() ? std::string("the trace's optimizer") : stepped;
  const std::string counts = was + " keeps " + std::to_string(from) + " state tensors per " +
                             "parameter, " + to->name + " " + std::to_string(to->states);
  const size_t temps = MarkStepTemporaries(c, spans);
  double temp_factor = 1;
  if (now != nullptr && now->temporaries > 0) {
    temp_factor = static_cast<double>(to->temporaries) / now->temporaries;
  } else if (now == nullptr) {
    if (temps > 0) {
      c.report.notes.push_back("the step's temporaries stay as measured: the trace's optimizer (" +
                               was + ") is not one whose temporaries memtl knows");
    }
  } else if (to->temporaries > 0) {
    // None to scale: the new step's, each step long, on each device with
    // gradients (a list step's span all of its gradients, a per-parameter
    // one's the largest).
    const bool list_step = ListStep(c.in.trace);
    const auto windows = StepWindows(c.in.trace, c.tree);
    std::vector<Span> added;
    for (DeviceIndex d = 0; static_cast<size_t>(d) < c.in.trace.devices.size(); ++d) {
      int64_t unit = 0;
      if (list_step) {
        const SweepResult r = Sweep(spans, d, {Ones()});
        unit = r.any ? r.max_category[kGradient] : 0;
      } else {
        for (const Span& s : spans) {
          if (s.device == d && s.cls == kGradient) unit = std::max(unit, s.bytes);
        }
      }
      for (const auto& [first, last] : windows) {
        Span t;
        t.start = first;
        t.end = last + 1;
        t.bytes = unit * to->temporaries;
        t.device = d;
        t.cls = kOptTemp;
        if (t.bytes > 0) added.push_back(t);
      }
    }
    spans.insert(spans.end(), added.begin(), added.end());
  }
  for (Weights& w : ranks) w[kOptTemp] *= temp_factor;
  if (temps == 0 && now != nullptr && now->temporaries > 0) {
    c.report.notes.push_back(
        "the optimizer step's temporaries are not told apart (no python tracer frames in "
        "torch/optim/): they stay as measured");
  }
  const std::string temp_words = ", its step's temporaries " + Times(temp_factor) + " (" + was +
                                 " " + (now ? std::to_string(now->temporaries) : std::string("?")) +
                                 " per parameter, " + to->name + " " +
                                 std::to_string(to->temporaries) + ")";
  if (from > 0) {
    const double f = static_cast<double>(to->states) / from;
    for (Weights& w : ranks) w[kOptimizerState] *= f;
    c.report.changes.push_back("--optimizer " + std::string(to->name) + ": OPTIMIZER_STATE " +
                               Times(f) + " (" + counts + ")" + temp_words);
    return Status();
  }
  if (to->states == 0) {
    c.report.changes.push_back("--optimizer " + std::string(to->name) + ": no state (" + counts +
                               ")" + temp_words);
    return Status();
  }
  for (DeviceIndex d = 0; static_cast<size_t>(d) < c.in.trace.devices.size(); ++d) {
    const SweepResult r = Sweep(spans, d, {Ones()});
    if (!r.any || r.max_category[kGradient] <= 0) continue;
    Span s;
    s.start = -1;
    s.bytes = to->states * r.max_category[kGradient];
    s.device = d;
    s.cls = kOptimizerState;
    spans.push_back(s);
  }
  c.report.changes.push_back("--optimizer " + std::string(to->name) + ": OPTIMIZER_STATE of " +
                             std::to_string(to->states) +
                             " times the gradients' bytes, alive throughout (" + counts + ")" +
                             temp_words);
  return Status();
}

Status ApplySetToNone(const Context& c, const WhatIfChanges& ch, std::vector<Span>& spans) {
  if (!ch.set_to_none) return Status();
  if (!Any(spans, kGradient)) {
    return Refuse(c, std::string(*ch.set_to_none ? "--set-to-none" : "--no-set-to-none") +
                         ": the trace has no GRADIENT bytes");
  }
  if (*ch.set_to_none) {
    size_t freed = 0;
    for (Span& s : spans) {
      if (s.cls != kGradient || !s.keyed() || s.creator == kNone32) continue;
      const std::string& op = c.in.trace.Name(c.in.trace.events[s.creator]);
      if (op != "aten::zero_" && op != "aten::_foreach_zero_") continue;
      s.bytes = 0;
      ++freed;
    }
    c.report.changes.push_back(
        freed == 0 ? std::string("--set-to-none: no change (no gradient is zeroed in place: the "
                                 "trace sets them to none already)")
                   : "--set-to-none: " + std::to_string(freed) +
                         " gradients zeroed in place are freed instead, until the backward "
                         "writes them");
    return Status();
  }
  // A gradient is freed when its key's last version ends (a version that
  // ends is only written again).
  absl::flat_hash_map<uint32_t, bool> alive_at_end;
  for (const Span& s : spans) {
    if (s.cls == kGradient && s.keyed()) alive_at_end[s.slot] |= s.end == kNever;
  }
  const bool freed = std::any_of(alive_at_end.begin(), alive_at_end.end(),
                                 [](const auto& k) { return !k.second; });
  if (!freed) {
    c.report.changes.push_back(
        "--no-set-to-none: no change (no gradient is freed: the trace keeps them already)");
    return Status();
  }
  std::vector<Span> kept;
  for (DeviceIndex d = 0; static_cast<size_t>(d) < c.in.trace.devices.size(); ++d) {
    const SweepResult r = Sweep(spans, d, {Ones()});
    if (!r.any || r.max_category[kGradient] <= 0) continue;
    const int64_t full = r.max_category_us[kGradient];
    for (Span& s : spans) {
      if (s.device != d || s.cls != kGradient || !s.keyed()) continue;
      if (s.start > full && s.version > 0) {
        s.bytes = 0;  // a write to a gradient the kept ones stand for
      } else if (s.start > full) {
        // A new gradient, accumulated into the kept one instead: it lives
        // only until it has been added (a row), as autograd's.
        s.end = s.start + 1;
        s.cls = kGradFull;
        s.cat = kAutogradDetail;
      } else {
        s.end = std::min(s.end, full);
      }
    }
    Span s;
    s.start = full;
    s.bytes = r.max_category[kGradient];
    s.device = d;
    s.cls = kGradient;
    kept.push_back(s);
  }
  spans.insert(spans.end(), kept.begin(), kept.end());
  c.report.changes.push_back(
      "--no-set-to-none: the gradients stay alive from the first time they are all alive (their "
      "largest total) to the end; each one the backward makes after that is added into the kept "
      "one, alive only while it is (AUTOGRAD_DETAIL)");
  return Status();
}

Status ApplyCheckpoint(const Context& c, const WhatIfChanges& ch, std::vector<Span>& spans) {
  if (ch.checkpoint.empty()) return Status();
  const ExplainInput& in = c.in;
  const Subtrees& tree = c.tree.Get();
  // Per key, the last forward op (by event) that reads it: a tensor read
  // after its module's call ends is the module's output, which stays.
  // Per key, the first backward op that reads it: a checkpointed module's
  // backward begins with the first read of what it saved.
  std::vector<int64_t> read_after(in.keys.size(), -1);
  std::vector<int64_t> read_in_backward(in.keys.size(), kNever);
  std::vector<int64_t> backward_us;
  for (const FlowNode& n : in.graph.nodes()) {
    if (in.trace.events[n.event].kind != EventKind::kOp) continue;  // a free
    const bool backward = in.tree.in_backward(n.event);
    const int64_t t = PyTrueDivTrunc1000(in.trace.event_t0[n.event]);
    if (backward) backward_us.push_back(t);
    for (const FlowEdge* e = in.graph.begin(n); e != in.graph.end(n); ++e) {
      const uint32_t k = e->key().value();
      if (!e->is_input() || e->is_deletion() || k >= read_after.size()) continue;
      if (backward) {
        read_in_backward[k] = std::min(read_in_backward[k], t);
      } else {
        read_after[k] = std::max<int64_t>(read_after[k], n.event);
      }
    }
  }
  std::sort(backward_us.begin(), backward_us.end());
  // Per key slot, its spans.
  absl::flat_hash_map<uint32_t, std::vector<uint32_t>> of_key;
  for (uint32_t i = 0; i < spans.size(); ++i) {
    if (spans[i].keyed() && spans[i].bytes > 0) of_key[spans[i].slot].push_back(i);
  }
  // The keys by the event that allocated them: a call's own are a range.
  std::vector<std::pair<uint32_t, uint32_t>> by_creator;  // (event, key slot)
  for (const auto& [slot, list] : of_key) {
    const Span& first = spans[list.front()];
    if (first.version == 0 && first.creator != kNone32)
      by_creator.emplace_back(first.creator, slot);
  }
  std::sort(by_creator.begin(), by_creator.end());
  for (const std::string& pattern : ch.checkpoint) {
    const std::vector<uint32_t> calls = MatchedModuleCalls(in.trace, c.tree, pattern);
    if (calls.empty()) {
      return Refuse(c, "--checkpoint " + Quote(pattern) + ": no module call matches (modules: " +
                           SomeModuleNames(in.trace, 12) + ")");
    }
    int64_t freed = 0, largest_recompute = 0;
    size_t rewound = 0;
    std::vector<Span> added;
    for (const uint32_t m : calls) {
      const int64_t end = tree.EndUs(m);
      const auto next = std::upper_bound(backward_us.begin(), backward_us.end(), end);
      if (next == backward_us.end()) continue;  // no backward after it: nothing was saved
      const int64_t backward = *next;
      std::vector<uint32_t> saved;  // key slots
      const auto own = c.selection.freed_inside.find(m);
      int64_t recompute = own != c.selection.freed_inside.end() ? own->second : 0;
      int64_t remade = kNever;
      const auto from =
          std::lower_bound(by_creator.begin(), by_creator.end(), std::make_pair(m, uint32_t{0}));
      for (auto it = from; it != by_creator.end() && it->first <= tree.Last(m); ++it) {
        const uint32_t slot = it->second;
        const std::vector<uint32_t>& list = of_key[slot];
        const Span& first = spans[list.front()];
        const Span& final = spans[list.back()];
        if (final.end <= end) {
          recompute = std::max(recompute, first.bytes);
          continue;
        }
        if (read_after[slot] > static_cast<int64_t>(tree.Last(m))) continue;  // its output
        if (final.end == kNever || final.end < backward) continue;  // not saved for backward
        saved.push_back(slot);
        remade = std::min({remade, final.end, read_in_backward[slot]});
      }
      if (saved.empty()) continue;
      for (const uint32_t slot : saved) {
        int64_t bytes = 0;
        for (const uint32_t i : of_key[slot]) {
          Span& s = spans[i];
          bytes = std::max(bytes, s.bytes);
          if (s.end <= end || s.start >= remade) continue;
          if (s.start < end) {
            if (s.end > remade) {
              Span rest = s;
              rest.start = remade;
              added.push_back(rest);
            }
            s.end = end;
          } else if (s.end > remade) {
            s.start = remade;
          } else {
            s.bytes = 0;
          }
        }
        freed += bytes;
      }
      if (recompute > 0) {
        Span t;
        t.start = remade;
        t.end = remade + 1;
        t.bytes = recompute;
        t.device = spans[of_key[saved.front()].front()].device;
        t.cls = kRecompute;
        added.push_back(t);
      }
      largest_recompute = std::max(largest_recompute, recompute);
      ++rewound;
    }
    spans.insert(spans.end(), added.begin(), added.end());
    if (rewound == 0) {
      return Refuse(c, "--checkpoint " + Quote(pattern) + ": " + std::to_string(calls.size()) +
                           " module calls match, none saves a tensor for a backward pass");
    }
    c.report.changes.push_back(
        "--checkpoint " + Quote(pattern) + ": " + std::to_string(rewound) + " calls; " +
        HumanBytes(freed) +
        " saved for backward is freed when each call's forward ends and made again when its "
        "backward begins, beside its largest temporary (" +
        HumanBytes(largest_recompute) + ")");
  }
  return Status();
}

}  // namespace memtl::whatif

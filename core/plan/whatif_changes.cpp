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

namespace {

constexpr int kParameter = 0, kOptimizerState = 1, kGradient = 5, kAutogradDetail = 6;

Status Refuse(const Context& c, const std::string& what) {
  return Status::Error(QuotePath(c.name) + ": " + what);
}

std::string Percent(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * f);
  return buf;
}

std::string Times(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "x%.3g", f);
  return buf;
}

bool Any(const std::vector<Span>& spans, int cls) {
  return std::any_of(spans.begin(), spans.end(),
                     [cls](const Span& s) { return s.cls == cls && s.bytes > 0; });
}

// Each device's largest bytes of `category` (summed over devices).
int64_t LargestOf(const Trace& trace, const std::vector<Span>& spans, int category) {
  int64_t total = 0;
  for (DeviceIndex d = 0; static_cast<size_t>(d) < trace.devices.size(); ++d) {
    const SweepResult r = Sweep(spans, d, {Ones()});
    if (r.any) total += std::max<int64_t>(r.max_category[category], 0);
  }
  return total;
}

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

std::string Lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

const OptimizerKind* KnownOptimizer(const std::string& name) {
  const std::string lower = Lower(name);
  for (const OptimizerKind& k : KnownOptimizers()) {
    if (lower == k.name) return &k;
  }
  return nullptr;
}

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

}  // namespace

Status ApplyShard(const Context& c, const WhatIfChanges& ch, std::vector<Span>& spans,
                  std::vector<Weights>& ranks) {
  const ExplainInput& in = c.in;
  if (ch.shard_optimizer > 1) {
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
  }
  if (ch.shard_grads <= 1 && ch.shard_params <= 1) return Status();
  if (ch.shard_params > 1 && ch.wrap.empty()) {
    return Refuse(c,
                  "--shard params needs --wrap MODULE_PATTERN, the units gathered whole while "
                  "they run (modules: " +
                      SomeModuleNames(in.trace, 12) + ")");
  }
  // Units: each parameter's outermost module matching --wrap.
  std::vector<KeySlot> wanted;
  for (const Span& s : spans) {
    if (s.keyed() && (s.cls == kParameter || s.cls == kGradient)) wanted.emplace_back(s.slot);
  }
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  const TensorNames names = ch.wrap.empty() ? TensorNames() : NameModelState(in, &wanted);
  std::map<std::string, Unit> units;
  absl::flat_hash_map<std::string, std::string> unit_of_param;  // param's text -> unit path
  absl::flat_hash_map<uint32_t, std::string> unit_of_slot;
  for (const auto& [slot, name] : names) {
    if (name.module.empty()) continue;
    const std::vector<std::string> parts = SplitPath(name.module);
    std::string prefix;
    for (const std::string& part : parts) {
      prefix += (prefix.empty() ? "" : " > ") + part;
      if (fnmatch(ch.wrap.c_str(), part.c_str(), 0) == 0 ||
          fnmatch(ch.wrap.c_str(), prefix.c_str(), 0) == 0) {
        unit_of_param[name.text] = prefix;
        unit_of_slot[slot] = prefix;
        units[prefix].path = prefix;
        units[prefix].params.push_back(slot);
        break;
      }
    }
  }
  if (!ch.wrap.empty() && units.empty()) {
    return Refuse(c, "--wrap " + Quote(ch.wrap) +
                         ": no module holding parameters matches (modules: " +
                         SomeModuleNames(in.trace, 12) + ")");
  }
  // Gradients to units, by their names ("<parameter> grad").
  for (const auto& [slot, name] : names) {
    constexpr std::string_view kGrad = " grad";
    if (!name.text.ends_with(kGrad)) continue;
    const auto it = unit_of_param.find(name.text.substr(0, name.text.size() - kGrad.size()));
    if (it != unit_of_param.end()) unit_of_slot[slot] = it->second;
  }
  absl::flat_hash_map<uint32_t, int64_t> param_bytes;
  for (const Span& s : spans) {
    if (s.cls == kParameter && s.keyed())
      param_bytes[s.slot] = std::max(param_bytes[s.slot], s.bytes);
  }
  for (auto& [path, unit] : units) {
    for (const uint32_t p : unit.params) unit.bytes += param_bytes[p];
  }
  // Backward windows: the gradients' creations in time order, split where a
  // forward op runs between two (a new backward pass).
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
    const auto it = unit_of_slot.find(s.slot);
    if (it != unit_of_slot.end()) made.emplace_back(s.start, it->second);
  }
  std::sort(made.begin(), made.end());
  absl::flat_hash_map<uint32_t, int64_t> reduced_at;  // gradient slot -> its unit's window end
  {
    int64_t prev_end = -1;
    for (size_t i = 0; i < made.size();) {
      size_t j = i;
      while (j + 1 < made.size() && made[j + 1].second == made[i].second) ++j;
      const int64_t first = made[i].first, last = made[j].first;
      const bool same_pass =
          prev_end >= 0 && std::lower_bound(forward_us.begin(), forward_us.end(), prev_end + 1) ==
                               std::upper_bound(forward_us.begin(), forward_us.end(), first);
      units[made[i].second].windows.emplace_back(same_pass ? prev_end : first, last);
      prev_end = last;
      i = j + 1;
    }
  }
  for (const Span& s : spans) {
    if (s.cls != kGradient || !s.keyed() || s.version != 0) continue;
    const auto it = unit_of_slot.find(s.slot);
    if (it == unit_of_slot.end()) continue;
    // The windows are in time order and do not overlap: the last one
    // starting at or before the gradient is the only one that can hold it.
    const auto& windows = units[it->second].windows;
    const auto w = std::upper_bound(windows.begin(), windows.end(), s.start,
                                    [](int64_t t, const auto& win) { return t < win.first; });
    if (w == windows.begin()) continue;
    if (const auto& [first, last] = *std::prev(w); s.start <= last) reduced_at[s.slot] = last + 1;
  }
  const DeviceIndex device = in.device;
  std::vector<Span> added;
  if (ch.shard_grads > 1) {
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
  }
  if (ch.shard_params > 1) {
    for (Weights& w : ranks) w[kParameter] /= ch.shard_params;
    for (Span& s : spans) {
      if (s.cls == kParameter && s.keyed() && !unit_of_slot.contains(s.slot)) s.cls = kParamKept;
    }
    const Subtrees& tree = c.tree.Get();
    int64_t largest = 0;
    // Each unit's forward calls: one walk over the module calls.
    for (uint32_t m = 0; m < in.trace.events.size(); ++m) {
      const Event& ev = in.trace.events[m];
      if (ev.kind != EventKind::kPy || !in.trace.Name(ev).starts_with("nn.Module: ")) continue;
      const auto it = units.find(ModulePath(in.trace, m));
      if (it != units.end())
        it->second.windows.emplace_back(PyTrueDivTrunc1000(in.trace.event_t0[m]), tree.EndUs(m));
    }
    for (auto& [path, unit] : units) {
      for (const auto& [first, last] : unit.windows) {
        Span g;
        g.start = first;
        g.end = last + 1;
        g.bytes = unit.bytes;
        g.device = device;
        g.cls = kGathered;
        added.push_back(g);
      }
      largest = std::max(largest, unit.bytes);
    }
    c.report.changes.push_back("--shard params=" + std::to_string(ch.shard_params) +
                               " (ZeRO-3, FSDP): PARAMETER divided by " +
                               std::to_string(ch.shard_params) + "; " +
                               std::to_string(units.size()) + " units of --wrap " + Quote(ch.wrap) +
                               " gathered whole while their forward and backward run (the "
                               "largest " +
                               HumanBytes(largest) + ")");
  }
  spans.insert(spans.end(), added.begin(), added.end());
  return Status();
}

}  // namespace memtl::whatif

// What whatif's stages share (whatif.h): the timeline as spans, the sweep
// that sums them into the exports' rows, and the changes that edit them.
// Internal to core/plan.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/explain/context.h"
#include "core/plan/whatif.h"

namespace memtl::whatif {

inline constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

// A span's class: the export index of its category (0..7), or one of the
// bytes a change adds, each with the category it is counted under.
enum Cls : uint8_t {
  kOptTemp = 8,     // a temporary of the optimizer step (TEMPORARY)
  kGathered = 9,    // a sharded unit's parameters gathered whole (PARAMETER)
  kGradFull = 10,   // a gradient before its unit's reduce-scatter (GRADIENT)
  kRecompute = 11,  // a checkpointed module's recompute temporary (TEMPORARY)
  kParamKept = 12,  // a parameter no --wrap unit holds: not sharded (PARAMETER)
  kNumCls = 13,
};
inline constexpr std::array<int, kNumCls> kClsCategory = {0, 1, 2, 3, 4, 5, 6, 7, 3, 0, 5, 3, 0};

// A tensor version alive over rows [start, end) (the exports' microseconds;
// -1: from before the profile), or, for an allocation with no key, one of
// its events (a free is a span of negative bytes that never ends).
struct Span {
  int64_t start = 0;
  int64_t end = kNever;
  int64_t bytes = 0;
  uint32_t slot = KeySlot::kNone;
  int32_t version = 0;
  uint32_t creator = kNone32;  // the event that made it; kNone32: none known
  DeviceIndex device = 0;
  uint8_t cls = 7;
  // The category it is counted under (export index); kOfClass: its class's.
  // A class a change gives (the step's temporaries) keeps the category.
  uint8_t cat = kOfClass;
  static constexpr uint8_t kOfClass = 0xff;
  bool keyed() const { return slot != KeySlot::kNone; }
  int category() const { return cat == kOfClass ? kClsCategory[cls] : cat; }
};

// The event that made each version (CreatorOfValues), and its lookup:
// kNone32 for a version no node made, or a key the graph lacks (a raw
// timeline's keys are categories).
uint32_t CreatorOf(const ExplainInput& in, const PerValue<uint32_t>& creator, KeySlot key,
                   Version version);

// Which keys are spans: the rest of the timeline is streamed into the sweep
// as it is. A change edits only spans, so a replay makes spans of the keys
// its changes can touch (Select), not of every tensor: the parameters,
// gradients and optimizer state (any version), what the optimizer step
// allocates (when the optimizer changes or is sharded), what the
// checkpointed modules' calls allocate; and the events with no key of those
// three categories.
struct Selection {
  std::vector<bool> key;          // per key slot; empty: none
  std::array<bool, 8> unkeyed{};  // per export index: events with no key of that category
  // A checkpointed call's keys that it frees itself are no spans (its
  // temporaries: most of a block's memory); per call (its event), the
  // largest of them, which the recompute makes again.
  absl::flat_hash_map<uint32_t, int64_t> freed_inside;
};
Selection Select(const ExplainInput& in, const WhatIfChanges& changes,
                 const PerValue<uint32_t>& creator, const class LazySubtrees& tree);

// The spans of the selected keys and events, every device, in timeline
// order.
std::vector<Span> SpansOf(const ExplainInput& in, const Selection& selection,
                          const PerValue<uint32_t>& creator);

// What a sweep takes from the timeline beside the spans: every event the
// selection leaves out, each in its category's class.
struct Stream {
  const ExplainInput* in = nullptr;  // null: the spans alone
  const Selection* selection = nullptr;
  const PerValue<uint32_t>* creator = nullptr;
};

// Whether an event runs inside a python call into torch/optim/ (the step,
// zero_grad), as ContextOf's phase says, with one test per name.
class OptimizerCalls {
 public:
  explicit OptimizerCalls(const Trace& trace);
  bool Inside(uint32_t event);

 private:
  const Trace& trace_;
  std::vector<int8_t> optim_;
};

// Weights per class: a rank's view of the spans (sharding divides some
// classes' bytes).
using Weights = std::array<double, kNumCls>;
Weights Ones();

struct SweepPeak {
  int64_t bytes = 0;
  int64_t time_us = 0;  // the row (-1: before the profile)
  std::array<int64_t, 8> by_category{};
  uint32_t event = kNone32;  // the creator of the last span that changed at the row
};
struct SweepResult {
  bool any = false;
  int64_t first_us = 0;                      // the first row's time (the smallest after -1)
  std::vector<SweepPeak> peaks;              // per weight set
  std::array<int64_t, 8> max_category{};     // weight set 0: each category's largest
  std::array<int64_t, 8> max_category_us{};  // and the first row reaching it
  std::vector<int64_t> curve;  // weight set 0, per bucket of [lo, hi]: the largest total
  bool out_of_range = false;   // a peak below zero or past 2^62 bytes: no number
};
// Sums the spans of `device`, and the events `stream` gives, into rows,
// and finds the peak of each weight set; the curve has `buckets` points
// over rows [lo, hi] (none when 0). In whatif_sweep.cpp.
SweepResult Sweep(const std::vector<Span>& spans, DeviceIndex device,
                  const std::vector<Weights>& weights, int64_t lo = 0, int64_t hi = 0,
                  int buckets = 0, const Stream& stream = {});

// What the changes need besides the spans.
struct Context {
  const ExplainInput& in;
  const std::string& name;  // the trace, for messages
  WhatIfReport& report;     // changes and notes are added
  const Selection& selection;
  const LazySubtrees& tree;
};

// Each change, in this order; each may add spans, edit them and scale the
// weights of each rank (`ranks` starts as one set of ones). An error names
// what the change asked for that the trace lacks.
Status ApplyDtype(const Context& c, const WhatIfChanges& ch, std::vector<Span>& spans);
Status ApplyOptimizer(const Context& c, const WhatIfChanges& ch, std::vector<Span>& spans,
                      std::vector<Weights>& ranks);
Status ApplySetToNone(const Context& c, const WhatIfChanges& ch, std::vector<Span>& spans);
Status ApplyCheckpoint(const Context& c, const WhatIfChanges& ch, std::vector<Span>& spans);
Status ApplyShard(const Context& c, const WhatIfChanges& ch, std::vector<Span>& spans,
                  std::vector<Weights>& ranks);

// What the changes share (whatif_changes.cpp). The categories' classes of
// the spans (Span::cls) that the changes edit.
inline constexpr int kParameter = 0, kOptimizerState = 1, kGradient = 5;
// The change's error: the trace's name, then what it lacks.
Status Refuse(const Context& c, const std::string& what);
std::string Percent(double f);  // "12.5%"
// Whether a span of class `cls` holds bytes.
bool Any(const std::vector<Span>& spans, int cls);
// Marks what the optimizer step makes and frees (kOptTemp); how many.
size_t MarkStepTemporaries(const Context& c, std::vector<Span>& spans);
// Whether the step updates lists of tensors at once (foreach, fused).
bool ListStep(const Trace& trace);
// The optimizer the trace steps; empty when none, "several" when more.
std::string SteppedOptimizer(const Trace& trace);
// `name`'s optimizer (any case), or null.
const OptimizerKind* KnownOptimizer(const std::string& name);

// The subtree of each call the changes ask about (an nn.Module call, a
// python call into torch/optim/): its last descendant in the pre-order, and
// the latest start time in it (the call's end, as the trace keeps no end
// times). Kept for those calls only: one walk with a stack of the open
// ancestors, not an array per event.
class Subtrees {
 public:
  uint32_t Last(uint32_t call) const { return of_.at(call).first; }
  int64_t EndUs(uint32_t call) const { return of_.at(call).second; }
  void Set(uint32_t call, uint32_t last, int64_t end_us) { of_[call] = {last, end_us}; }

 private:
  absl::flat_hash_map<uint32_t, std::pair<uint32_t, int64_t>> of_;
};
Subtrees SubtreesOf(const Trace& trace);
// SubtreesOf, made at the first use and kept (a replay's changes, and the
// report's several replays, share it).
class LazySubtrees {
 public:
  explicit LazySubtrees(const Trace& trace) : trace_(trace) {}
  const Subtrees& Get() const {
    if (!tree_) tree_ = SubtreesOf(trace_);
    return *tree_;
  }

 private:
  const Trace& trace_;
  mutable std::optional<Subtrees> tree_;
};

// The outermost nn.Module calls whose path ("A_0 > B_1") or own name
// matches `pattern` (shell wildcards), in pre-order.
std::vector<uint32_t> MatchedModuleCalls(const Trace& trace, const LazySubtrees& tree,
                                         const std::string& pattern);
// Up to `n` distinct module names of the trace, for an error that lists them.
std::string SomeModuleNames(const Trace& trace, size_t n);

}  // namespace memtl::whatif

// `memtl whatif`: the run you have not made, replayed from the one you have.
// The tensors the changes can touch become spans (each version alive from
// its creation to its free, in the exports' rows), the changes edit them,
// and the rows are summed again from the spans and the rest of the
// timeline (whatif_spans.h):
//
// - --dtype params|grads|optimizer=DTYPE scales those bytes by the new
//   element size over each tensor's own (float32 where the trace gave none).
// - --optimizer NAME scales the optimizer state by the new optimizer's
//   states per parameter over the trace's (the state's bytes over the
//   gradients'), and what the step makes and frees by their temporaries
//   per parameter (KnownOptimizers; the trace's named by its
//   "Optimizer.step#NAME.step" scope). From an optimizer with no state, the
//   new state is the gradients' bytes times its count, alive from the start
//   (a warm run).
// - --set-to-none frees each gradient that zero_grad zeroes in place, from
//   the zero_ until the next write; --no-set-to-none keeps the gradients
//   alive from the first time they are all alive (their largest total)
//   to the end, where zero_grad freed them.
// - --checkpoint PATTERN: in each call of a matched module (the outermost),
//   the tensors its forward made that live on into the backward, unless the
//   forward after the module reads them (its output), are freed when the
//   call ends and made again at the first backward read of any of them
//   (its backward begins), with its largest temporary beside them then.
// - --shard optimizer=N (ZeRO-1) divides the optimizer state, and the
//   step's temporaries, as ZeroRedundancyOptimizer partitions the
//   parameters: the largest first, each to the rank holding the fewest
//   bytes; each rank's peak is its own. --shard grads=N (ZeRO-2) divides the
//   gradients once their unit's backward ends (with --wrap, the module's;
//   without, each as it is made). --shard params=N (ZeRO-3, FSDP) divides
//   the parameters, and gathers each --wrap unit's whole while its forward
//   runs, and in the backward from the end of the unit before to the last
//   of its gradients.
//
// What it cannot see is said in the report's notes: the allocator's
// rounding, communication buffers (DDP's buckets stay as measured), the
// transient gradients of --no-set-to-none.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/explain/context.h"
#include "core/model/status.h"

namespace memtl {

struct WhatIfChanges {
  int shard_optimizer = 1;  // ranks (1: not sharded)
  int shard_grads = 1;
  int shard_params = 1;
  std::string wrap;                     // the units of --shard params/grads: a module pattern
  std::vector<std::string> checkpoint;  // module patterns
  std::optional<bool> set_to_none;
  std::string optimizer;  // lower case ("adam"); empty: unchanged
  // New element sizes in bytes (0: unchanged): parameters, gradients,
  // optimizer state.
  std::array<int, 3> dtype_bytes{};
  bool Any() const;
};

// The optimizers --optimizer knows, with their state tensors per
// parameter.
struct OptimizerKind {
  const char* name;  // "adam"
  int states;        // tensors of the parameter's size: exp_avg, exp_avg_sq
  int temporaries;   // parameter-sized temporaries alive at once in its step
};
const std::vector<OptimizerKind>& KnownOptimizers();
// Element bytes of a floating dtype ("bf16", "bfloat16", "float32", "fp16");
// 0 when it is none.
int DtypeBytes(std::string_view dtype);

// One device's peak, measured or predicted.
struct WhatIfPeak {
  int64_t bytes = 0;
  int64_t since_start_us = 0;
  std::array<int64_t, 8> by_category{};  // at the peak, in the export's order
  std::string phase;                     // of the op running then ("backward", ...)
};

struct WhatIfDevice {
  std::string device;
  WhatIfPeak before;
  WhatIfPeak after;  // the largest rank's, when ranks differ
  // Per rank, when the sharding makes ranks differ (ZeRO-1's partition of
  // the optimizer state); empty when they are alike.
  std::vector<int64_t> rank_peaks;
  // Both curves on the same times (µs from the first row), thinned to at
  // most a few thousand points (each the largest of the rows it stands for).
  std::vector<int64_t> times_us, measured, predicted;
};

struct WhatIfReport {
  std::string trace;
  std::vector<std::string> changes;  // what each change does here, in words
  std::vector<std::string> notes;    // what the prediction leaves out
  std::vector<WhatIfDevice> devices;
};

namespace whatif {
struct Span;  // whatif_spans.h
struct Selection;
}  // namespace whatif

// A measured timeline ready to replay: its spans, and each device's
// measured peak and curve, are made once for any number of changes (the
// report's "What would help" replays several on one timeline). It reads
// `in`, which must outlive it.
class WhatIfReplay {
 public:
  // `only`, when given, limits the replays to those devices (the report's:
  // each device's sweep streams the whole timeline).
  explicit WhatIfReplay(const ExplainInput& in, const std::vector<DeviceIndex>* only = nullptr);
  ~WhatIfReplay();
  WhatIfReplay(const WhatIfReplay&) = delete;
  WhatIfReplay& operator=(const WhatIfReplay&) = delete;
  // Replays every device with `changes` applied; `curves` false leaves
  // the chart's curves out. Errors (one line, naming the trace `name`): a
  // change naming a module no call matches, or a category the trace lacks;
  // an optimizer it does not know.
  Expected<WhatIfReport> Run(const WhatIfChanges& changes, const std::string& name,
                             bool curves = true) const;

 private:
  // Run on `spans`, the spans of the keys `selection` names, which the
  // changes edit; the sweeps stream the rest of the timeline.
  Expected<WhatIfReport> Replay(const WhatIfChanges& changes, const std::string& name, bool curves,
                                const whatif::Selection& selection,
                                std::vector<whatif::Span>& spans) const;
  struct Measured;
  std::unique_ptr<Measured> m_;
};

// One replay: WhatIfReplay(in).Run(changes, name).
Expected<WhatIfReport> WhatIf(const ExplainInput& in, const WhatIfChanges& changes,
                              const std::string& name);

std::string FormatWhatIf(const WhatIfReport& r);
std::string WhatIfJson(const WhatIfReport& r);

}  // namespace memtl

// Where an event of the trace ran, for the explaining outputs (memtl peak,
// memtl events, the report's peak section): the nn.Module calls around it
// and the phase of the step.
//
// Known limits: module paths are the python tracer's names (class and call
// index, `Sequential_0 > Linear_1`), not attribute paths (PyTorch's profile
// does not record them); the phase is a heuristic over the event tree
// (docs/categories.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/categories/category.h"
#include "core/graph/data_flow.h"
#include "core/graph/op_tree.h"
#include "core/infer/infer.h"
#include "core/model/quote.h"  // JsonString, for the explaining outputs
#include "core/timeline/timeline.h"

namespace memtl {

// What the explaining outputs read: the stages up to the timeline.
struct ExplainInput {
  const Trace& trace;
  const KeyTable& keys;  // identity's result
  const OpTree& tree;
  const DataFlowGraph& graph;
  const CategoryDict& categories;
  const std::vector<TimelineEvent>& timeline;
  DeviceIndex device;  // the exported device (memtl peak, the report)
  // Analysis::key_shapes (ids into trace.shapes); null or empty when the
  // reader kept no shapes (ShapeOf then gives none).
  const std::vector<uint32_t>* key_shapes = nullptr;
  // The categories inferred for a trace without tensors (Analysis::inferred,
  // core/infer/); null when the passes categorized it. The outputs label
  // every category "inferred" then.
  const InferredCategories* inferred = nullptr;
};

// The shape and dtype of key slot `key` as the trace gave them
// ("[32, 64] float32"; Analysis::key_shapes says which observation); empty
// when none was kept or `key` is invalid.
std::string_view ShapeOf(const ExplainInput& in, KeySlot key);

struct EventContext {
  std::string module;  // "Sequential_0 > Linear_1"; empty when none
  std::string phase;   // "forward", "backward", "optimizer", "other"
  // The innermost Python frame of the user's code around the event
  // (CallSiteLabel: "train.py:57 in forward()" where the trace says which
  // line of it made the call the event is under, else "train.py: forward(),
  // defined at line 42"); empty when none. A
  // frame is the user's when its file is not PyTorch's (under torch/) and
  // it is no built-in ("<built-in method ...>"); standard-library frames
  // are not told apart (they are rarely the innermost).
  std::string call_site;
};

// `event` kNone32 (no event: a tensor from before the profile) is "other".
EventContext ContextOf(const Trace& trace, const OpTree& tree, uint32_t event);

// "Sequential_0 > Linear_1": the nn.Module calls around `event`, the event
// itself included, outermost first; empty when there are none.
std::string ModulePath(const Trace& trace, uint32_t event);

// What the outputs call a frame of the user's code, from the python
// tracer's name for it ("train.py(42): forward": the line is where the
// function is defined): with `line` (the line of that frame that made a
// call, 0: unknown) "train.py:57 in forward()"; without,
// "train.py: forward(), defined at line 42". Any other name stays as it is.
// `at_line`: the name's line is the one executing in the frame (a memory
// snapshot's frames, TraceHeader::py_names_at_line), which serves when
// `line` is 0.
std::string CallSiteLabel(std::string_view frame, uint32_t line, bool at_line = false);

// Whether a python call's name is a frame of the user's code (EventContext::
// call_site): "FILE(LINE): FUNC" with FILE outside PyTorch and outside
// generated code, no built-in.
bool IsUserFrame(std::string_view name);
// Whether it is a frame of code torch.compile generated (inductor's cached
// files, "torchinductor_<user>/xx/c....py(71): call"): not the user's, and
// no place of its own; the call site of an event inside one is the user
// frame around it, marked "(compiled region)".
bool IsGeneratedFrame(std::string_view name);

// The trace's ProfilerStep#N scopes (torch.profiler's schedule opens one per
// step): (start time in ns, name), by start time. They are leaves of the
// event tree (the python tracer's calls interleave with them), so an event's
// step is found by time (StepAt). Reads the op records.
using StepStarts = std::vector<std::pair<int64_t, std::string>>;
StepStarts ProfilerSteps(const Trace& trace);
// The step of an event that starts at `t_ns`: the last one that started at
// or before it; empty when none did (or the trace has none).
std::string StepAt(const StepStarts& steps, int64_t t_ns);

// A time `ns` after `first`, as explain prints it: "1.234 ms".
std::string MsAfter(int64_t ns, int64_t first);

// Per (key, version) of the graph's value numbering, the event of the node
// that made it (allocated version 0, an intermediate included, or wrote the
// version); kNone32 when no node did (a tensor from before the profile).
PerValue<uint32_t> CreatorOfValues(const DataFlowGraph& graph);

}  // namespace memtl

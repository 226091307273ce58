// The semantic-pass interface. A pass reads the const PassInput and writes
// only through the CategoryWriter; it never fails (missing evidence gives the
// conservative answer: no category). Passes run in the order of passes.def.
#pragma once

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "core/categories/category.h"
#include "core/graph/data_flow.h"
#include "core/graph/op_tree.h"
#include "core/graph/size_map.h"

namespace memtl {

struct PassInput {
  const Trace& trace;
  const KeyTable& keys;  // identity's result
  const OpTree& tree;
  const DataFlowGraph& graph;
  const SizeMap& sizes;
};

// Declarations of every pass, from the one ordered list.
#define MEMTL_PASS(Name, label, rule) void Run##Name(const PassInput& in, CategoryWriter& out);
#include "passes/passes.def"
#undef MEMTL_PASS

// Runs every pass in order.
void RunAllPasses(const PassInput& in, CategoryDict& categories);

// What one pass decided: each (key slot, version) of the graph whose
// category it changed.
struct PassChange {
  KeySlot key;
  Version version;
  std::optional<Category> before, after;
};
struct PassStep {
  const char* label;  // passes.def's
  const char* rule;   // passes.def's one-sentence rule
  std::vector<PassChange> changes;
};

// RunAllPasses, recording after each pass what it changed: the evidence
// `memtl explain` gives and the per-pass goldens list. Compares a snapshot of
// every value's category before and after each pass, so it is for one
// trace's explanation, not the export path.
std::vector<PassStep> RunAllPassesTraced(const PassInput& in, CategoryDict& categories);

// ---- Queries shared by several passes (passes/queries.cpp) ----

// Every (key, version) the graph mentions (inputs, intermediates as v0,
// outputs) plus keys categorized by id, sorted (PyTorch's _category_snapshot
// keys).
// Keys are slots of the key table, so slot order is PyTorch's key order.
std::vector<std::pair<KeySlot, Version>> AllTensorVersions(const DataFlowGraph& graph,
                                                           const CategoryDict& cats);

// (parameter, gradient) pairs that PyTorch's _extract_parameters_and_gradients
// yields for one event, as key slots (invalid: none): AccumulateGrad's new or
// accumulated gradient, and the python tracer's module and optimizer
// parameters.
// Most events can yield nothing (they are neither a backward op nor a
// python call with a module or optimizer): those are turned away inline,
// and only the rest reach ForEachParameterAndGradientSlow.
void ForEachParameterAndGradientSlow(const PassInput& in, uint32_t event,
                                     const std::function<void(KeySlot, KeySlot)>& fn);
template <typename Fn>
void ForEachParameterAndGradient(const PassInput& in, uint32_t event, Fn&& fn) {
  const Event& e = in.trace.events[event];
  if (e.kind == EventKind::kOp && in.trace.ops[e.payload].scope != RecordScope::kBackwardFunction)
    return;
  if (e.kind == EventKind::kPy) {
    const PyInfo py = in.trace.Py(e.payload);
    if (py.module() == kNone32 && py.optimizer() == kNone32) return;
  } else if (e.kind != EventKind::kOp) {
    return;
  }
  ForEachParameterAndGradientSlow(in, event, fn);
}

// Per tensor id slot (KeyTable::id_slot), whether any version of the tensor
// depends on a gradient or parameter (PyTorch's
// _any_version_depends_on_gradient). PyTorch iterates over the whole graph to
// a fixed point; this propagates along an index from ids to the nodes that
// read them, which reaches the same set in linear time.
std::vector<bool> AnyVersionDependsOnGradient(const PassInput& in, const CategoryWriter& cats);

}  // namespace memtl

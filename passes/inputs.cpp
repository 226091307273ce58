// Pass 3: inputs, the tensors that feed the model but are not part of its
// forward-backward-update loop.
//
// Heuristic (PyTorch's _set_inputs): collect the ids of tensors any version of
// which depends on a gradient; inputs are the tensor versions that contribute
// to a gradient (walking the graph backwards) but whose id is not in that
// set, excluding values created in the backward pass (autograd details).
// Writes: INPUT by (key, version), as a default only.
// Needs at least one training step (or python-tracer parameters) in the
// window; otherwise nothing contributes to a gradient and no input is found.
#include "core/categories/category.h"
#include "passes/pass.h"

namespace memtl {

void RunInputs(const PassInput& in, CategoryWriter& out) {
  const auto depends_on_gradient = AnyVersionDependsOnGradient(in, out);
  const DataFlowGraph& g = in.graph;
  const auto& nodes = g.nodes();

  // Per value (key, version) of the graph's numbering.
  PerValue<bool> produces_gradient(g.num_values(), false);
  std::vector<ValueIndex> values;
  for (size_t i = nodes.size(); i-- > 0;) {
    bool any = false;
    values.clear();
    for (const FlowEdge* e = g.begin(nodes[i]); e != g.end(nodes[i]); ++e) {
      if (e->is_input()) {
        values.push_back(g.value(e->key(), e->input()));
        const auto c = out.Get(e->key(), e->input());
        any |= c == Category::kGradient || c == Category::kParameter ||
               produces_gradient[values.back()];
      }
      if (e->is_output()) {
        values.push_back(g.value(e->key(), e->output_version()));
        const auto c = out.Get(e->key(), e->output_version());
        any |= c == Category::kGradient || c == Category::kParameter ||
               produces_gradient[values.back()];
      }
    }
    if (any) {
      for (const ValueIndex v : values) produces_gradient[v] = true;
    }
  }
  // Backward-pass outputs are autograd implementation details, not inputs.
  for (const auto& node : nodes) {
    if (!in.tree.in_backward(node.event)) continue;
    for (const FlowEdge* e = g.begin(node); e != g.end(node); ++e) {
      if (e->is_output()) produces_gradient[g.value(e->key(), e->output_version())] = false;
    }
  }
  for (const KeySlot k : in.keys.slots()) {
    if (depends_on_gradient[in.keys.IdIndex(k)]) continue;
    for (Version v(0); v.value() < g.num_versions(k); v = v.next()) {
      if (produces_gradient[g.value(k, v)]) out.SetDefaultByVersion(k, v, Category::kInput);
    }
  }
}

}  // namespace memtl

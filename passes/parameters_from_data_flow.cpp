// Pass 4: parameters deduced from data flow, the fallback when the python
// tracer did not report them.
//
// Heuristic (PyTorch's _set_parameters_using_data_flow): a parameter is used
// directly in the forward pass (a node outside the backward pass, touching no
// gradient, that reads a value derived from an input), contributes to a
// gradient, and depends on one (it is updated from a gradient). Writes:
// PARAMETER by tensor id. Runs after inputs, which give the forward pass its
// starting points. Known to miss parameters of models whose inputs were not
// found (inference, or no optimizer step in the window).
#include "passes/pass.h"

namespace memtl {

void RunParametersFromDataFlow(const PassInput& in, CategoryWriter& out) {
  const DataFlowGraph& g = in.graph;
  const auto& nodes = g.nodes();
  const auto snapshot = AllTensorVersions(g, out.dict());
  auto is_gradient = [&](KeySlot key, Version version) {
    return out.Get(key, version) == Category::kGradient;
  };

  // Sets of values (the graph's (key, version) numbering).
  PerValue<bool> candidate_parameters(g.num_values(), false);
  PerValue<bool> candidate_fwd(g.num_values(), false);
  for (const auto& [key, version] : snapshot) {
    if (out.Get(key, version) == Category::kInput) candidate_fwd[g.value(key, version)] = true;
  }
  std::vector<ValueIndex> inputs, outputs;
  for (const auto& node : nodes) {
    if (in.tree.in_backward(node.event)) continue;
    inputs.clear();
    outputs.clear();
    bool touches_gradient = false;
    for (const FlowEdge* e = g.begin(node); e != g.end(node); ++e) {
      if (e->is_input()) {
        inputs.push_back(g.value(e->key(), e->input()));
        touches_gradient |= is_gradient(e->key(), e->input());
      }
      if (e->is_output()) {
        outputs.push_back(g.value(e->key(), e->output_version()));
        touches_gradient |= is_gradient(e->key(), e->output_version());
      }
    }
    if (touches_gradient) continue;
    bool reads_forward = false;
    for (const ValueIndex v : inputs) reads_forward |= candidate_fwd[v];
    if (!reads_forward) continue;
    for (const ValueIndex v : outputs) candidate_fwd[v] = true;
    for (const ValueIndex v : inputs) {
      if (!candidate_fwd[v]) candidate_parameters[v] = true;
    }
  }

  // Each parameter eventually contributes to the value of a gradient...
  PerValue<bool> used_for_gradient(g.num_values(), false);
  for (size_t i = nodes.size(); i-- > 0;) {
    bool any = false;
    for (const FlowEdge* e = g.begin(nodes[i]); e != g.end(nodes[i]) && !any; ++e) {
      if (!e->is_output()) continue;
      any = is_gradient(e->key(), e->output_version()) ||
            used_for_gradient[g.value(e->key(), e->output_version())];
    }
    if (!any) continue;
    for (const FlowEdge* e = g.begin(nodes[i]); e != g.end(nodes[i]); ++e) {
      if (e->is_input()) used_for_gradient[g.value(e->key(), e->input())] = true;
    }
  }
  // ...and depends on a gradient.
  const auto depends = AnyVersionDependsOnGradient(in, out);
  std::vector<bool> parameter_ids(in.keys.num_ids, false);
  for (const KeySlot k : in.keys.slots()) {
    if (!depends[in.keys.IdIndex(k)]) continue;
    for (ValueIndex v = g.values_begin(k); v < g.values_end(k); v = v.next()) {
      if (candidate_parameters[v] && used_for_gradient[v]) parameter_ids[in.keys.IdIndex(k)] = true;
    }
  }
  for (const auto& [key, version] : snapshot) {
    if (parameter_ids[in.keys.IdIndex(key)]) out.SetById(key, Category::kParameter);
  }
}

}  // namespace memtl

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
#include <unordered_set>

#include "core/timeline/timeline.h"
#include "passes/pass.h"

namespace memtl {

void RunParametersFromDataFlow(const PassInput& in, CategoryWriter& out) {
  using KV = std::pair<TensorKey, int32_t>;
  const DataFlowGraph& g = in.graph;
  const auto& nodes = g.nodes();
  const auto snapshot = AllTensorVersions(g, out.dict());
  auto is_gradient = [&](const KV& kv) {
    return out.Get(kv.first, kv.second) == Category::kGradient;
  };

  std::unordered_set<KV, KeyVersionHash> candidate_parameters;
  std::unordered_set<KV, KeyVersionHash> candidate_fwd;
  for (const auto& kv : snapshot) {
    if (out.Get(kv.first, kv.second) == Category::kInput) candidate_fwd.insert(kv);
  }
  std::vector<KV> inputs, outputs;
  for (const auto& node : nodes) {
    inputs.clear();
    outputs.clear();
    for (const FlowEdge* e = g.begin(node); e != g.end(node); ++e) {
      if (e->is_input()) inputs.emplace_back(e->key, e->input_version);
      if (e->is_output()) outputs.emplace_back(e->key, e->output_version());
    }
    if (in.tree.in_backward(node.event)) continue;
    bool touches_gradient = false;
    for (const auto& kv : inputs) touches_gradient |= is_gradient(kv);
    for (const auto& kv : outputs) touches_gradient |= is_gradient(kv);
    if (touches_gradient) continue;
    bool reads_forward = false;
    for (const auto& kv : inputs) reads_forward |= candidate_fwd.count(kv) > 0;
    if (!reads_forward) continue;
    candidate_fwd.insert(outputs.begin(), outputs.end());
    for (const auto& kv : inputs) {
      if (!candidate_fwd.count(kv)) candidate_parameters.insert(kv);
    }
  }

  // Each parameter eventually contributes to the value of a gradient...
  std::unordered_set<KV, KeyVersionHash> used_for_gradient;
  for (size_t i = nodes.size(); i-- > 0;) {
    bool any = false;
    for (const FlowEdge* e = g.begin(nodes[i]); e != g.end(nodes[i]) && !any; ++e) {
      if (!e->is_output()) continue;
      const KV kv{e->key, e->output_version()};
      any = is_gradient(kv) || used_for_gradient.count(kv);
    }
    if (!any) continue;
    for (const FlowEdge* e = g.begin(nodes[i]); e != g.end(nodes[i]); ++e) {
      if (e->is_input()) used_for_gradient.insert({e->key, e->input_version});
    }
  }
  // ...and depends on a gradient.
  const auto depends = AnyVersionDependsOnGradient(in, out);
  std::unordered_set<int64_t> parameter_ids;
  for (const auto& kv : candidate_parameters) {
    if (used_for_gradient.count(kv) && depends.count(kv.first.id.value()))
      parameter_ids.insert(kv.first.id.value());
  }
  for (const auto& [key, version] : snapshot) {
    if (parameter_ids.count(key.id.value())) out.SetById(key, Category::kParameter);
  }
}

}  // namespace memtl

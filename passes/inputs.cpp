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
#include <unordered_set>

#include "core/categories/category.h"
#include "passes/pass.h"

namespace memtl {

void RunInputs(const PassInput& in, CategoryWriter& out) {
  const auto depends_on_gradient = AnyVersionDependsOnGradient(in, out);
  const DataFlowGraph& g = in.graph;
  const auto& nodes = g.nodes();

  using KV = std::pair<TensorKey, int32_t>;
  std::unordered_set<KV, KeyVersionHash> produces_gradient;
  std::vector<KV> tensors;
  for (size_t i = nodes.size(); i-- > 0;) {
    tensors.clear();
    for (const FlowEdge* e = g.begin(nodes[i]); e != g.end(nodes[i]); ++e) {
      if (e->is_input()) tensors.emplace_back(e->key, e->input_version);
      if (e->is_output()) tensors.emplace_back(e->key, e->output_version());
    }
    bool any = false;
    for (const auto& kv : tensors) {
      const auto c = out.Get(kv.first, kv.second);
      if (c == Category::kGradient || c == Category::kParameter || produces_gradient.count(kv)) {
        any = true;
        break;
      }
    }
    if (any) produces_gradient.insert(tensors.begin(), tensors.end());
  }
  // Backward-pass outputs are autograd implementation details, not inputs.
  for (const auto& node : nodes) {
    if (!in.tree.in_backward(node.event)) continue;
    for (const FlowEdge* e = g.begin(node); e != g.end(node); ++e) {
      if (e->is_output()) produces_gradient.erase({e->key, e->output_version()});
    }
  }
  for (const auto& [key, version] : produces_gradient) {
    if (!depends_on_gradient.count(key.id.value()))
      out.SetDefaultByVersion(key, version, Category::kInput);
  }
}

}  // namespace memtl

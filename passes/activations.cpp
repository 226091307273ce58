// Pass 5: activations, flooded forward from inputs.
//
// Heuristic (PyTorch's _set_activations): a node outside the backward pass
// whose inputs include an input or activation, and are otherwise only
// parameters or temporaries, produces activations. The flood runs in graph
// order, so a node sees the activations of the nodes before it. Writes:
// ACTIVATION by (key, version), as a default only. Runs after both parameter
// passes, which decide what "otherwise only parameters" allows.
#include "passes/pass.h"

namespace memtl {

void RunActivations(const PassInput& in, CategoryWriter& out) {
  const DataFlowGraph& g = in.graph;
  for (const auto& node : g.nodes()) {
    if (in.tree.in_backward(node.event)) continue;
    bool required = false;
    bool disallowed = false;
    for (const FlowEdge* e = g.begin(node); e != g.end(node); ++e) {
      if (!e->is_input()) continue;
      const auto c = out.Get(e->key(), e->input());
      if (c == Category::kInput || c == Category::kActivation) {
        required = true;
      } else if (c != Category::kParameter && c != Category::kTemporary) {
        disallowed = true;  // includes unknown
      }
    }
    if (!required || disallowed) continue;
    for (const FlowEdge* e = g.begin(node); e != g.end(node); ++e) {
      if (e->is_output())
        out.SetDefaultByVersion(e->key(), e->output_version(), Category::kActivation);
    }
  }
}

}  // namespace memtl

// Pass 7: autograd detail, what the backward pass creates that is not a
// gradient.
//
// Reads: outputs of nodes inside backward functions. Writes: AUTOGRAD_DETAIL
// by (key, version), as a default only, when the value is new (v0) or its
// previous version was unknown or itself autograd detail. Runs last so that
// every more specific category wins.
#include "passes/pass.h"

namespace memtl {

void RunAutogradDetail(const PassInput& in, CategoryWriter& out) {
  const DataFlowGraph& g = in.graph;
  for (const auto& node : g.nodes()) {
    if (!in.tree.in_backward(node.event)) continue;
    for (const FlowEdge* e = g.begin(node); e != g.end(node); ++e) {
      if (!e->is_output()) continue;
      const Version v = e->output_version();
      const bool first = v == Version(0);
      const auto prior = first ? std::nullopt : out.Get(e->key(), Version(v.value() - 1));
      if (first || !prior || prior == Category::kAutogradDetail) {
        out.SetDefaultByVersion(e->key(), v, Category::kAutogradDetail);
      }
    }
  }
}

}  // namespace memtl

// Pass 1: gradients and temporaries, the unambiguous categories.
//
// Reads: AccumulateGrad ops (a new gradient is detached, an existing one is
// updated with add_) and the python tracer's parameter gradients; the graph's
// intermediates. Writes: GRADIENT by tensor id, TEMPORARY by key.
// Runs first because every later pass reasons from gradients.
// Known gap: torch 1.13 records no `.grad` in the python tracer, so gradients
// that AccumulateGrad never touches in the profiled window are missed.
#include "passes/pass.h"

namespace memtl {

void RunGradientsAndTemporaries(const PassInput& in, CategoryWriter& out) {
  for (uint32_t e : in.tree.preorder()) {
    ForEachParameterAndGradient(in, e, [&](KeySlot, KeySlot grad) {
      if (grad.valid()) out.SetById(grad, Category::kGradient);
    });
  }
  // A tensor allocated and freed inside one top-level op is a temporary.
  for (const auto& node : in.graph.nodes()) {
    for (const FlowEdge* e = in.graph.begin(node); e != in.graph.end(node); ++e) {
      if (e->is_intermediate()) out.SetByKey(e->key(), Category::kTemporary);
    }
  }
}

}  // namespace memtl

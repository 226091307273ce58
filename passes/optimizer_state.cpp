// Pass 6: optimizer state reported by the python tracer.
//
// Reads: optimizer steps (state tensors per parameter, and torch 1.13's flat
// state list). Writes: OPTIMIZER_STATE by tensor id, overriding earlier
// guesses (a momentum buffer looks like a parameter to the data-flow pass).
#include "passes/pass.h"

namespace memtl {

void RunOptimizerState(const PassInput& in, CategoryWriter& out) {
  const Trace& t = in.trace;
  auto mark = [&](uint32_t tensor) {
    if (const KeySlot key = in.keys.SlotOfTensor(tensor); key.valid())
      out.SetById(key, Category::kOptimizerState);
  };
  for (uint32_t e : in.tree.preorder()) {
    const Event& ev = t.events[e];
    if (ev.kind != EventKind::kPy) continue;
    const uint32_t optimizer = t.Py(ev.payload).optimizer();
    if (optimizer == kNone32) continue;
    const OptimizerInfo& o = t.optimizers[optimizer];
    for (uint32_t p = o.params_begin; p < o.params_begin + o.params_count; ++p) {
      for (uint32_t s = 0; s < t.params[p].state_count; ++s)
        mark(t.states[t.params[p].state_begin + s].tensor);
    }
    for (uint32_t s = o.state_begin; s < o.state_begin + o.state_count; ++s)
      mark(t.states[s].tensor);
  }
}

}  // namespace memtl

// Pass 2: parameters reported by the python tracer.
//
// Reads: nn.Module calls and optimizer steps. Writes: PARAMETER by tensor id.
// Runs before inputs so that known parameters are never taken for inputs.
#include "passes/pass.h"

namespace memtl {

void RunParametersFromPythonTracer(const PassInput& in, CategoryWriter& out) {
  for (uint32_t e : in.tree.preorder()) {
    ForEachParameterAndGradient(in, e, [&](KeySlot param, KeySlot) {
      if (param.valid()) out.SetById(param, Category::kParameter);
    });
  }
}

}  // namespace memtl

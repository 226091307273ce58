// The names users recognise for the tensors that hold a model's state:
// each PARAMETER by its module path and parameter name, its GRADIENT and
// its OPTIMIZER_STATE by the same name with "grad" or the state's name
// after it ("Sequential_0 > Linear_1 .weight", "... .weight grad",
// "... .weight exp_avg"). The python tracer records each nn.Module call
// with its parameters (name, tensor, gradient) and each optimizer step with
// its parameters and their state; the names come from there, so they need
// no category and hold for any trace recorded with with_stack.
#pragma once

#include <string>

#include "absl/container/flat_hash_map.h"
#include "core/model/key_table.h"
#include "core/model/trace.h"

namespace memtl {

// Per key slot (KeySlot::value()), the name of each tensor the modules and
// optimizers of `trace` report; the first module call that reports a
// parameter names it (a module called twice keeps its first path).
// Keys no module or optimizer reports have no entry.
using TensorNames = absl::flat_hash_map<uint32_t, std::string>;
TensorNames NameModelState(const Trace& trace, const KeyTable& keys);

// "Sequential_0 > Linear_1": the nn.Module calls around event `event`, the
// event itself included, outermost first; empty when there are none.
std::string ModulePath(const Trace& trace, uint32_t event);

}  // namespace memtl

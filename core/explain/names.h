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
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/model/key_table.h"
#include "core/model/trace.h"

namespace memtl {

// Per key slot (KeySlot::value()), the name of each of the `wanted` keys
// (sorted) that the modules and optimizers of `trace` report; the first
// module call that reports a parameter names it (a module called twice
// keeps its first path). Other keys have no entry. A module's path is built
// only when it reports a wanted key, so naming the few tensors a command
// shows costs one scan of the python calls.
using TensorNames = absl::flat_hash_map<uint32_t, std::string>;
TensorNames NameModelState(const Trace& trace, const KeyTable& keys,
                           const std::vector<KeySlot>& wanted);

}  // namespace memtl

// The names users recognise for the tensors that hold a model's state:
// each PARAMETER by its module path and parameter name, its GRADIENT and
// its OPTIMIZER_STATE by the same name with "grad" or the state's name
// after it ("Sequential_0 > Linear_1 .weight", "... .weight grad",
// "... .weight exp_avg"); with the model's own names where the trace has
// them (memtl.save(..., model=model) writes named_parameters()):
// "layer1.0.conv1.weight grad".
//
// Where they come from, first found wins:
// 1. The python tracer: each nn.Module call reports its parameters (name,
//    tensor, gradient) and each optimizer step its parameters, gradients
//    and state (torch 2.x; torch 1.13 reports module parameters only). A
//    parameter only the optimizer reports, with the model's name, belongs
//    to the nearest module by that name that a call reported (a module may
//    use a submodule's weights without calling it: nn.MultiheadAttention's
//    out_proj).
// 2. Data flow in the optimizer step, where the tracer reports no gradient
//    or state (torch 1.13, or a step it did not see): the ops of one step
//    that join tensors of one size (the update `param.add_(grad)`, the
//    moments `exp_avg.lerp_(grad)`, `param.addcdiv_(exp_avg, denom)`) join
//    a parameter with its gradient and state, which take its name ("grad",
//    or "state": the step does not say which). A tensor joined with nothing
//    (Adam's step count, `step_t += 1`) takes the parameter the step
//    touches next, as the per-parameter loop runs. A group that joins two
//    parameters, or tensors of several (a foreach step over lists), names
//    nothing: unknown is better than wrong.
#pragma once

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/explain/context.h"

namespace memtl {

struct TensorName {
  // The python tracer's path of the module whose parameter it is
  // ("Sequential_0 > Linear_1"), for the by-module tables; empty when no
  // module call reported the parameter (an optimizer's alone).
  std::string module;
  // What the outputs print: "Sequential_0 > Linear_1 .weight grad", or with
  // the model's names "1.weight grad"; "optimizer param 3 exp_avg" for a
  // parameter only an optimizer reports.
  std::string text;
};

// Per key slot (KeySlot::value()), the name of each of the `wanted` keys
// (sorted; null: every key) that is a parameter, or a parameter's gradient
// or optimizer state; other keys have no entry. The first module call that
// reports a parameter names it (a module called twice keeps its first path).
// A module's path is built once, at its first parameter, so naming the few
// tensors a command shows costs a scan of the python calls; the data-flow
// rule runs only when a wanted gradient or state is left unnamed.
// `tracer_state` false ignores the gradients and state the tracer reports,
// as a torch 1.13 trace has none (the tests check the data-flow rule
// against the tracer's answer with it).
using TensorNames = absl::flat_hash_map<uint32_t, TensorName>;
// How the name of a parameter only an optimizer reports begins ("optimizer
// param 3": its place in the optimizer's list).
inline constexpr std::string_view kOptimizerParam = "optimizer param ";
TensorNames NameModelState(const ExplainInput& in, const std::vector<KeySlot>* wanted,
                           bool tracer_state = true);

}  // namespace memtl

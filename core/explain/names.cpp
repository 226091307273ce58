// Names for parameters, gradients and optimizer state (names.h).
#include "core/explain/names.h"

#include <algorithm>

#include "core/explain/context.h"

namespace memtl {

TensorNames NameModelState(const Trace& trace, const KeyTable& keys,
                           const std::vector<KeySlot>& wanted) {
  TensorNames names;
  auto is_wanted = [&](uint32_t tensor) {
    const KeySlot k = keys.SlotOfTensor(tensor);
    return k.valid() && std::binary_search(wanted.begin(), wanted.end(), k);
  };
  auto name = [&](uint32_t tensor, const std::string& text) {
    if (is_wanted(tensor)) names.try_emplace(keys.SlotOfTensor(tensor).value(), text);
  };
  // A parameter's name as a module reports it, or as an optimizer reports
  // it when no module did (its place in the optimizer's list).
  TensorNames params;
  auto param_name = [&](uint32_t tensor) -> const std::string* {
    const KeySlot k = keys.SlotOfTensor(tensor);
    const auto it = k.valid() ? params.find(k.value()) : params.end();
    return it == params.end() ? nullptr : &it->second;
  };
  // Modules first, in event order: a parameter's name is its module's path
  // and its attribute name. Parameters are remembered whether wanted or
  // not: an optimizer's wanted state takes its parameter's name.
  for (uint32_t e = 0; e < trace.events.size(); ++e) {
    const Event& ev = trace.events[e];
    const uint32_t m = ev.kind == EventKind::kPy ? trace.Py(ev.payload).module() : kNone32;
    if (m == kNone32) continue;
    const ModuleInfo& mod = trace.modules[m];
    std::string path;  // built at the first parameter it names
    for (uint32_t p = mod.params_begin; p < mod.params_begin + mod.params_count; ++p) {
      const ParamInfo& param = trace.params[p];
      std::string full;
      if (const std::string* known = param_name(param.tensor)) {
        if (!is_wanted(param.tensor) && !is_wanted(param.grad)) continue;
        full = *known;
      } else {
        if (path.empty()) path = ModulePath(trace, e);
        full = path;
        full += " .";
        full += param.name == kNone32 ? std::string("?") : trace.strings.Get(param.name);
        if (const KeySlot k = keys.SlotOfTensor(param.tensor); k.valid())
          params.emplace(k.value(), full);
      }
      name(param.tensor, full);
      name(param.grad, full + " grad");
    }
  }
  // Then the optimizers: their parameters' gradients and state.
  for (uint32_t e = 0; e < trace.events.size(); ++e) {
    const Event& ev = trace.events[e];
    const uint32_t o = ev.kind == EventKind::kPy ? trace.Py(ev.payload).optimizer() : kNone32;
    if (o == kNone32) continue;
    const OptimizerInfo& opt = trace.optimizers[o];
    for (uint32_t p = opt.params_begin; p < opt.params_begin + opt.params_count; ++p) {
      const ParamInfo& param = trace.params[p];
      const std::string* known = param_name(param.tensor);
      const std::string base =
          known != nullptr ? *known : "optimizer param " + std::to_string(p - opt.params_begin);
      name(param.tensor, base);
      name(param.grad, base + " grad");
      for (uint32_t s = param.state_begin; s < param.state_begin + param.state_count; ++s)
        name(trace.states[s].tensor, base + " " + trace.strings.Get(trace.states[s].name));
    }
  }
  return names;
}

}  // namespace memtl

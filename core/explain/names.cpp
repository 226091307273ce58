// Names for parameters, gradients and optimizer state (names.h).
#include "core/explain/names.h"

#include <string_view>
#include <vector>

namespace memtl {

std::string ModulePath(const Trace& trace, uint32_t event) {
  constexpr std::string_view kPrefix = "nn.Module: ";
  std::vector<std::string_view> modules;
  for (uint32_t p = event; p != kNone32; p = trace.events[p].parent) {
    const Event& e = trace.events[p];
    if (e.kind != EventKind::kPy) continue;
    const std::string& name = trace.Name(e);
    if (name.starts_with(kPrefix)) modules.push_back(std::string_view(name).substr(kPrefix.size()));
  }
  std::string path;
  for (auto it = modules.rbegin(); it != modules.rend(); ++it)
    path += (path.empty() ? "" : " > ") + std::string(*it);
  return path;
}

TensorNames NameModelState(const Trace& trace, const KeyTable& keys) {
  TensorNames names;
  auto name = [&](uint32_t tensor, const std::string& text) {
    const KeySlot k = keys.SlotOfTensor(tensor);
    if (k.valid()) names.try_emplace(k.value(), text);
  };
  auto name_of = [&](uint32_t tensor) -> const std::string* {
    const KeySlot k = keys.SlotOfTensor(tensor);
    if (!k.valid()) return nullptr;
    const auto it = names.find(k.value());
    return it == names.end() ? nullptr : &it->second;
  };
  // Modules first, in event order: a parameter's name is its module's path
  // and its attribute name.
  for (uint32_t e = 0; e < trace.events.size(); ++e) {
    const Event& ev = trace.events[e];
    if (ev.kind != EventKind::kPy) continue;
    const uint32_t m = trace.Py(ev.payload).module();
    if (m == kNone32) continue;
    const ModuleInfo& mod = trace.modules[m];
    const std::string path = ModulePath(trace, e);
    for (uint32_t p = mod.params_begin; p < mod.params_begin + mod.params_count; ++p) {
      const ParamInfo& param = trace.params[p];
      const std::string attr =
          param.name == kNone32 ? std::string("?") : trace.strings.Get(param.name);
      std::string full = path;
      full += " .";
      full += attr;
      name(param.tensor, full);
      name(param.grad, full + " grad");
    }
  }
  // Then the optimizers: a parameter no module reported is named by its
  // place in the optimizer; state takes its parameter's name.
  for (uint32_t e = 0; e < trace.events.size(); ++e) {
    const Event& ev = trace.events[e];
    if (ev.kind != EventKind::kPy) continue;
    const uint32_t o = trace.Py(ev.payload).optimizer();
    if (o == kNone32) continue;
    const OptimizerInfo& opt = trace.optimizers[o];
    for (uint32_t p = opt.params_begin; p < opt.params_begin + opt.params_count; ++p) {
      const ParamInfo& param = trace.params[p];
      const std::string* known = name_of(param.tensor);
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

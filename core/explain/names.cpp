// Names for parameters, gradients and optimizer state (names.h).
#include "core/explain/names.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <string_view>

namespace memtl {

namespace {

// What a key is to the model: a parameter, or a parameter's gradient or
// state. `param` indexes the parameters found (Params::bases).
struct Role {
  enum Kind : uint8_t { kParam, kGrad, kState };
  uint32_t param = 0;
  Kind kind = kParam;
  uint32_t state_name = kNone32;  // string id; kNone32: "state"
};

// The parameters found, each with the name its gradient and state extend.
struct Params {
  std::vector<TensorName> bases;
  absl::flat_hash_map<uint32_t, uint32_t> of_key;  // key slot -> index into bases
};

class Namer {
 public:
  Namer(const ExplainInput& in, bool tracer_state) : in_(in), tracer_state_(tracer_state) {}

  // 1. What the python tracer reports.
  void FromTracer() {
    const Trace& t = in_.trace;
    // Modules first, in event order: a parameter's name is its module's
    // path and its attribute name.
    for (uint32_t e = 0; e < t.events.size(); ++e) {
      const Event& ev = t.events[e];
      const uint32_t m = ev.kind == EventKind::kPy ? t.Py(ev.payload).module() : kNone32;
      if (m == kNone32) continue;
      const ModuleInfo& mod = t.modules[m];
      std::string path;  // built at the first parameter it introduces
      for (uint32_t p = mod.params_begin; p < mod.params_begin + mod.params_count; ++p) {
        const ParamInfo& param = t.params[p];
        uint32_t index = FindParam(param.tensor);
        if (index == kNone32) {
          const KeySlot k = in_.keys.SlotOfTensor(param.tensor);
          if (!k.valid()) continue;
          if (path.empty()) path = ModulePath(t, e);
          if (param.qualname != kNone32) NoteModelModule(t.strings.Get(param.qualname), path);
          TensorName base;
          base.module = path;
          if (param.qualname != kNone32) {
            base.text = t.strings.Get(param.qualname);
          } else {
            base.text = path + " .";
            base.text += param.name == kNone32 ? std::string("?") : t.strings.Get(param.name);
          }
          index = AddParam(k, std::move(base));
        }
        SetRole(param.grad, {index, Role::kGrad, kNone32});
      }
    }
    // Then the optimizers: their parameters (named by their place in the
    // optimizer's list when no module reported them), gradients and state.
    for (uint32_t e = 0; e < t.events.size(); ++e) {
      const Event& ev = t.events[e];
      const uint32_t o = ev.kind == EventKind::kPy ? t.Py(ev.payload).optimizer() : kNone32;
      if (o == kNone32) continue;
      const OptimizerInfo& opt = t.optimizers[o];
      for (uint32_t p = opt.params_begin; p < opt.params_begin + opt.params_count; ++p) {
        const ParamInfo& param = t.params[p];
        uint32_t index = FindParam(param.tensor);
        if (index == kNone32) {
          const KeySlot k = in_.keys.SlotOfTensor(param.tensor);
          if (!k.valid()) continue;
          TensorName base;
          if (param.qualname != kNone32) {
            base.text = t.strings.Get(param.qualname);
            base.module = ModuleOfModelName(base.text);
          } else {
            base.text = std::string(kOptimizerParam) + std::to_string(p - opt.params_begin);
          }
          index = AddParam(k, std::move(base));
        }
        SetRole(param.grad, {index, Role::kGrad, kNone32});
        for (uint32_t s = param.state_begin; s < param.state_begin + param.state_count; ++s)
          SetRole(t.states[s].tensor, {index, Role::kState, t.states[s].name});
      }
    }
  }

  // Whether a wanted key that is a GRADIENT or OPTIMIZER_STATE has no role.
  bool MissesAny(const std::vector<KeySlot>* wanted) const {
    auto missing = [&](KeySlot k) {
      return !roles_.contains(k.value()) &&
             (Is(k, Category::kGradient) || Is(k, Category::kOptimizerState));
    };
    if (wanted != nullptr) return std::any_of(wanted->begin(), wanted->end(), missing);
    for (const KeySlot k : in_.keys.slots()) {
      if (missing(k)) return true;
    }
    return false;
  }

  // 2. The data-flow rule (names.h) for the gradients and state the tracer
  // left unnamed.
  void FromOptimizerDataFlow() {
    const Trace& t = in_.trace;
    const DataFlowGraph& g = in_.graph;
    const uint32_t num_keys = in_.keys.size();
    PerKey<int64_t> bytes(num_keys, -1);
    for (const TimelineEvent& e : in_.timeline) {
      if (e.has_key() && (e.action == Action::kCreate || e.action == Action::kPreexisting))
        bytes[e.key()] = e.bytes;
    }
    std::vector<uint32_t> group(num_keys);
    std::iota(group.begin(), group.end(), 0u);
    auto find = [&](uint32_t k) {
      while (group[k] != k) k = group[k] = group[group[k]];
      return k;
    };
    // Per node, the optimizer step around it (kNone32: none); per python
    // name (string id), whether it is a call into torch/optim/.
    std::vector<uint8_t> optim_name(t.strings.size(), 0);  // 0 unknown, 1 yes, 2 no
    auto step_of = [&](uint32_t event) {
      uint32_t step = kNone32;
      for (uint32_t p = event; p != kNone32; p = t.events[p].parent) {
        const Event& ev = t.events[p];
        if (ev.kind != EventKind::kPy) continue;
        uint8_t& known = optim_name[t.py_names[ev.payload]];
        if (known == 0) known = t.Name(ev).find("torch/optim/") != std::string::npos ? 1 : 2;
        if (known == 1) step = p;  // the outermost wins
      }
      return step;
    };
    std::vector<uint32_t> node_step(g.nodes().size());
    absl::flat_hash_map<int64_t, uint32_t> by_size;  // per node: a key of each size
    for (size_t n = 0; n < g.nodes().size(); ++n) {
      const FlowNode& node = g.nodes()[n];
      node_step[n] = step_of(node.event);
      if (node_step[n] == kNone32) continue;
      // Join the node's tensors of one size (a shared scalar, such as a
      // learning rate held in a tensor, joins nothing it is not the size of).
      by_size.clear();
      for (const FlowEdge* e = g.begin(node); e != g.end(node); ++e) {
        const int64_t size = bytes[e->key()];
        if (size <= 0) continue;
        const auto [it, added] = by_size.try_emplace(size, e->key().value());
        const uint32_t x = find(e->key().value()), y = find(it->second);
        if (!added && x != y) group[x] = y;
      }
    }
    // Each group's parameter: kNone32 none yet, kMany two or more.
    constexpr uint32_t kMany = kNone32 - 1;
    absl::flat_hash_map<uint32_t, uint32_t> group_param;
    for (const auto& [key, index] : params_.of_key) {
      uint32_t& p = group_param.try_emplace(find(key), kNone32).first->second;
      p = p == kNone32 || p == index ? index : kMany;
    }
    auto param_of = [&](uint32_t root) {
      const auto it = group_param.find(root);
      return it == group_param.end() ? kNone32 : it->second;
    };
    // A group with no parameter takes the next one its step touches, when
    // one gradient or state is all it holds to name (a per-parameter loop's
    // step count, with the scalar added to it): a foreach step's one op over
    // every step count, or over the gradients of several parameters (AMP's
    // unscale), joins more, and names nothing.
    std::vector<uint32_t> to_name(num_keys, 0);
    for (const KeySlot k : in_.keys.slots()) {
      if (Is(k, Category::kGradient) || Is(k, Category::kOptimizerState))
        ++to_name[find(k.value())];
    }
    std::vector<uint32_t> pending;
    uint32_t step = kNone32;
    for (size_t n = 0; n < g.nodes().size(); ++n) {
      if (node_step[n] == kNone32) continue;
      if (node_step[n] != step) pending.clear();
      step = node_step[n];
      const FlowNode& node = g.nodes()[n];
      uint32_t touched = kNone32;
      for (const FlowEdge* e = g.begin(node); e != g.end(node); ++e) {
        const uint32_t root = find(e->key().value());
        const uint32_t p = param_of(root);
        if (p == kNone32) {
          pending.push_back(root);
        } else {
          touched = touched == kNone32 || touched == p ? p : kMany;
        }
      }
      if (touched == kNone32) continue;
      std::sort(pending.begin(), pending.end());
      pending.erase(std::unique(pending.begin(), pending.end()), pending.end());
      if (touched != kMany && pending.size() == 1 && to_name[pending[0]] == 1)
        group_param.try_emplace(pending[0], touched);
      pending.clear();
    }
    for (const KeySlot k : in_.keys.slots()) {
      if (roles_.contains(k.value())) continue;
      const bool grad = Is(k, Category::kGradient);
      if (!grad && !Is(k, Category::kOptimizerState)) continue;
      const uint32_t p = param_of(find(k.value()));
      if (p == kNone32 || p == kMany) continue;
      roles_.emplace(k.value(), Role{p, grad ? Role::kGrad : Role::kState, kNone32});
    }
  }

  TensorNames Names(const std::vector<KeySlot>* wanted) const {
    TensorNames names;
    auto add = [&](uint32_t key) {
      const auto it = roles_.find(key);
      if (it == roles_.end()) return;
      const Role& r = it->second;
      TensorName n = params_.bases[r.param];
      if (r.kind == Role::kGrad) n.text += " grad";
      if (r.kind == Role::kState)
        n.text += r.state_name == kNone32 ? " state" : " " + in_.trace.strings.Get(r.state_name);
      names.emplace(key, std::move(n));
    };
    if (wanted != nullptr) {
      for (const KeySlot k : *wanted) add(k.value());
    } else {
      for (const auto& [key, role] : roles_) add(key);
    }
    return names;
  }

 private:
  // The model's name of the module that owns a parameter named `qualname`
  // ("blocks.0.self_attn" of "blocks.0.self_attn.in_proj_weight"), and the
  // tracer's path of the module call that reported it first.
  void NoteModelModule(std::string_view qualname, const std::string& path) {
    const size_t dot = qualname.rfind('.');
    if (dot != std::string_view::npos) model_modules_.try_emplace(qualname.substr(0, dot), path);
  }
  // A parameter no module call reports, as a module uses a submodule's
  // weights without calling it (nn.MultiheadAttention's out_proj): the
  // tracer's path of the nearest module, by the model's names, that a call
  // reported a parameter of ("blocks.0.self_attn" for
  // "blocks.0.self_attn.out_proj.weight"); empty when none did.
  std::string ModuleOfModelName(std::string_view qualname) const {
    for (size_t dot = qualname.rfind('.'); dot != std::string_view::npos;
         dot = qualname.rfind('.')) {
      qualname = qualname.substr(0, dot);
      if (const auto it = model_modules_.find(qualname); it != model_modules_.end())
        return it->second;
    }
    return {};
  }
  uint32_t FindParam(uint32_t tensor) const {
    const KeySlot k = in_.keys.SlotOfTensor(tensor);
    if (!k.valid()) return kNone32;
    const auto it = params_.of_key.find(k.value());
    return it == params_.of_key.end() ? kNone32 : it->second;
  }
  uint32_t AddParam(KeySlot k, TensorName base) {
    const auto index = static_cast<uint32_t>(params_.bases.size());
    params_.bases.push_back(std::move(base));
    params_.of_key.emplace(k.value(), index);
    roles_.try_emplace(k.value(), Role{index, Role::kParam, kNone32});
    return index;
  }
  void SetRole(uint32_t tensor, Role role) {
    if (!tracer_state_) return;
    if (const KeySlot k = in_.keys.SlotOfTensor(tensor); k.valid())
      roles_.try_emplace(k.value(), role);
  }
  // Whether any version of `k` has category `c`.
  bool Is(KeySlot k, Category c) const {
    const Version last = std::max(in_.graph.last_version(k), Version(0));
    for (Version v(0); v <= last; v = v.next()) {
      if (in_.categories.Get(k, v) == c) return true;
    }
    return false;
  }

  const ExplainInput& in_;
  const bool tracer_state_;
  Params params_;
  absl::flat_hash_map<uint32_t, Role> roles_;  // key slot -> role
  // The model's module names -> the tracer's paths (NoteModelModule).
  absl::flat_hash_map<std::string_view, std::string> model_modules_;
};

}  // namespace

TensorNames NameModelState(const ExplainInput& in, const std::vector<KeySlot>* wanted,
                           bool tracer_state) {
  Namer namer(in, tracer_state);
  namer.FromTracer();
  if (namer.MissesAny(wanted)) namer.FromOptimizerDataFlow();
  return namer.Names(wanted);
}

}  // namespace memtl

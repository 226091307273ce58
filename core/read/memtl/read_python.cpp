// Python calls, with their modules' and optimizers' parameters and state.
#include "absl/container/flat_hash_map.h"
#include "core/read/memtl/record_builder.h"

namespace memtl::read {

void Builder::Params(JsonCursor& c, bool module, uint32_t* begin, uint32_t* count) {
  if (c.Peek() != JsonCursor::Kind::kArray) Fail("expected a list for \"params\"");
  std::vector<ParamInfo> params;
  c.BeginArray();
  while (c.NextItem()) {
    if (c.Peek() != JsonCursor::Kind::kObject) Fail("expected a parameter object");
    ParamInfo info;
    // A block read on its own tells state absent (0) from state at 0.
    if (chunk_ != nullptr) info.state_begin = kNoState;
    bool has_t = false, has_name = false;
    c.BeginObject();
    std::string_view key;
    while (c.NextKey(&key)) {
      if (Is(key, "name")) {
        info.name = Name(c, "name");
        has_name = true;
      } else if (Is(key, "t")) {
        info.tensor = ParseTensor(c, true);
        has_t = true;
      } else if (Is(key, "grad")) {
        if (c.Peek() == JsonCursor::Kind::kNull) {
          c.ReadNull();
        } else {
          info.grad = ParseTensor(c, true);
        }
      } else if (Is(key, "state")) {
        States(c, &info.state_begin, &info.state_count);
      } else {
        c.SkipValue();
      }
    }
    Require(has_t, "t");
    if (module) Require(has_name, "name");
    params.push_back(info);
  }
  *begin = static_cast<uint32_t>(t_->params.size());
  *count = static_cast<uint32_t>(params.size());
  t_->params.insert(t_->params.end(), params.begin(), params.end());
}

void Builder::States(JsonCursor& c, uint32_t* begin, uint32_t* count) {
  if (c.Peek() != JsonCursor::Kind::kArray) Fail("expected a list for \"state\"");
  std::vector<StateEntry> states;
  c.BeginArray();
  while (c.NextItem()) {
    if (c.Peek() != JsonCursor::Kind::kArray) Fail("expected [name, tensor] in \"state\"");
    c.BeginArray();
    if (!c.NextItem()) Fail("expected [name, tensor] in \"state\"");
    StateEntry s;
    s.name = Name(c, "state");
    if (!c.NextItem()) Fail("expected [name, tensor] in \"state\"");
    s.tensor = ParseTensor(c, true);
    if (c.NextItem()) Fail("expected [name, tensor] in \"state\"");
    states.push_back(s);
  }
  *begin = static_cast<uint32_t>(t_->states.size());
  *count = static_cast<uint32_t>(states.size());
  t_->states.insert(t_->states.end(), states.begin(), states.end());
}

uint32_t Builder::Module(JsonCursor& c) {
  if (c.Peek() != JsonCursor::Kind::kObject) Fail("expected an object for \"module\"");
  ModuleInfo mod;
  bool has_cls = false, has_params = false;
  c.BeginObject();
  std::string_view key;
  while (c.NextKey(&key)) {
    if (Is(key, "self")) {
      mod.has_self = OptUint64(c, "self", &mod.self);
    } else if (Is(key, "cls")) {
      mod.cls = Name(c, "cls");
      has_cls = true;
    } else if (Is(key, "params")) {
      Params(c, true, &mod.params_begin, &mod.params_count);
      has_params = true;
    } else {
      c.SkipValue();
    }
  }
  Require(has_cls, "cls");
  Require(has_params, "params");
  if (t_->modules.size() >= PyInfo::kNone31) Fail("more than 2^31-2 modules");
  t_->modules.push_back(mod);
  return static_cast<uint32_t>(t_->modules.size() - 1);
}

uint32_t Builder::Optimizer(JsonCursor& c) {
  if (c.Peek() != JsonCursor::Kind::kObject) Fail("expected an object for \"optimizer\"");
  OptimizerInfo opt;
  if (chunk_ != nullptr) opt.state_begin = kNoState;
  bool has_params = false;
  c.BeginObject();
  std::string_view key;
  while (c.NextKey(&key)) {
    if (Is(key, "self")) {
      opt.has_self = OptUint64(c, "self", &opt.self);
    } else if (Is(key, "params")) {
      Params(c, false, &opt.params_begin, &opt.params_count);
      has_params = true;
    } else if (Is(key, "state")) {
      States(c, &opt.state_begin, &opt.state_count);
    } else {
      c.SkipValue();
    }
  }
  Require(has_params, "params");
  if (t_->optimizers.size() >= PyInfo::kNone31) Fail("more than 2^31-2 optimizers");
  t_->optimizers.push_back(opt);
  return static_cast<uint32_t>(t_->optimizers.size() - 1);
}

void Builder::Py(const Fields& f, Event* e) {
  Require(f.has_name, "name");
  Require(f.has_t0, "t0");
  e->kind = EventKind::kPy;
  if (f.module != kNone32 && f.optimizer != kNone32)
    Fail("a python call cannot be both a module and an optimizer");
  PyInfo py;
  py.name = f.name;
  if (f.module != kNone32) {
    py.index = f.module & PyInfo::kNone31;  // < kNone31: Module() checks
  } else if (f.optimizer != kNone32) {
    py.index = f.optimizer & PyInfo::kNone31;
    py.is_optimizer = 1;
  }
  e->payload = static_cast<uint32_t>(t_->py_names.size());
  t_->py_names.push_back(py.name);
  if (f.line != 0) {
    t_->py_lines.resize(e->payload, 0);
    t_->py_lines.push_back(f.line);
  }
  t_->py_linked.push_back(py.index != PyInfo::kNone31);
  if (py.index != PyInfo::kNone31) {
    t_->py_links.push_back({e->payload, py.index, py.is_optimizer});
  }
}

}  // namespace memtl::read

namespace memtl::read {

// A parameter's storage pointer and device find its name in the header's
// model; a torch 1.13 parameter, known by its pointer alone, by the pointer.
// A pointer the model lists under two names (parameters that share a
// storage at different offsets) names none of them: the trace cannot tell
// which one a record means.
size_t NameModelParams(Trace& trace) {
  if (trace.header.model.empty()) return 0;
  struct Named {
    uint32_t name;  // string id; kNone32: ambiguous
    std::string device;
  };
  absl::flat_hash_map<uint64_t, Named> by_ptr;
  for (const TraceHeader::ModelParam& p : trace.header.model) {
    const uint32_t name = trace.strings.Intern(p.name);
    const auto [it, added] = by_ptr.try_emplace(p.ptr, Named{name, p.device});
    if (!added && it->second.name != name) it->second.name = kNone32;
  }
  size_t named = 0;
  for (ParamInfo& param : trace.params) {
    if (param.tensor == kNone32 || param.tensor >= trace.tensors.size()) continue;
    const auto it = by_ptr.find(trace.tensor_ptrs[param.tensor]);
    if (it == by_ptr.end() || it->second.name == kNone32) continue;
    const Tensor& t = trace.tensors[param.tensor];
    if (t.partial == 0 && trace.devices[t.device].name != it->second.device) continue;
    param.qualname = it->second.name;
    ++named;
  }
  trace.header.model.clear();
  trace.header.model.shrink_to_fit();
  return named;
}

}  // namespace memtl::read

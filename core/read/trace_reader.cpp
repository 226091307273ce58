// JSON Lines trace reader: one nlohmann parse per line, straight into the
// flat Trace arrays. Every field is checked for presence and type so that a
// malformed trace yields "FILE: line N: ..." rather than a crash.
#include "core/read/trace_reader.h"

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string_view>

#include "core/read/line_source.h"

namespace memtl {

namespace {

using json = nlohmann::json;

// Thrown inside this file only; converted to a Status at the boundary.
struct RecordError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void Fail(const std::string& what) { throw RecordError(what); }

const json& Field(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) Fail(std::string("missing field \"") + key + "\"");
  return *it;
}

int64_t AsInt(const json& v, const char* key) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      Fail(std::string("\"") + key + "\" is out of range");
    }
    return v.get<int64_t>();
  }
  Fail(std::string("expected an integer for \"") + key + "\"");
}

int64_t IntField(const json& j, const char* key) { return AsInt(Field(j, key), key); }

int64_t OptIntField(const json& j, const char* key, int64_t fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return AsInt(*it, key);
}

uint64_t AsAddress(const json& v, const char* key) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) {
    if (v.get<int64_t>() < 0) Fail(std::string("\"") + key + "\" must not be negative");
    return static_cast<uint64_t>(v.get<int64_t>());
  }
  Fail(std::string("expected an unsigned integer for \"") + key + "\"");
}

const std::string& StringField(const json& j, const char* key) {
  const json& v = Field(j, key);
  if (!v.is_string()) Fail(std::string("expected a string for \"") + key + "\"");
  return v.get_ref<const std::string&>();
}

// Device strings as PyTorch parses them (c10::Device): "type" or
// "type:index", with a type PyTorch knows.
bool ValidDeviceName(std::string_view s) {
  static constexpr std::string_view kTypes[] = {
      "cpu", "cuda", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga", "maia", "ort", "xla",
      "lazy", "vulkan", "metal", "xpu", "mps", "meta", "hpu", "mtia", "privateuseone", "ipu"};
  const auto colon = s.find(':');
  const auto type = s.substr(0, colon);
  bool known = false;
  for (auto t : kTypes) known |= t == type;
  if (!known) return false;
  if (colon == std::string_view::npos) return true;
  const auto idx = s.substr(colon + 1);
  if (idx.empty() || idx.size() > 3 || (idx.size() > 1 && idx[0] == '0')) return false;
  for (char c : idx) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

class Builder {
 public:
  explicit Builder(Trace* trace) : t_(trace) {}

  void Header(const json& j) {
    if (!j.is_object()) Fail("the first line must be the header object");
    auto f = j.find("format");
    if (f == j.end() || !f->is_string() || f->get_ref<const std::string&>() != "memtl-trace") {
      Fail("not a memtl trace (the header's \"format\" must be \"memtl-trace\")");
    }
    const int64_t version = IntField(j, "version");
    if (version < 1) Fail("invalid format version " + std::to_string(version));
    if (version > kTraceFormatVersion) {
      Fail("format version " + std::to_string(version) + " is newer than this memtl reads (" +
           std::to_string(kTraceFormatVersion) + ")");
    }
    t_->header.version = static_cast<int>(version);
    if (auto it = j.find("producer"); it != j.end() && it->is_string()) {
      t_->header.producer = it->get<std::string>();
    }
    if (auto it = j.find("torch_version"); it != j.end() && it->is_string()) {
      t_->header.torch_version = it->get<std::string>();
    }
    if (auto it = j.find("profile_memory"); it != j.end()) {
      if (!it->is_boolean()) Fail("expected a boolean for \"profile_memory\"");
      t_->header.profile_memory = it->get<bool>() ? 1 : 0;
    }
    if (auto it = j.find("ids"); it != j.end()) {
      if (!it->is_boolean()) Fail("expected a boolean for \"ids\"");
      t_->header.has_ids = it->get<bool>();
    }
  }

  void Record(const json& j) {
    if (!j.is_object()) Fail("expected a JSON object");
    const std::string& kind = StringField(j, "k");
    if (kind == "schema") return Schema(j);
    Event e;
    const int64_t index = IntField(j, "i");
    if (index != static_cast<int64_t>(t_->events.size())) {
      Fail("record index " + std::to_string(index) + " out of order (expected " +
           std::to_string(t_->events.size()) + ")");
    }
    const int64_t parent = IntField(j, "p");
    if (parent >= index) Fail("parent " + std::to_string(parent) + " does not precede its child");
    if (parent < -1) Fail("invalid parent " + std::to_string(parent));
    e.parent = parent == -1 ? kNone32 : static_cast<uint32_t>(parent);
    if (kind == "op") {
      Op(j, &e);
    } else if (kind == "alloc") {
      Alloc(j, &e);
    } else if (kind == "py") {
      Py(j, &e);
    } else if (kind == "other") {
      e.kind = EventKind::kOther;
      e.name = t_->strings.Intern(StringField(j, "name"));
      e.t0 = IntField(j, "t0");
      e.t1 = OptIntField(j, "t1", e.t0);
    } else {
      Fail("unknown record kind \"" + kind + "\"");
    }
    if (e.parent != kNone32 && e.t0 < t_->events[e.parent].t0 && e.kind != EventKind::kAlloc) {
      // PyTorch's tree builder only nests events inside their parent's span;
      // a child that starts first means the parent link is wrong.
      Fail("event starts before its parent");
    }
    t_->events.push_back(e);
  }

 private:
  void Schema(const json& j) {
    const std::string& op = StringField(j, "op");
    const json& list = Field(j, "schemas");
    if (!list.is_array()) Fail("expected a list for \"schemas\"");
    std::vector<std::string> schemas;
    for (const auto& s : list) {
      if (!s.is_string()) Fail("expected schema strings in \"schemas\"");
      schemas.push_back(s.get<std::string>());
    }
    for (const auto& [name, _] : t_->schemas) {
      if (name == op) Fail("schemas of \"" + op + "\" registered twice");
    }
    t_->schemas.emplace_back(op, std::move(schemas));
  }

  void Op(const json& j, Event* e) {
    e->kind = EventKind::kOp;
    e->name = t_->strings.Intern(StringField(j, "name"));
    e->t0 = IntField(j, "t0");
    e->t1 = OptIntField(j, "t1", -1);
    if (e->t1 == -1) {
      e->t1 = e->t0;
      ++t_->ops_without_end;
    }
    if (e->t1 < e->t0) Fail("end time before start time");
    OpInfo op;
    op.tid = static_cast<uint64_t>(OptIntField(j, "tid", 0));
    op.sequence = OptIntField(j, "seq", -1);
    if (auto it = j.find("scope"); it != j.end()) {
      if (!it->is_string() || !ParseRecordScope(it->get_ref<const std::string&>(), &e->scope)) {
        Fail("unknown \"scope\"");
      }
    }
    const json& args = Field(j, "args");
    if (!args.is_array()) Fail("expected a list for \"args\"");
    op.args_begin = static_cast<uint32_t>(t_->args.size());
    op.args_count = static_cast<uint32_t>(args.size());
    for (const auto& a : args) t_->args.push_back(ParseArg(a));
    e->payload = static_cast<uint32_t>(t_->ops.size());
    t_->ops.push_back(op);
  }

  Arg ParseArg(const json& a) {
    Arg arg;
    if (a.is_null()) return arg;
    if (!a.is_object() || a.empty()) Fail("invalid argument value");
    if (a.contains("impl")) {
      arg.kind = ArgKind::kTensor;
      arg.begin = ParseTensor(a, false);
      return arg;
    }
    const auto first = a.begin();  // a tagged value: exactly one key
    if (a.size() != 1) Fail("invalid argument value (expected one key)");
    const std::string& key = first.key();
    const json& value = first.value();
    if (key == "list") {
      if (!value.is_array()) Fail("expected a list for \"list\"");
      arg.kind = ArgKind::kTensorList;
      std::vector<uint32_t> items;
      for (const auto& item : value) {
        items.push_back(item.is_null() ? kNone32 : ParseTensor(item, false));
      }
      arg.begin = static_cast<uint32_t>(t_->list_items.size());
      arg.count = static_cast<uint32_t>(items.size());
      t_->list_items.insert(t_->list_items.end(), items.begin(), items.end());
    } else if (key == "bool") {
      if (!value.is_boolean()) Fail("expected a boolean for \"bool\"");
      arg.kind = ArgKind::kBool;
    } else if (key == "int") {
      AsInt(value, "int");
      arg.kind = ArgKind::kInt;
    } else if (key == "float") {
      if (!value.is_number() && !(value.is_string() && (value == "nan" || value == "inf" || value == "-inf"))) {
        Fail("expected a number for \"float\"");
      }
      arg.kind = ArgKind::kFloat;
    } else if (key == "complex") {
      if (!value.is_array() || value.size() != 2) Fail("expected [re, im] for \"complex\"");
      arg.kind = ArgKind::kComplex;
    } else if (key == "str") {
      if (!value.is_string()) Fail("expected a string for \"str\"");
      arg.kind = ArgKind::kString;
    } else {
      Fail("unknown argument kind \"" + key + "\"");
    }
    return arg;
  }

  DeviceIndex Device(const json& j, const char* key) {
    const std::string& name = StringField(j, key);
    if (!ValidDeviceName(name)) {
      Fail("invalid device \"" + name.substr(0, 64) + "\" (PyTorch accepts \"type\" or \"type:index\" with a known type such as cpu or cuda)");
    }
    return t_->InternDevice(name);
  }

  uint32_t ParseTensor(const json& j, bool allow_partial) {
    if (!j.is_object()) Fail("expected a tensor object");
    Tensor t;
    if (!j.contains("impl")) {
      if (!allow_partial) Fail("tensor without \"impl\"");
      t.partial = true;
      t.ptr = AsAddress(Field(j, "ptr"), "ptr");
    } else {
      t.impl = AsAddress(Field(j, "impl"), "impl");
      t.ptr = AsAddress(Field(j, "ptr"), "ptr");
      const int64_t id = OptIntField(j, "id", -1);
      const int64_t aid = OptIntField(j, "aid", -1);
      if (id < -1 || aid < -1) Fail("negative tensor id");
      t.id = TensorId(id);
      t.allocation = AllocationId(aid);
      t.device = Device(j, "dev");
      const std::string& dtype = StringField(j, "dtype");
      t.element_size = static_cast<uint8_t>(ElementSize(dtype));
      if (auto it = j.find("layout"); it != j.end()) {
        if (!it->is_string() || !ParseLayout(it->get_ref<const std::string&>(), &t.layout)) {
          t.layout = Layout::kOther;
        }
      }
      t.dims_begin = static_cast<uint32_t>(t_->dims.size());
      t.num_sizes = Dims(j, "sizes");
      t.num_strides = Dims(j, "strides");
    }
    t_->tensors.push_back(t);
    return static_cast<uint32_t>(t_->tensors.size() - 1);
  }

  uint16_t Dims(const json& j, const char* key) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return 0;
    if (!it->is_array()) Fail(std::string("expected a list for \"") + key + "\"");
    if (it->size() > 4096) Fail(std::string("too many dimensions in \"") + key + "\"");
    for (const auto& d : *it) {
      const int64_t v = AsInt(d, key);
      if (v < 0 && std::string_view(key) == "sizes") Fail("negative tensor size in \"sizes\"");
      if (v > (int64_t{1} << 48) || v < -(int64_t{1} << 48)) Fail(std::string("\"") + key + "\" is out of range");
      t_->dims.push_back(v);
    }
    return static_cast<uint16_t>(it->size());
  }

  void Alloc(const json& j, Event* e) {
    e->kind = EventKind::kAlloc;
    e->name = t_->strings.Intern("[memory]");
    e->t0 = e->t1 = IntField(j, "t");
    AllocInfo a;
    a.ptr = AsAddress(Field(j, "ptr"), "ptr");
    a.bytes = IntField(j, "bytes");
    if (a.bytes > (int64_t{1} << 50) || a.bytes < -(int64_t{1} << 50)) Fail("\"bytes\" is out of range");
    a.device = Device(j, "dev");
    a.total_allocated = OptIntField(j, "total_allocated", 0);
    a.total_reserved = OptIntField(j, "total_reserved", 0);
    a.tid = static_cast<uint64_t>(OptIntField(j, "tid", 0));
    a.id = TensorId(OptIntField(j, "id", -1));
    a.allocation = AllocationId(OptIntField(j, "aid", -1));
    e->payload = static_cast<uint32_t>(t_->allocs.size());
    t_->allocs.push_back(a);
  }

  void Params(const json& list, bool module, uint32_t* begin, uint32_t* count) {
    if (!list.is_array()) Fail("expected a list for \"params\"");
    std::vector<ParamInfo> params;
    for (const auto& p : list) {
      if (!p.is_object()) Fail("expected a parameter object");
      ParamInfo info;
      if (module) info.name = t_->strings.Intern(StringField(p, "name"));
      info.tensor = ParseTensor(Field(p, "t"), true);
      if (auto g = p.find("grad"); g != p.end() && !g->is_null()) info.grad = ParseTensor(*g, true);
      if (auto s = p.find("state"); s != p.end()) States(*s, &info.state_begin, &info.state_count);
      params.push_back(info);
    }
    *begin = static_cast<uint32_t>(t_->params.size());
    *count = static_cast<uint32_t>(params.size());
    t_->params.insert(t_->params.end(), params.begin(), params.end());
  }

  void States(const json& list, uint32_t* begin, uint32_t* count) {
    if (!list.is_array()) Fail("expected a list for \"state\"");
    std::vector<StateEntry> states;
    for (const auto& s : list) {
      if (!s.is_array() || s.size() != 2 || !s[0].is_string()) Fail("expected [name, tensor] in \"state\"");
      states.push_back(StateEntry{t_->strings.Intern(s[0].get<std::string>()), ParseTensor(s[1], true)});
    }
    *begin = static_cast<uint32_t>(t_->states.size());
    *count = static_cast<uint32_t>(states.size());
    t_->states.insert(t_->states.end(), states.begin(), states.end());
  }

  void Py(const json& j, Event* e) {
    e->kind = EventKind::kPy;
    e->name = t_->strings.Intern(StringField(j, "name"));
    e->t0 = IntField(j, "t0");
    e->t1 = OptIntField(j, "t1", e->t0);
    PyInfo py;
    py.tid = static_cast<uint64_t>(OptIntField(j, "tid", 0));
    if (auto m = j.find("module"); m != j.end() && !m->is_null()) {
      if (!m->is_object()) Fail("expected an object for \"module\"");
      ModuleInfo mod;
      if (auto s = m->find("self"); s != m->end() && !s->is_null()) {
        mod.has_self = true;
        mod.self = AsAddress(*s, "self");
      }
      mod.cls = t_->strings.Intern(StringField(*m, "cls"));
      Params(Field(*m, "params"), true, &mod.params_begin, &mod.params_count);
      py.module = static_cast<uint32_t>(t_->modules.size());
      t_->modules.push_back(mod);
    }
    if (auto o = j.find("optimizer"); o != j.end() && !o->is_null()) {
      if (!o->is_object()) Fail("expected an object for \"optimizer\"");
      if (py.module != kNone32) Fail("a python call cannot be both a module and an optimizer");
      OptimizerInfo opt;
      if (auto s = o->find("self"); s != o->end() && !s->is_null()) {
        opt.has_self = true;
        opt.self = AsAddress(*s, "self");
      }
      Params(Field(*o, "params"), false, &opt.params_begin, &opt.params_count);
      if (auto s = o->find("state"); s != o->end()) States(*s, &opt.state_begin, &opt.state_count);
      py.optimizer = static_cast<uint32_t>(t_->optimizers.size());
      t_->optimizers.push_back(opt);
    }
    e->payload = static_cast<uint32_t>(t_->pys.size());
    t_->pys.push_back(py);
  }

  Trace* t_;
};

Expected<Trace> ReadFrom(LineSource& src, const ReadOptions& options, ReadInfo* info) {
  Trace trace;
  Builder builder(&trace);
  std::string_view line;
  size_t line_no = 0;
  bool saw_header = false;
  ReadInfo local;
  while (src.Next(&line)) {
    ++line_no;
    if (line.size() > (64u << 20)) {
      return Status::Error(src.name() + ": line " + std::to_string(line_no) + ": line longer than 64 MiB");
    }
    json j;
    try {
      j = json::parse(line);
    } catch (const json::parse_error& e) {
      if (src.last_line_unterminated() && saw_header) {
        if (options.partial) {
          local.stopped_early = true;
          local.stopped_at_line = line_no;
          break;
        }
        return Status::Error(src.name() + ": line " + std::to_string(line_no) +
                             ": the last record is cut off (the trace was truncated; use --partial "
                             "to analyze up to the last complete record)");
      }
      std::string what = e.what();
      if (auto p = what.find("syntax error"); p != std::string::npos) what = what.substr(p);
      return Status::Error(src.name() + ": line " + std::to_string(line_no) + ": not valid JSON (" +
                           what + ")");
    }
    try {
      if (!saw_header) {
        builder.Header(j);
        saw_header = true;
      } else {
        builder.Record(j);
      }
    } catch (const RecordError& e) {
      return Status::Error(src.name() + ": line " + std::to_string(line_no) + ": " + e.what());
    } catch (const json::exception& e) {
      return Status::Error(src.name() + ": line " + std::to_string(line_no) + ": " + e.what());
    }
  }
  if (!src.status().ok()) {
    if (options.partial && saw_header && src.status().message().find("truncated") != std::string::npos) {
      local.stopped_early = true;
      local.stopped_at_line = line_no;
    } else {
      return src.status();
    }
  }
  if (!saw_header) return Status::Error(src.name() + ": empty file (no memtl trace header)");
  trace.FinishTree();
  local.lines = line_no;
  if (info != nullptr) *info = local;
  return trace;
}

}  // namespace

Expected<Trace> ReadTraceFile(const std::string& path, const ReadOptions& options, ReadInfo* info) {
  auto src = LineSource::Open(path);
  if (!src.ok()) return src.status();
  return ReadFrom(*src.value(), options, info);
}

Expected<Trace> ReadTraceString(std::string data, const std::string& name, const ReadOptions& options,
                                ReadInfo* info) {
  auto src = LineSource::FromMemory(std::move(data), name);
  return ReadFrom(*src, options, info);
}

}  // namespace memtl

// JSON Lines trace reader: one JsonCursor pass per line, straight into the
// flat Trace arrays, with no per-line DOM. Keys may come in any order; every
// field is checked for presence and type so that a malformed trace yields
// "FILE: line N: ..." rather than a crash.
//
// Inflating and parsing overlap: a reader thread decompresses and cuts the
// input into blocks of whole lines while the calling thread parses them, in
// order, so the result does not depend on the thread count.
#include "core/read/trace_reader.h"

#include "core/model/flat_map.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <thread>

#include "core/read/json_cursor.h"
#include "core/read/line_source.h"

namespace memtl {

namespace {

// Semantic errors inside a record; converted to a Status at the boundary.
struct RecordError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void Fail(const std::string& what) { throw RecordError(what); }

// Device strings as PyTorch parses them (c10::Device): "type" or
// "type:index", with a type PyTorch knows.
bool ValidDeviceName(std::string_view s) {
  static constexpr std::string_view kTypes[] = {
      "cpu",  "cuda", "mkldnn", "opengl", "opencl",        "ideep",  "hip",   "ve",
      "fpga", "maia", "ort",    "xla",    "lazy",          "vulkan", "metal", "xpu",
      "mps",  "meta", "hpu",    "mtia",   "privateuseone", "ipu"};
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

// Whether `s` is the literal `lit`: the length first, then a comparison of
// a constant number of bytes, which the compiler turns into a few loads
// (string_view's operator== calls compare(), which the profile showed at
// 6% of reading).
template <size_t N>
bool Is(std::string_view s, const char (&lit)[N]) {
  return s.size() == N - 1 && std::memcmp(s.data(), lit, N - 1) == 0;
}

// The kind of the next value; text that is not JSON at all is a syntax
// error (JsonError), not a type error.
JsonCursor::Kind NextKind(JsonCursor& c) {
  const auto k = c.Peek();
  if (k == JsonCursor::Kind::kInvalid || k == JsonCursor::Kind::kEnd)
    c.SkipValue();  // throws JsonError
  return k;
}

// Tensor indices and impl numbers are 32-bit (kNone32 means none).
constexpr size_t kMaxTensors = size_t{1} << 31;

class Builder {
 public:
  explicit Builder(Trace* trace) : t_(trace) {}

  // Keeps each event array reserved for `factor` times what it holds now
  // (the whole file, at the rate read so far), so that a large trace's
  // arrays are not regrown near the end: a regrowth copies the array into
  // fresh memory twice its size, and at the end of a read that copy is the
  // read's memory peak. An array whose projection comes within 2% of its
  // capacity is reserved again with a 10% margin: early in the file, when
  // copies are small and the rates still move; later only if the file's
  // mix of records changes. Untouched reserved memory costs address
  // space, not resident memory.
  //
  // The size is a guess (a gzip trailer's ISIZE can be anything), so a
  // reservation that fails is skipped: the arrays then grow as they fill,
  // and only memory the trace really needs can run out.
  void ReserveFor(double factor) {
    auto grow = [factor](auto& v) {
      const double need = static_cast<double>(v.size()) * factor;
      if (need * 1.02 <= static_cast<double>(v.capacity())) return;
      try {
        v.reserve(static_cast<size_t>(std::min(need * 1.10 + 256, 1e15)));
      } catch (const std::bad_alloc&) {
      } catch (const std::length_error&) {
      }
    };
    grow(t_->events);
    grow(t_->event_t0);
    grow(t_->ops);
    grow(t_->allocs);
    grow(t_->alloc_ptrs);
    grow(t_->py_names);
    grow(t_->other_names);
    grow(t_->arg_kinds);
    grow(t_->arg_refs);
    grow(t_->list_items);
    grow(t_->tensors);
    grow(t_->tensor_ptrs);
    if (t_->header.has_ids) {
      grow(t_->tensor_ids);
      grow(t_->alloc_ids);
    }
  }

  void Header(JsonCursor& c) {
    if (NextKind(c) != JsonCursor::Kind::kObject) {
      c.SkipValue();  // a syntax error is reported as such
      c.ExpectEnd();
      Fail("the first line must be the header object");
    }
    c.BeginObject();
    std::string_view key;
    bool format_ok = false;
    int64_t version = -1;
    while (c.NextKey(&key)) {
      if (Is(key, "format")) {
        format_ok =
            c.Peek() == JsonCursor::Kind::kString && c.ReadString(&scratch_) == "memtl-trace";
        if (!format_ok) Fail("not a memtl trace (the header's \"format\" must be \"memtl-trace\")");
      } else if (Is(key, "version")) {
        version = Int(c, "version");
      } else if (Is(key, "producer") && c.Peek() == JsonCursor::Kind::kString) {
        t_->header.producer = std::string(c.ReadString(&scratch_));
      } else if (Is(key, "torch_version") && c.Peek() == JsonCursor::Kind::kString) {
        t_->header.torch_version = std::string(c.ReadString(&scratch_));
      } else if (Is(key, "ids")) {
        t_->header.has_ids = Bool(c, "ids");
      } else if (Is(key, "profile_memory")) {
        t_->header.profile_memory = Bool(c, "profile_memory") ? 1 : 0;
      } else {
        c.SkipValue();
      }
    }
    if (!format_ok) Fail("not a memtl trace (the header's \"format\" must be \"memtl-trace\")");
    if (version == -1) Fail("missing field \"version\"");
    if (version < 1) Fail("invalid format version " + std::to_string(version));
    if (version > kTraceFormatVersion) {
      Fail("format version " + std::to_string(version) + " is newer than this memtl reads (" +
           std::to_string(kTraceFormatVersion) + ")");
    }
    t_->header.version = static_cast<int>(version);
  }

  // Numbers the impls of the tensors read so far (Tensor::impl, and
  // Trace::num_impls); called once the records end.
  void FinishImpls() {
    NumberPendingImpl();
    t_->num_impls = static_cast<uint32_t>(impls_.size());
  }

  void Record(JsonCursor& c) {
    if (NextKind(c) != JsonCursor::Kind::kObject) {
      c.SkipValue();
      c.ExpectEnd();
      Fail("expected a JSON object");
    }
    Fields f;
    c.BeginObject();
    std::string_view key;
    while (c.NextKey(&key)) Field(c, key, f);
    if (!f.has_k) Fail("missing field \"k\"");
    // Only an op keeps arguments; another record's are dropped, so that each
    // op's arguments end where the next op's begin (OpInfo).
    if (f.has_args && f.kind != Kind::kOp) DropArgs(f);
    if (f.kind == Kind::kSchema) return Schema(f);
    if (!f.has_i) Fail("missing field \"i\"");
    if (!f.has_p) Fail("missing field \"p\"");
    if (f.i != static_cast<int64_t>(t_->events.size())) {
      Fail("record index " + std::to_string(f.i) + " out of order (expected " +
           std::to_string(t_->events.size()) + ")");
    }
    if (f.i >= kMaxEvents) Fail("more than 2^30 events");
    if (f.p >= f.i) Fail("parent " + std::to_string(f.p) + " does not precede its child");
    if (f.p < -1) Fail("invalid parent " + std::to_string(f.p));
    Event e;
    e.parent = f.p == -1 ? kNone32 : static_cast<uint32_t>(f.p);
    int64_t t0 = f.t0;
    switch (f.kind) {
      case Kind::kOp:
        Op(f, &e);
        break;
      case Kind::kAlloc:
        Alloc(f, &e);
        t0 = f.t;
        break;
      case Kind::kPy:
        Py(f, &e);
        break;
      case Kind::kOther:
        Require(f.has_name, "name");
        Require(f.has_t0, "t0");
        e.kind = EventKind::kOther;
        e.payload = static_cast<uint32_t>(t_->other_names.size());
        t_->other_names.push_back(f.name);
        break;
      case Kind::kSchema:
        break;
    }
    if (e.parent != kNone32 && e.kind != EventKind::kAlloc && t0 < t_->event_t0[e.parent]) {
      // PyTorch's tree builder nests events inside their parent's span; a
      // child that starts first is suspect, but the tree is still usable.
      ++t_->events_before_parent;
    }
    t_->events.push_back(e);
    t_->event_t0.push_back(t0);
  }

 private:
  enum class Kind : uint8_t { kOp, kAlloc, kPy, kOther, kSchema };

  // Every field a record may have; which ones are required depends on "k".
  struct Fields {
    Kind kind = Kind::kOther;
    bool has_k = false, has_i = false, has_p = false, has_name = false, has_t0 = false,
         has_t1 = false;
    bool has_t = false, has_ptr = false, has_bytes = false, has_dev = false, has_args = false;
    bool has_op = false, has_schemas = false;
    int64_t i = 0, p = 0, t0 = 0, t1 = 0, t = 0, tid = 0, seq = -1, bytes = 0;
    int64_t total_allocated = 0, total_reserved = 0, id = -1, aid = -1;
    uint64_t ptr = 0;
    uint32_t name = 0;
    DeviceIndex dev = 0;
    RecordScope scope = RecordScope::kFunction;
    uint32_t args_begin = 0, refs_begin = 0;
    uint32_t module = kNone32, optimizer = kNone32;
    std::string op;
    std::vector<std::string> schemas;
  };

  static void Require(bool present, const char* key) {
    if (!present) Fail(std::string("missing field \"") + key + "\"");
  }

  int64_t Int(JsonCursor& c, const char* key) {
    if (NextKind(c) != JsonCursor::Kind::kNumber)
      Fail(std::string("expected an integer for \"") + key + "\"");
    bool is_int = false, overflow = false;
    const int64_t v = c.ReadInt64(&is_int, &overflow);
    if (!is_int) Fail(std::string("expected an integer for \"") + key + "\"");
    if (overflow) Fail(std::string("\"") + key + "\" is out of range");
    return v;
  }

  int64_t OptInt(JsonCursor& c, const char* key, int64_t null_value) {
    if (c.Peek() == JsonCursor::Kind::kNull) {
      c.ReadNull();
      return null_value;
    }
    return Int(c, key);
  }

  uint64_t Address(JsonCursor& c, const char* key) {
    if (NextKind(c) != JsonCursor::Kind::kNumber)
      Fail(std::string("expected an unsigned integer for \"") + key + "\"");
    bool is_int = false, overflow = false;
    bool negative = false;
    const uint64_t v = c.ReadUint64(&is_int, &overflow, &negative);
    if (!is_int) Fail(std::string("expected an unsigned integer for \"") + key + "\"");
    if (negative) Fail(std::string("\"") + key + "\" must not be negative");
    if (overflow) Fail(std::string("\"") + key + "\" is out of range (more than 2^64-1)");
    return v;
  }

  // A nullable address: false for null, else true with *out set.
  bool OptAddress(JsonCursor& c, const char* key, uint64_t* out) {
    if (c.Peek() == JsonCursor::Kind::kNull) {
      c.ReadNull();
      return false;
    }
    *out = Address(c, key);
    return true;
  }

  bool Bool(JsonCursor& c, const char* key) {
    if (NextKind(c) != JsonCursor::Kind::kBool)
      Fail(std::string("expected a boolean for \"") + key + "\"");
    return c.ReadBool();
  }

  std::string_view String(JsonCursor& c, const char* key) {
    if (NextKind(c) != JsonCursor::Kind::kString)
      Fail(std::string("expected a string for \"") + key + "\"");
    return c.ReadString(&scratch_);
  }

  DeviceIndex Device(JsonCursor& c, const char* key) {
    const std::string_view name = String(c, key);
    // Nearly every tensor and allocation names the device of the one before.
    if (last_device_ != kNoDevice && name == last_device_name_) return last_device_;
    if (!ValidDeviceName(name)) {
      Fail("invalid device \"" + std::string(name.substr(0, 64)) +
           "\" (PyTorch accepts \"type\" or \"type:index\" with a known type such as cpu or cuda)");
    }
    last_device_name_.assign(name);
    last_device_ = t_->InternDevice(name);
    return last_device_;
  }

  void Field(JsonCursor& c, std::string_view key, Fields& f) {
    switch (key.size()) {
      case 1:
        if (Is(key, "k")) {
          const std::string_view k = String(c, "k");
          f.has_k = true;
          if (Is(k, "op")) {
            f.kind = Kind::kOp;
          } else if (Is(k, "alloc")) {
            f.kind = Kind::kAlloc;
          } else if (Is(k, "py")) {
            f.kind = Kind::kPy;
          } else if (Is(k, "other")) {
            f.kind = Kind::kOther;
          } else if (Is(k, "schema")) {
            f.kind = Kind::kSchema;
          } else {
            Fail("unknown record kind \"" + std::string(k.substr(0, 64)) + "\"");
          }
          return;
        }
        if (Is(key, "i")) {
          f.i = Int(c, "i");
          f.has_i = true;
          return;
        }
        if (Is(key, "p")) {
          f.p = Int(c, "p");
          f.has_p = true;
          return;
        }
        if (Is(key, "t")) {
          f.t = Int(c, "t");
          f.has_t = true;
          return;
        }
        break;
      case 2:
        if (Is(key, "t0")) {
          f.t0 = Int(c, "t0");
          f.has_t0 = true;
          return;
        }
        if (Is(key, "t1")) {
          f.t1 = OptInt(c, "t1", -1);
          f.has_t1 = f.t1 != -1;
          return;
        }
        if (Is(key, "op")) {
          f.op = std::string(String(c, "op"));
          f.has_op = true;
          return;
        }
        if (Is(key, "id")) {
          f.id = OptInt(c, "id", -1);
          if (f.id < -1) Fail("negative tensor id");
          return;
        }
        break;
      default:
        break;
    }
    if (Is(key, "name")) {
      f.name = t_->strings.Intern(String(c, "name"));
      f.has_name = true;
    } else if (Is(key, "tid")) {
      f.tid = OptInt(c, "tid", 0);
    } else if (Is(key, "seq")) {
      f.seq = OptInt(c, "seq", -1);
    } else if (Is(key, "scope")) {
      if (c.Peek() != JsonCursor::Kind::kString ||
          !ParseRecordScope(c.ReadString(&scratch_), &f.scope)) {
        Fail("unknown \"scope\"");
      }
    } else if (Is(key, "args")) {
      Args(c, f);
    } else if (Is(key, "ptr")) {
      f.ptr = Address(c, "ptr");
      f.has_ptr = true;
    } else if (Is(key, "bytes")) {
      f.bytes = Int(c, "bytes");
      if (f.bytes > kMaxAllocBytes || f.bytes < -kMaxAllocBytes) Fail("\"bytes\" is out of range");
      f.has_bytes = true;
    } else if (Is(key, "dev")) {
      f.dev = Device(c, "dev");
      f.has_dev = true;
    } else if (Is(key, "total_allocated")) {
      f.total_allocated = OptInt(c, "total_allocated", 0);
    } else if (Is(key, "total_reserved")) {
      f.total_reserved = OptInt(c, "total_reserved", 0);
    } else if (Is(key, "aid")) {
      f.aid = OptInt(c, "aid", -1);
      if (f.aid < -1) Fail("negative allocation id");
    } else if (Is(key, "module")) {
      if (c.Peek() == JsonCursor::Kind::kNull) {
        c.ReadNull();
      } else {
        f.module = Module(c);
      }
    } else if (Is(key, "optimizer")) {
      if (c.Peek() == JsonCursor::Kind::kNull) {
        c.ReadNull();
      } else {
        f.optimizer = Optimizer(c);
      }
    } else if (Is(key, "schemas")) {
      if (c.Peek() != JsonCursor::Kind::kArray) Fail("expected a list for \"schemas\"");
      c.BeginArray();
      while (c.NextItem()) {
        if (c.Peek() != JsonCursor::Kind::kString) Fail("expected schema strings in \"schemas\"");
        f.schemas.emplace_back(c.ReadString(&scratch_));
      }
      f.has_schemas = true;
    } else {
      c.SkipValue();  // unknown fields are ignored (forward compatibility)
    }
  }

  void Schema(Fields& f) {
    Require(f.has_op, "op");
    Require(f.has_schemas, "schemas");
    for (const auto& [name, _] : t_->schemas) {
      if (name == f.op) Fail("schemas of \"" + f.op.substr(0, 200) + "\" registered twice");
    }
    t_->schemas.emplace_back(std::move(f.op), std::move(f.schemas));
  }

  void Op(const Fields& f, Event* e) {
    Require(f.has_name, "name");
    Require(f.has_t0, "t0");
    Require(f.has_args, "args");
    e->kind = EventKind::kOp;
    // End times are checked here but not kept: no stage reads them.
    if (!f.has_t1) ++t_->ops_without_end;
    // An op still running when profiling stopped can carry a bogus end.
    if (f.has_t1 && f.t1 < f.t0) ++t_->ops_ending_before_start;
    if (f.name >= kMaxNames) Fail("more than 2^24 distinct names");
    OpInfo op;
    op.args_begin = f.args_begin;
    op.refs_begin = f.refs_begin;
    op.name = f.name & (kMaxNames - 1);
    op.scope = f.scope;
    e->payload = static_cast<uint32_t>(t_->ops.size());
    t_->ops.push_back(op);
  }

  // Takes back the arguments Args() appended for this record.
  void DropArgs(Fields& f) {
    t_->arg_kinds.resize(f.args_begin);
    t_->arg_refs.resize(f.refs_begin);
    f.has_args = false;
  }

  void Args(JsonCursor& c, Fields& f) {
    if (c.Peek() != JsonCursor::Kind::kArray) Fail("expected a list for \"args\"");
    if (f.has_args) DropArgs(f);  // a repeated key: the last one counts
    // Arguments are appended after any nested records' pools; collect them
    // locally first so an op's arguments stay contiguous.
    std::vector<Arg>& args = arg_stack_;
    const size_t base = args.size();
    c.BeginArray();
    while (c.NextItem()) args.push_back(ParseArg(c));
    f.args_begin = static_cast<uint32_t>(t_->arg_kinds.size());
    if (args.size() - base > kMaxOpArgs) Fail("more than 2^24-1 arguments");
    f.refs_begin = static_cast<uint32_t>(t_->arg_refs.size());
    for (size_t a = base; a < args.size(); ++a) {
      t_->arg_kinds.push_back(args[a].kind);
      // A tensor's index; a list's position in list_items (ParseArg).
      if (HasArgRef(args[a].kind)) t_->arg_refs.push_back(args[a].begin);
    }
    args.resize(base);
    f.has_args = true;
  }

  Arg ParseArg(JsonCursor& c) {
    Arg arg;
    const auto kind = c.Peek();
    if (kind == JsonCursor::Kind::kNull) {
      c.ReadNull();
      return arg;
    }
    if (kind != JsonCursor::Kind::kObject) Fail("invalid argument value");
    c.BeginObject();
    std::string_view key;
    if (!c.NextKey(&key)) Fail("invalid argument value (an empty object)");
    if (Is(key, "list")) {
      if (c.Peek() != JsonCursor::Kind::kArray) Fail("expected a list for \"list\"");
      arg.kind = ArgKind::kTensorList;
      std::vector<uint32_t>& items = list_scratch_;
      items.clear();
      c.BeginArray();
      while (c.NextItem()) {
        if (c.Peek() == JsonCursor::Kind::kNull) {
          c.ReadNull();
          items.push_back(kNone32);
        } else {
          items.push_back(ParseTensor(c, false));
        }
      }
      // Stored as its length, then its elements; `begin` is where the
      // length is (Args turns it into the stored form).
      arg.begin = static_cast<uint32_t>(t_->list_items.size());
      arg.count = static_cast<uint32_t>(items.size());
      t_->list_items.push_back(arg.count);
      t_->list_items.insert(t_->list_items.end(), items.begin(), items.end());
    } else if (Is(key, "bool")) {
      Bool(c, "bool");
      arg.kind = ArgKind::kBool;
    } else if (Is(key, "int")) {
      Int(c, "int");
      arg.kind = ArgKind::kInt;
    } else if (Is(key, "float")) {
      if (c.Peek() == JsonCursor::Kind::kNumber) {
        c.SkipValue();
      } else {
        const auto kind2 = c.Peek();
        const std::string_view v =
            kind2 == JsonCursor::Kind::kString ? c.ReadString(&scratch_) : "";
        if (v != "nan" && v != "inf" && v != "-inf") Fail("expected a number for \"float\"");
      }
      arg.kind = ArgKind::kFloat;
    } else if (Is(key, "complex")) {
      if (c.Peek() != JsonCursor::Kind::kArray) Fail("expected [re, im] for \"complex\"");
      c.BeginArray();
      int n = 0;
      while (c.NextItem()) {
        c.SkipValue();
        ++n;
      }
      if (n != 2) Fail("expected [re, im] for \"complex\"");
      arg.kind = ArgKind::kComplex;
    } else if (Is(key, "str")) {
      String(c, "str");
      arg.kind = ArgKind::kString;
    } else {
      // A tensor object: its first key is already read.
      arg.kind = ArgKind::kTensor;
      arg.begin = TensorBody(c, key, false);
      return arg;
    }
    if (c.NextKey(&key)) Fail("invalid argument value (expected one key)");
    return arg;
  }

  uint32_t ParseTensor(JsonCursor& c, bool allow_partial) {
    if (c.Peek() != JsonCursor::Kind::kObject) Fail("expected a tensor object");
    c.BeginObject();
    std::string_view key;
    if (!c.NextKey(&key)) Fail(allow_partial ? "missing field \"ptr\"" : "tensor without \"impl\"");
    return TensorBody(c, key, allow_partial);
  }

  // The rest of a tensor object whose first key is `key` (its value next).
  uint32_t TensorBody(JsonCursor& c, std::string_view key, bool allow_partial) {
    Tensor t;
    uint32_t element_size = 0;
    Layout layout = Layout::kStrided;
    ProducerIds ids;
    bool has_impl = false, has_ptr = false, has_dev = false, has_dtype = false;
    uint64_t impl = 0, ptr = 0;
    sizes_.clear();
    strides_.clear();
    do {
      if (Is(key, "impl")) {
        if (impl != 0) {
          // A repeated "impl": the earlier address is numbered now, in its
          // turn, as each parsed address always has been.
          NumberPendingImpl();
          impls_.Number(impl);
        }
        impl = Address(c, "impl");
        if (impl != 0) impls_.PrefetchSlot(impl);
        has_impl = true;
      } else if (Is(key, "ptr")) {
        ptr = Address(c, "ptr");
        has_ptr = true;
      } else if (Is(key, "id")) {
        const int64_t id = OptInt(c, "id", -1);
        if (id < -1) Fail("negative tensor id");
        ids.id = TensorId(id);
      } else if (Is(key, "aid")) {
        const int64_t aid = OptInt(c, "aid", -1);
        if (aid < -1) Fail("negative allocation id");
        ids.allocation = AllocationId(aid);
      } else if (Is(key, "dev")) {
        t.device = Device(c, "dev");
        has_dev = true;
      } else if (Is(key, "dtype")) {
        // Most tensors have the dtype of the one before.
        const std::string_view dtype = String(c, "dtype");
        if (dtype != last_dtype_) {
          last_dtype_.assign(dtype);
          last_element_size_ = static_cast<uint8_t>(ElementSize(dtype));
        }
        element_size = last_element_size_;
        has_dtype = true;
      } else if (Is(key, "layout")) {
        if (c.Peek() != JsonCursor::Kind::kString ||
            !ParseLayout(c.ReadString(&scratch_), &layout)) {
          layout = Layout::kOther;
        }
      } else if (Is(key, "sizes")) {
        Dims(c, "sizes", &sizes_);
      } else if (Is(key, "strides")) {
        Dims(c, "strides", &strides_);
      } else {
        c.SkipValue();
      }
    } while (c.NextKey(&key));
    if (!has_impl) {
      if (!allow_partial) Fail("tensor without \"impl\"");
      Require(has_ptr, "ptr");
      t.partial = true;
    } else {
      Require(has_ptr, "ptr");
      Require(has_dev, "dev");
      Require(has_dtype, "dtype");
      if (layout == Layout::kStrided && TensorTooLarge(element_size)) {
        Fail(
            "tensor of more than 2^46-1 bytes (its \"sizes\", \"strides\" and dtype; the "
            "size map's limit)");
      }
      t.set_bytes(layout != Layout::kStrided
                      ? kUnsized
                      : SizeOfObservation(sizes_.data(), sizes_.size(), strides_.data(),
                                          strides_.size(), element_size));
    }
    if (t_->tensors.size() >= kMaxTensors) Fail("more than 2^31 tensor observations");
    NumberPendingImpl();
    t_->tensors.push_back(t);
    t_->tensor_ptrs.push_back(ptr);
    if (t_->header.has_ids) t_->tensor_ids.push_back(ids);
    const auto index = static_cast<uint32_t>(t_->tensors.size() - 1);
    if (impl != 0) {
      impls_.PrefetchKey(impl);
      pending_tensor_ = index;
      pending_impl_ = impl;
    }
    return index;
  }

  // Whether the tensor just read (sizes_, strides_) is larger than
  // kMaxTensorBytes, which SizeOfObservation would clamp it to: a silently
  // wrong size. The same product in 128 bits, where it cannot overflow
  // (dimensions are below 2^48, Dims checks).
  bool TensorTooLarge(uint32_t element_size) const {
    const size_t n =
        std::min<size_t>(std::max<size_t>(sizes_.size(), 1), std::max<size_t>(strides_.size(), 1));
    __int128 extent = 0;
    for (size_t i = 0; i < n; ++i) {
      const __int128 v = static_cast<__int128>(sizes_.empty() ? 1 : sizes_[i]) *
                         (strides_.empty() ? 1 : strides_[i]);
      if (i == 0 || v > extent) extent = v;
    }
    return extent * element_size > kMaxTensorBytes;
  }

  void Dims(JsonCursor& c, const char* key, std::vector<int64_t>* out) {
    if (c.Peek() == JsonCursor::Kind::kNull) {
      c.ReadNull();
      return;
    }
    if (c.Peek() != JsonCursor::Kind::kArray)
      Fail(std::string("expected a list for \"") + key + "\"");
    c.BeginArray();
    while (c.NextItem()) {
      const int64_t v = Int(c, key);
      if (v < 0 && std::string_view(key) == "sizes") Fail("negative tensor size in \"sizes\"");
      if (v > (int64_t{1} << 48) || v < -(int64_t{1} << 48))
        Fail(std::string("\"") + key + "\" is out of range");
      if (out->size() >= 4096) Fail(std::string("too many dimensions in \"") + key + "\"");
      out->push_back(v);
    }
  }

  void Alloc(const Fields& f, Event* e) {
    Require(f.has_t, "t");
    Require(f.has_ptr, "ptr");
    Require(f.has_bytes, "bytes");
    Require(f.has_dev, "dev");
    e->kind = EventKind::kAlloc;
    AllocInfo a;
    a.bytes = f.bytes;
    a.device = f.dev;
    DeviceInfo& d = t_->devices[f.dev];
    d.max_total_allocated = std::max(d.max_total_allocated, f.total_allocated);
    d.max_total_reserved = std::max(d.max_total_reserved, f.total_reserved);
    e->payload = static_cast<uint32_t>(t_->allocs.size());
    t_->allocs.push_back(a);
    t_->alloc_ptrs.push_back(f.ptr);
    if (t_->header.has_ids) t_->alloc_ids.push_back({TensorId(f.id), AllocationId(f.aid)});
  }

  void Params(JsonCursor& c, bool module, uint32_t* begin, uint32_t* count) {
    if (c.Peek() != JsonCursor::Kind::kArray) Fail("expected a list for \"params\"");
    std::vector<ParamInfo> params;
    c.BeginArray();
    while (c.NextItem()) {
      if (c.Peek() != JsonCursor::Kind::kObject) Fail("expected a parameter object");
      ParamInfo info;
      bool has_t = false, has_name = false;
      c.BeginObject();
      std::string_view key;
      while (c.NextKey(&key)) {
        if (Is(key, "name")) {
          info.name = t_->strings.Intern(String(c, "name"));
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

  void States(JsonCursor& c, uint32_t* begin, uint32_t* count) {
    if (c.Peek() != JsonCursor::Kind::kArray) Fail("expected a list for \"state\"");
    std::vector<StateEntry> states;
    c.BeginArray();
    while (c.NextItem()) {
      if (c.Peek() != JsonCursor::Kind::kArray) Fail("expected [name, tensor] in \"state\"");
      c.BeginArray();
      if (!c.NextItem()) Fail("expected [name, tensor] in \"state\"");
      StateEntry s;
      s.name = t_->strings.Intern(String(c, "state"));
      if (!c.NextItem()) Fail("expected [name, tensor] in \"state\"");
      s.tensor = ParseTensor(c, true);
      if (c.NextItem()) Fail("expected [name, tensor] in \"state\"");
      states.push_back(s);
    }
    *begin = static_cast<uint32_t>(t_->states.size());
    *count = static_cast<uint32_t>(states.size());
    t_->states.insert(t_->states.end(), states.begin(), states.end());
  }

  uint32_t Module(JsonCursor& c) {
    if (c.Peek() != JsonCursor::Kind::kObject) Fail("expected an object for \"module\"");
    ModuleInfo mod;
    bool has_cls = false, has_params = false;
    c.BeginObject();
    std::string_view key;
    while (c.NextKey(&key)) {
      if (Is(key, "self")) {
        mod.has_self = OptAddress(c, "self", &mod.self);
      } else if (Is(key, "cls")) {
        mod.cls = t_->strings.Intern(String(c, "cls"));
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

  uint32_t Optimizer(JsonCursor& c) {
    if (c.Peek() != JsonCursor::Kind::kObject) Fail("expected an object for \"optimizer\"");
    OptimizerInfo opt;
    bool has_params = false;
    c.BeginObject();
    std::string_view key;
    while (c.NextKey(&key)) {
      if (Is(key, "self")) {
        opt.has_self = OptAddress(c, "self", &opt.self);
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

  void Py(const Fields& f, Event* e) {
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
    t_->py_linked.push_back(py.index != PyInfo::kNone31);
    if (py.index != PyInfo::kNone31) {
      t_->py_links.push_back({e->payload, py.index, py.is_optimizer});
    }
  }

  Trace* t_;
  // TensorImpl address -> dense number (Tensor::impl); gone with the reader.
  DenseNumbering impls_;
  // A tensor's impl is numbered when the next tensor has been read, or
  // when the records end, in the order the tensors were read: the two cache
  // misses of a lookup in a large numbering (DenseNumbering::PrefetchSlot)
  // then overlap the parsing in between instead of stalling it.
  uint32_t pending_tensor_ = kNone32;
  uint64_t pending_impl_ = 0;
  void NumberPendingImpl() {
    if (pending_tensor_ == kNone32) return;
    t_->tensors[pending_tensor_].impl = impls_.Number(pending_impl_);
    pending_tensor_ = kNone32;
  }
  std::string scratch_;
  // The last device and dtype names read, and what they gave.
  static constexpr DeviceIndex kNoDevice = 0xffff;
  std::string last_device_name_;
  DeviceIndex last_device_ = kNoDevice;
  std::string last_dtype_;
  uint8_t last_element_size_ = 0;
  std::vector<Arg> arg_stack_;
  std::vector<uint32_t> list_scratch_;
  std::vector<int64_t> sizes_, strides_;
};

// Bytes of whole lines per block. Three blocks are alive at a time (one
// parsed, one queued, one being filled), so this sets the read's buffer
// memory; blocks of 512 KiB, four queued, were 3.4 MB of a 10^5-event
// read's 12 MB peak, and 128 KiB blocks read as fast (docs/performance.md).
constexpr size_t kBlock = 128 << 10;
// A block's buffer is reserved once for a block plus a long last line
// (LineSource decodes a few KiB past kBlock), so that it is not regrown by
// doubling, and is at least malloc's mmap threshold (cli/memtl.cpp) so that
// it is unmapped when freed instead of staying in the reader thread's
// arena. Only what is written is resident.
constexpr size_t kBlockCapacity = kBlock + (128 << 10);

// Blocks of whole lines, produced by a reader thread (inflate + cut) and
// consumed in order by the parsing thread.
struct Block {
  std::string text;  // whole lines, each ending in '\n' except maybe the last
  bool last_unterminated = false;
};

class BlockQueue {
 public:
  explicit BlockQueue(bool bounded) : bounded_(bounded) {}
  void Push(Block b) {
    std::unique_lock<std::mutex> lock(mu_);
    not_full_.wait(lock, [&] { return !bounded_ || q_.size() < kMax || cancelled_; });
    if (cancelled_) return;
    q_.push_back(std::move(b));
    not_empty_.notify_one();
  }
  void Close(Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    status_ = std::move(status);
    not_empty_.notify_all();
  }
  // Ends the input with an exception the producer caught, rethrown by
  // the parsing thread (an exception must not leave a thread: it would end
  // the process). Allocates nothing, since it may follow a bad_alloc.
  void Fail(std::exception_ptr error) {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    error_ = std::move(error);
    not_empty_.notify_all();
  }
  const std::exception_ptr& error() const { return error_; }
  void Cancel() {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    not_full_.notify_all();
  }
  bool Cancelled() {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_;
  }
  // False at the end; then status() tells whether the input was good.
  bool Pop(Block* b) {
    std::unique_lock<std::mutex> lock(mu_);
    not_empty_.wait(lock, [&] { return !q_.empty() || closed_; });
    if (q_.empty()) return false;
    *b = std::move(q_.front());
    q_.pop_front();
    not_full_.notify_one();
    return true;
  }
  const Status& status() const { return status_; }
  // Buffers of consumed blocks go back to the producer, so that the blocks
  // of a run reuse a few buffers instead of touching fresh memory.
  void Recycle(std::string text) {
    // A buffer that held a long line is freed: kept, it would stay resident
    // for the rest of the read.
    if (text.capacity() > 2 * kBlockCapacity) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (spare_.size() < kMax + 2) spare_.push_back(std::move(text));
  }
  std::string Spare() {
    std::lock_guard<std::mutex> lock(mu_);
    if (spare_.empty()) return std::string();
    std::string s = std::move(spare_.back());
    spare_.pop_back();
    s.clear();
    return s;
  }

 private:
  // Blocks waiting for the parser. One is enough to keep both threads busy
  // (the parser takes the next block as soon as it finishes one, and
  // inflating a block takes about as long as parsing it); each one more
  // keeps a block's memory resident for no gain in speed.
  static constexpr size_t kMax = 1;
  const bool bounded_;
  std::mutex mu_;
  std::condition_variable not_empty_, not_full_;
  std::deque<Block> q_;
  std::vector<std::string> spare_;
  bool closed_ = false;
  bool cancelled_ = false;
  Status status_;
  std::exception_ptr error_;
};

void Produce(LineSource& src, BlockQueue& queue) {
  try {
    for (;;) {
      Block block;
      block.text = queue.Spare();
      block.text.reserve(kBlockCapacity);
      if (!src.ReadLines(&block.text, kBlock)) break;
      block.last_unterminated = src.last_line_unterminated();
      queue.Push(std::move(block));
      if (queue.Cancelled()) return queue.Close(Status());
    }
    queue.Close(src.status());
  } catch (...) {
    queue.Fail(std::current_exception());
  }
}

static_assert(kMaxLineBytes == size_t{64} << 20, "the messages below say 64 MiB");

// A line past the limit arrives cut after kMaxLineBytes + 1 bytes
// (LineSource). Input that is no JSON at all (binary data, /dev/zero) says
// so at its column; a line that is JSON up to the cut is too long.
Status LongLine(std::string_view line, const std::string& where) {
  // A value cut inside a token (a literal, an escape) fails this close to
  // the cut; its error is the cut's, not the input's.
  constexpr size_t kCutMargin = 16;
  try {
    JsonCursor c(line);
    c.SkipValue();
    c.ExpectEnd();
  } catch (const JsonError& e) {
    if (e.column + kCutMargin <= line.size()) {
      return Status::Error(where + "not valid JSON (column " + std::to_string(e.column) + ": " +
                           e.what + ")");
    }
  }
  return Status::Error(where + "line longer than 64 MiB");
}

// `threaded`: inflate on a reader thread while this one parses (files); an
// in-memory input is read here, a block at a time (tests, fuzzers).
// `*line_no_out` counts the lines parsed, for ReadFrom's message
// when memory runs out.
Expected<Trace> ReadBlocks(LineSource& src, const ReadOptions& options, ReadInfo* info,
                           bool threaded, size_t* line_no_out) {
  Trace trace;
  Builder builder(&trace);
  BlockQueue queue(threaded);
  std::thread producer;
  if (threaded) {
    try {
      producer = std::thread([&] { Produce(src, queue); });
    } catch (const std::system_error&) {
      threaded = false;  // no thread to be had (a memory limit): read here
    }
  }
  // The next block: from the reader thread, or read here, one at a time.
  auto next_block = [&](Block* b) -> bool {
    if (threaded) return queue.Pop(b);
    try {
      b->text.clear();
      b->text.reserve(kBlockCapacity);
      if (!src.ReadLines(&b->text, kBlock)) return false;
    } catch (...) {
      ++*line_no_out;  // as below: decoding the lines after those parsed
      throw;
    }
    b->last_unterminated = src.last_line_unterminated();
    return true;
  };
  struct Joiner {  // stops and joins the producer on every exit path
    std::thread& t;
    BlockQueue& q;
    ~Joiner() {
      q.Cancel();
      if (t.joinable()) t.join();
    }
  } joiner{producer, queue};

  bool saw_header = false;
  size_t& line_no = *line_no_out;
  ReadInfo local;
  Block block;
  bool stopped = false;
  bool reserved = false;
  uint64_t consumed = 0, estimate = 0;
  while (!stopped && next_block(&block)) {
    size_t pos = 0;
    while (pos < block.text.size()) {
      size_t nl = block.text.find('\n', pos);
      const bool unterminated = nl == std::string::npos;
      if (unterminated) nl = block.text.size();
      const std::string_view line(block.text.data() + pos, nl - pos);
      pos = nl + 1;
      ++line_no;
      // Built only for an error message.
      auto where = [&] { return src.name() + ": line " + std::to_string(line_no) + ": "; };
      if (line.size() > kMaxLineBytes) return LongLine(line, where());
      JsonCursor cursor(line);
      try {
        if (!saw_header) {
          builder.Header(cursor);
          saw_header = true;
        } else {
          builder.Record(cursor);
        }
        cursor.ExpectEnd();
      } catch (const JsonError& e) {
        if (unterminated && saw_header) {
          if (options.partial) {
            local.stopped_early = true;
            local.stopped_at_line = line_no;
            stopped = true;
            break;
          }
          return Status::Error(
              where() +
              "the last record is cut off (the trace was truncated; use --partial to analyze up to "
              "the last complete record)");
        }
        return Status::Error(where() + "not valid JSON (column " + std::to_string(e.column) + ": " +
                             e.what + ")");
      } catch (const RecordError& e) {
        return Status::Error(where() + e.what());
      }
    }
    consumed += block.text.size();
    // After each block, keep the arrays sized for the whole file.
    if (!reserved) {
      reserved = true;
      estimate = src.EstimatedSize();
    }
    if (estimate > consumed && consumed > 0)
      builder.ReserveFor(static_cast<double>(estimate) / static_cast<double>(consumed));
    if (threaded) queue.Recycle(std::move(block.text));
  }
  queue.Cancel();
  if (producer.joinable()) producer.join();
  if (queue.error()) {
    ++line_no;  // the producer failed decoding the lines after those parsed
    std::rethrow_exception(queue.error());
  }
  const Status& input = threaded ? queue.status() : src.status();
  if (!stopped && !input.ok()) {
    if (options.partial && saw_header && input.message().find("truncated") != std::string::npos) {
      local.stopped_early = true;
      local.stopped_at_line = line_no + 1;
    } else {
      return input;
    }
  }
  if (!saw_header) return Status::Error(src.name() + ": empty file (no memtl trace header)");
  builder.FinishImpls();
  trace.Finish();
  local.lines = line_no;
  if (info != nullptr) *info = local;
  return trace;
}

// Memory that runs out on either thread, while decoding or while building
// the trace, ends the read with one line, as any other bad input does.
Expected<Trace> ReadFrom(LineSource& src, const ReadOptions& options, ReadInfo* info,
                         bool threaded) {
  size_t line_no = 0;
  try {
    return ReadBlocks(src, options, info, threaded, &line_no);
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  // The trace built so far is gone, so building the message can allocate.
  return Status::Error(src.name() + ": line " + std::to_string(line_no) + ": out of memory");
}

}  // namespace

Expected<Trace> ReadTraceFile(const std::string& path, const ReadOptions& options, ReadInfo* info) {
  auto src = LineSource::Open(path);
  if (!src.ok()) return src.status();
  return ReadFrom(*src.value(), options, info, options.threaded);
}

Expected<Trace> ReadTraceString(std::string data, const std::string& name,
                                const ReadOptions& options, ReadInfo* info) {
  auto src = LineSource::FromMemory(std::move(data), name);
  return ReadFrom(*src, options, info, false);
}

}  // namespace memtl

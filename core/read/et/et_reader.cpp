// Execution traces into compact node records (et_reader.h). Each node is
// small (tens of values), so it is parsed into a throwaway tree of values
// and converted from there; the document itself is streamed.
#include "core/read/et/et_reader.h"

#include <algorithm>
#include <charconv>
#include <new>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "core/model/checked.h"
#include "core/model/quote.h"
#include "core/read/common/format.h"
#include "core/read/common/json_cursor.h"
#include "core/read/common/kineto_stream.h"
#include "core/read/memtl/trace_reader.h"

namespace memtl::read {

namespace {

using Kind = JsonCursor::Kind;

// One JSON value of a node.
struct Value {
  Kind kind = Kind::kNull;
  bool b = false;
  bool is_int = false;   // i holds it
  bool is_uint = false;  // u holds it (a non-negative integer, up to 2^64-1)
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  std::string s;
  std::vector<Value> items;  // array
  // object: member i is keys[i], items[i]
  std::vector<std::string> keys;

  const Value* Get(std::string_view key) const {
    if (kind != Kind::kObject) return nullptr;
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i] == key) return &items[i];
    return nullptr;
  }
};

const Value kNullValue;

void Parse(JsonCursor& c, std::string_view text, Value* out, std::string* scratch) {
  out->kind = c.Peek();
  switch (out->kind) {
    case Kind::kNull:
      c.ReadNull();
      return;
    case Kind::kBool:
      out->b = c.ReadBool();
      return;
    case Kind::kString:
      out->s = std::string(c.ReadString(scratch));
      return;
    case Kind::kNumber: {
      const size_t begin = c.column() - 1;
      c.SkipValue();
      const std::string_view raw = text.substr(begin, c.column() - 1 - begin);
      const auto r = std::from_chars(raw.data(), raw.data() + raw.size(), out->i);
      out->is_int = r.ec == std::errc() && r.ptr == raw.data() + raw.size();
      const auto ru = std::from_chars(raw.data(), raw.data() + raw.size(), out->u);
      out->is_uint = ru.ec == std::errc() && ru.ptr == raw.data() + raw.size();
      if (out->is_int) {
        out->f = static_cast<double>(out->i);
      } else {
        std::from_chars(raw.data(), raw.data() + raw.size(), out->f);
      }
      return;
    }
    case Kind::kArray:
      c.BeginArray();
      while (c.NextItem()) {
        out->items.emplace_back();
        Parse(c, text, &out->items.back(), scratch);
      }
      return;
    case Kind::kObject: {
      c.BeginObject();
      std::string_view key;
      while (c.NextKey(&key)) {
        out->keys.emplace_back(key);
        out->items.emplace_back();
        Parse(c, text, &out->items.back(), scratch);
      }
      return;
    }
    default:
      c.SkipValue();  // throws JsonError
  }
}

// [tensor_id, storage_id, offset, numel, itemsize, device]
bool IsTensorValue(const Value& v) {
  return v.kind == Kind::kArray && v.items.size() == 6 && v.items[0].is_int && v.items[1].is_int &&
         v.items[5].kind == Kind::kString;
}

// A node's value that memtl cannot take (a tensor whose sizes overflow).
struct BadValue : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class NodeBuilder {
 public:
  explicit NodeBuilder(ExecutionTrace* et) : et_(et) {}

  void Node(const Value& n) {
    EtNode node;
    const Value* attrs = n.Get("attrs");
    auto attr = [&](std::string_view key) -> const Value* {
      if (const Value* v = n.Get(key)) return v;  // schema 1.0: on the node
      if (attrs == nullptr) return nullptr;
      for (const Value& a : attrs->items) {
        const Value* name = a.Get("name");
        if (name != nullptr && name->s == key) return a.Get("value");
      }
      return nullptr;
    };
    if (const Value* id = n.Get("id"); id != nullptr && id->is_uint) node.id = id->u;
    // PyTorch's RecordFunctionHandle is unsigned 64-bit.
    if (const Value* rf = attr("rf_id"); rf != nullptr && rf->is_uint) node.rf = rf->u;
    const Value* name = n.Get("name");
    node.name = et_->strings.Intern(name != nullptr ? std::string_view(name->s) : "");
    const Value* schema = attr("op_schema");
    node.schema = et_->strings.Intern(schema != nullptr ? std::string_view(schema->s) : "");

    // Inputs: {"values", "shapes", "types", "strides"} (1.1) or flat (1.0).
    const Value* in = n.Get("inputs");
    const Value* values = in;
    const Value* shapes = n.Get("input_shapes");
    const Value* types = n.Get("input_types");
    const Value* strides = n.Get("input_strides");
    if (in != nullptr && in->kind == Kind::kObject) {
      values = in->Get("values");
      shapes = in->Get("shapes");
      types = in->Get("types");
      strides = in->Get("strides");
    }
    node.args_begin = static_cast<uint32_t>(et_->args.size());
    if (values != nullptr) {
      for (size_t i = 0; i < values->items.size(); ++i) {
        et_->args.push_back(Arg(values->items[i], At(types, i), At(shapes, i), At(strides, i)));
      }
    }
    node.args_count = static_cast<uint32_t>(et_->args.size()) - node.args_begin;

    const Value* out = n.Get("outputs");
    const Value* out_values = out;
    if (out != nullptr && out->kind == Kind::kObject) out_values = out->Get("values");
    node.outs_begin = static_cast<uint32_t>(et_->items.size());
    if (out_values != nullptr) Outputs(*out_values);
    node.outs_count = static_cast<uint32_t>(et_->items.size()) - node.outs_begin;
    et_->nodes.push_back(node);
  }

 private:
  static const Value& At(const Value* list, size_t i) {
    if (list == nullptr || i >= list->items.size()) return kNullValue;
    return list->items[i];
  }

  // A tensor's numbers are checked as the memtl trace reader checks its
  // own, since the join writes them into a memtl trace: dimensions within
  // kMaxDimension, no negative size, at most kMaxDims of them, at most
  // kMaxTensorBytes, a device PyTorch names (or none), and every product
  // and sum made of them within 64 bits, else the trace is refused
  // (BadValue) naming the problem, not the join.
  uint32_t Tensor(const Value& v, const Value& shape, const Value& stride) {
    EtTensor t;
    t.tensor_id = static_cast<uint64_t>(v.items[0].i);
    t.storage_id = static_cast<uint64_t>(v.items[1].i);
    t.offset = v.items[2].i;
    t.numel = v.items[3].i;
    if (v.items[4].i < 0 || v.items[4].i > UINT32_MAX)
      throw BadValue("a tensor's itemsize " + std::to_string(v.items[4].i) + " is out of range");
    t.itemsize = static_cast<uint32_t>(v.items[4].i);
    // The join writes a dtype of that size (0: an undefined tensor's), and
    // the size checked below is the one the memtl trace reader checks.
    if (t.itemsize > 16 || (t.itemsize & (t.itemsize - 1)) != 0)
      throw BadValue("a tensor's itemsize " + std::to_string(t.itemsize) +
                     " is no dtype's (1, 2, 4, 8 or 16 bytes)");
    const std::optional<int64_t> end = CheckedAdd(t.offset, t.numel);
    const std::optional<int64_t> extent =
        end ? CheckedMul<int64_t>(*end, t.itemsize) : std::nullopt;
    if (!extent) {
      throw BadValue("a tensor's (offset + numel) * itemsize is past 2^63-1 (offset " +
                     std::to_string(t.offset) + ", numel " + std::to_string(t.numel) +
                     ", itemsize " + std::to_string(t.itemsize) + ")");
    }
    t.extent = *extent;
    if (!v.items[5].s.empty() && !IsDeviceName(v.items[5].s))
      throw BadValue("a tensor's device " + Quote(v.items[5].s) + " is not a device");
    t.device = et_->strings.Intern(v.items[5].s);
    t.dims_begin = static_cast<uint32_t>(et_->dims.size());
    const auto dim = [](const Value& d) {
      if (d.i > kMaxDimension || d.i < -kMaxDimension)
        throw BadValue("a tensor's shape or strides hold " + std::to_string(d.i) +
                       ", out of range (at most 2^48)");
      return d.i;
    };
    for (const Value& d : shape.items) {
      if (!d.is_int) continue;
      if (d.i < 0) throw BadValue("a tensor's shape holds a negative size, " + std::to_string(d.i));
      et_->dims.push_back(dim(d));
    }
    t.num_sizes = static_cast<uint32_t>(et_->dims.size()) - t.dims_begin;
    if (stride.kind == Kind::kArray && stride.items.size() == t.num_sizes) {
      for (const Value& d : stride.items) et_->dims.push_back(d.is_int ? dim(d) : 0);
    } else {  // schema 1.0 records no strides: contiguous
      const size_t n = t.num_sizes;
      et_->dims.resize(et_->dims.size() + n);
      int64_t step = 1;
      for (size_t k = n; k-- > 0;) {
        et_->dims[t.dims_begin + n + k] = step;
        const std::optional<int64_t> next =
            CheckedMul(step, std::max<int64_t>(et_->dims[t.dims_begin + k], 1));
        // Only a stride that is written must fit: the product past the
        // outermost dimension is never one.
        if (!next && k > 0) throw BadValue("a tensor's shape has more than 2^63-1 elements");
        step = next.value_or(0);
        if (k > 0 && step > kMaxDimension)
          throw BadValue("a tensor's contiguous strides pass 2^48 (its shape's products)");
      }
    }
    t.num_strides = static_cast<uint32_t>(et_->dims.size()) - t.dims_begin - t.num_sizes;
    if (t.num_sizes > kMaxDims) throw BadValue("a tensor has more than 4096 dimensions");
    const int64_t* dims = et_->dims.data() + t.dims_begin;
    if (PastMaxTensorBytes(dims, t.num_sizes, dims + t.num_sizes, t.num_strides,
                           ElementSize(DtypeOfItemsize(t.itemsize))))
      throw BadValue("a tensor of more than 2^46-1 bytes (its shape, strides and itemsize)");
    et_->tensors.push_back(t);
    return static_cast<uint32_t>(et_->tensors.size() - 1);
  }

  EtArg Arg(const Value& v, const Value& type, const Value& shape, const Value& stride) {
    EtArg a;
    const std::string_view ty = type.s;
    if (ty.starts_with("Tensor") && IsTensorValue(v)) {
      a.kind = EtArgKind::kTensor;
      a.begin = Tensor(v, shape, stride);
    } else if ((ty.starts_with("GenericList[Tensor") || ty == "GenericList[]") &&
               v.kind == Kind::kArray) {
      // An empty list names no element type: a tensor list or not, the
      // join tells from the node's schema.
      std::vector<uint32_t> elems;
      for (size_t i = 0; i < v.items.size(); ++i) {
        elems.push_back(IsTensorValue(v.items[i])
                            ? Tensor(v.items[i], At(&shape, i), At(&stride, i))
                            : kNone32);
      }
      a.kind = EtArgKind::kList;
      a.begin = static_cast<uint32_t>(et_->items.size());
      a.count = static_cast<uint32_t>(elems.size());
      et_->items.insert(et_->items.end(), elems.begin(), elems.end());
    } else if (ty == "Int" && v.is_int) {
      a.kind = EtArgKind::kInt;
      a.i = v.i;
    } else if (ty == "Double" && v.kind == Kind::kNumber) {
      a.kind = EtArgKind::kFloat;
      a.f = v.f;
    } else if (ty == "Bool" && v.kind == Kind::kBool) {
      a.kind = EtArgKind::kBool;
      a.i = v.b ? 1 : 0;
    } else if (ty == "String" && v.kind == Kind::kString) {
      a.kind = EtArgKind::kString;
      a.str = et_->strings.Intern(v.s);
    }
    // None, Device, int lists and anything else: not captured, as
    // PyTorch's profiler leaves them.
    return a;
  }

  // Every tensor among the outputs, lists and tuples flattened.
  void Outputs(const Value& v) {
    if (IsTensorValue(v)) {
      et_->items.push_back(Tensor(v, kNullValue, kNullValue));
      return;
    }
    if (v.kind == Kind::kArray)
      for (const Value& item : v.items) Outputs(item);
  }

  ExecutionTrace* et_;
};

Expected<ExecutionTrace> Read(OpenedInput in, const ReadOptions& options) {
  LineSource& src = *in.src;
  const std::string name = QuotePath(src.name());
  if (in.format != InputFormat::kExecutionTrace) {
    const std::string what = in.format == InputFormat::kMemtlTrace
                                 ? std::string("no JSON object with \"nodes\"")
                                 : "a " + std::string(FormatName(in.format));
    return Status::Error(name + ": not an execution trace (" + what +
                         "); --et takes the file torch.profiler.ExecutionTraceObserver wrote");
  }
  ExecutionTrace et;
  NodeBuilder builder(&et);
  KinetoStream stream(src, std::move(in.head), options.progress);
  stream.set_array_key("nodes");
  std::string scratch;
  try {
    for (;;) {
      const KinetoStream::Part part = stream.Next();
      if (part == KinetoStream::Part::kEnd) break;
      if (part == KinetoStream::Part::kCut) {
        if (!src.status().ok()) return src.status();
        return Status::Error(name + ": the execution trace is cut off after " +
                             std::to_string(stream.events()) + " nodes");
      }
      const std::string_view text = stream.value();
      JsonCursor c(text);
      Value v;
      Parse(c, text, &v, &scratch);
      c.ExpectEnd();
      if (part == KinetoStream::Part::kMember) {
        if (stream.key() == "schema" && v.kind == Kind::kString) et.schema = v.s;
        continue;
      }
      if (v.kind != Kind::kObject)
        return Status::Error(name + ": line " + std::to_string(stream.line()) +
                             ": a node that is not a JSON object");
      builder.Node(v);
    }
  } catch (const KinetoStructureError& e) {
    return Status::Error(name + ": line " + std::to_string(stream.line()) + ": " + e.what());
  } catch (const BadValue& e) {
    return Status::Error(name + ": line " + std::to_string(stream.line()) + ": " + e.what());
  } catch (const JsonError& e) {
    return Status::Error(name + ": line " + std::to_string(stream.line()) +
                         ": not valid JSON: " + e.what);
  }
  if (et.nodes.empty()) return Status::Error(name + ": the execution trace has no nodes");
  return et;
}

Expected<ExecutionTrace> Guarded(OpenedInput in, const ReadOptions& options) {
  const std::string name = QuotePath(in.src->name());
  return OutOfMemoryIsAnError(name, [&] { return Read(std::move(in), options); });
}

}  // namespace

Expected<ExecutionTrace> ReadExecutionTrace(const std::string& path, const ReadOptions& options) {
  auto in = OpenInput(path);
  if (!in.ok()) return in.status();
  return Guarded(std::move(in.value()), options);
}

Expected<ExecutionTrace> ReadExecutionTraceString(std::string data, const std::string& name) {
  auto in = OpenMemoryInput(std::move(data), name);
  if (!in.ok()) return in.status();
  return Guarded(std::move(in.value()), {});
}

}  // namespace memtl::read

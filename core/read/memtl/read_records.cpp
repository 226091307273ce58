// Records: the fields of every kind, then ops with their arguments,
// allocations, other events and schemas.
#include "core/read/memtl/record_builder.h"

#include <string>
#include <utility>

namespace memtl::read {

void Builder::Record(JsonCursor& c) {
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
  // A block parsed on its own takes its first event's index as given; the
  // merge checks it against the events before the block.
  if (chunk_ != nullptr && chunk_->base < 0) {
    if (f.i < 0) Fail("record index out of order");  // the reading in order says how
    chunk_->base = f.i;
  }
  const int64_t base = chunk_ != nullptr ? chunk_->base : 0;
  if (f.i != base + static_cast<int64_t>(t_->events.size())) {
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
  // PyTorch's tree builder nests events inside their parent's span; a
  // child that starts first is suspect, but the tree is still usable.
  if (chunk_ == nullptr) {
    if (e.parent != kNone32 && e.kind != EventKind::kAlloc && t0 < t_->event_t0[e.parent])
      ++t_->events_before_parent;
    t_->events.push_back(e);
    t_->event_t0.push_back(t0);
    return;
  }
  if (e.parent != kNone32 && e.kind != EventKind::kAlloc) {
    if (e.parent < base) {
      chunk_->outer.emplace_back(e.parent, t0);
    } else if (t0 < chunk_->t0[static_cast<size_t>(e.parent - base)]) {
      ++t_->events_before_parent;
    }
  }
  t_->events.push_back(e);
  chunk_->t0.push_back(t0);
}

void Builder::Field(JsonCursor& c, std::string_view key, Fields& f) {
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
          Fail("unknown record kind " + Quote(k));
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
    f.name = Name(c, "name");
    f.has_name = true;
  } else if (Is(key, "line")) {
    const int64_t line = Int(c, "line");
    if (line < 0 || line >= (int64_t{1} << 30)) Fail("\"line\" is out of range");
    f.line = static_cast<uint32_t>(line);
  } else if (Is(key, "tid")) {
    if (!OptUint64(c, "tid", &f.tid)) f.tid = 0;
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
    f.ptr = Uint64(c, "ptr");
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

void Builder::Schema(Fields& f) {
  Require(f.has_op, "op");
  Require(f.has_schemas, "schemas");
  for (const auto& [name, _] : t_->schemas) {
    if (name == f.op) Fail("schemas of " + Quote(f.op) + " registered twice");
  }
  t_->schemas.emplace_back(std::move(f.op), std::move(f.schemas));
}

void Builder::Op(const Fields& f, Event* e) {
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
void Builder::DropArgs(Fields& f) {
  t_->arg_kinds.resize(f.args_begin);
  t_->arg_refs.resize(f.refs_begin);
  f.has_args = false;
}

void Builder::Args(JsonCursor& c, Fields& f) {
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

Arg Builder::ParseArg(JsonCursor& c) {
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
      const std::string_view v = kind2 == JsonCursor::Kind::kString ? c.ReadString(&scratch_) : "";
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

void Builder::Alloc(const Fields& f, Event* e) {
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

}  // namespace memtl::read

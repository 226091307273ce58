// Appending a block that a parse worker read on its own (record_builder.h,
// chunk mode) after the records read so far. The block's records hold ids
// local to it: string ids and device indices of its own tables, and indices
// into its own arrays from 0. Here they become the ids and indices that
// reading its lines in file order would have given: strings and devices are
// interned in the order the block first named them (which is file order),
// indices move by what the trace held before the block, and TensorImpl
// addresses are numbered in the order the tensors were read.
#include "core/read/memtl/record_builder.h"

#include <algorithm>
#include <string_view>

namespace memtl::read {

namespace {

// Makes room for `more` elements, growing as push_back does (reserving
// just enough, block after block, would copy the array every time). The
// reader keeps the arrays reserved for the whole file (ReserveFor), so
// this rarely grows one.
template <typename T>
void Room(std::vector<T>& v, size_t more) {
  if (v.capacity() - v.size() < more) v.reserve(std::max(v.size() + more, 2 * v.capacity()));
}

// Appends `from` to `to`, each element through `f`. By push_back into
// room made first: resize() would fill the room with zeros before.
template <typename T, typename F>
void AppendMapped(std::vector<T>& to, const std::vector<T>& from, F f) {
  Room(to, from.size());
  for (const T& v : from) to.push_back(f(v));
}

template <typename T>
void AppendAll(std::vector<T>& to, const std::vector<T>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

// What the block's parse could not know, checked before anything changes:
// where its events begin, and the limits on the trace's totals. Where one
// could be crossed the block is read again in order, whose checks say
// exactly where (the test here is coarser than theirs).
bool Fits(const Trace& t, const Trace& part, const ChunkExtras& x) {
  if (!part.events.empty() && x.base != static_cast<int64_t>(t.events.size())) return false;
  if (t.strings.size() + x.names.views().size() >= kMaxNames) return false;
  if (t.tensors.size() + part.tensors.size() >= kMaxTensors) return false;
  if (t.modules.size() + part.modules.size() >= PyInfo::kNone31) return false;
  if (t.optimizers.size() + part.optimizers.size() >= PyInfo::kNone31) return false;
  for (const auto& added : part.schemas) {
    for (const auto& known : t.schemas) {
      if (known.first == added.first) return false;  // "registered twice"
    }
  }
  return true;
}

// The block's ids and indices as the trace's.
struct Remap {
  std::vector<uint32_t> str;     // by the block's string id
  std::vector<DeviceIndex> dev;  // by the block's device index
  // Where each of the block's arrays begins in the trace.
  uint32_t op0 = 0, alloc0 = 0, py0 = 0, other0 = 0, tensor0 = 0, arg0 = 0, ref0 = 0, list0 = 0,
           module0 = 0, optimizer0 = 0, param0 = 0, state0 = 0;
  // A name kept in OpInfo's 24 bits: below kMaxNames, as Fits checked.
  uint32_t Name(uint32_t s) const { return s == kNone32 ? kNone32 : str[s]; }
  uint32_t TensorIndex(uint32_t i) const { return i == kNone32 ? kNone32 : tensor0 + i; }
  uint32_t StateIndex(uint32_t i) const { return i == Builder::kNoState ? 0 : state0 + i; }
};

// Interns the block's strings and devices in the order it first named
// them, and notes where its arrays will begin.
Remap InternIds(Trace& t, const Trace& part, const ChunkExtras& x) {
  Remap r;
  const std::vector<std::string_view>& names = x.names.views();
  r.str.resize(names.size());
  for (size_t i = 0; i < r.str.size(); ++i) r.str[i] = t.strings.Intern(names[i]);
  r.dev.resize(part.devices.size());
  for (size_t i = 0; i < r.dev.size(); ++i) {
    const DeviceInfo& d = part.devices[i];
    r.dev[i] = t.InternDevice(d.name);
    DeviceInfo& g = t.devices[r.dev[i]];
    g.max_total_allocated = std::max(g.max_total_allocated, d.max_total_allocated);
    g.max_total_reserved = std::max(g.max_total_reserved, d.max_total_reserved);
  }
  r.op0 = static_cast<uint32_t>(t.ops.size());
  r.alloc0 = static_cast<uint32_t>(t.allocs.size());
  r.py0 = static_cast<uint32_t>(t.py_names.size());
  r.other0 = static_cast<uint32_t>(t.other_names.size());
  r.tensor0 = static_cast<uint32_t>(t.tensors.size());
  r.arg0 = static_cast<uint32_t>(t.arg_kinds.size());
  r.ref0 = static_cast<uint32_t>(t.arg_refs.size());
  r.list0 = static_cast<uint32_t>(t.list_items.size());
  r.module0 = static_cast<uint32_t>(t.modules.size());
  r.optimizer0 = static_cast<uint32_t>(t.optimizers.size());
  r.param0 = static_cast<uint32_t>(t.params.size());
  r.state0 = static_cast<uint32_t>(t.states.size());
  return r;
}

// Events, with their start times; parents are already the trace's.
void AppendEvents(Trace& t, const Trace& part, const ChunkExtras& x, const Remap& r) {
  for (const auto& [parent, t0] : x.outer) {
    if (t0 < t.event_t0[parent]) ++t.events_before_parent;
  }
  t.events_before_parent += part.events_before_parent;
  t.ops_without_end += part.ops_without_end;
  t.ops_ending_before_start += part.ops_ending_before_start;
  static_assert(static_cast<int>(EventKind::kOp) == 0 && static_cast<int>(EventKind::kAlloc) == 1 &&
                static_cast<int>(EventKind::kPy) == 2 && static_cast<int>(EventKind::kOther) == 3);
  const uint32_t payload0[4] = {r.op0, r.alloc0, r.py0, r.other0};  // by EventKind
  AppendMapped(t.events, part.events, [&](Event e) {
    e.payload = (e.payload + payload0[static_cast<int>(e.kind)]) & (kMaxEvents - 1);
    return e;
  });
  for (const int64_t t0 : x.t0) t.event_t0.push_back(t0);
}

// Ops and their arguments: a tensor argument names a tensor, a list its
// place in list_items, whose lists are each a length then its tensors.
void AppendOps(Trace& t, const Trace& part, const Remap& r) {
  AppendMapped(t.ops, part.ops, [&](OpInfo op) {
    op.args_begin += r.arg0;
    op.refs_begin += r.ref0;
    op.name = r.str[op.name] & (kMaxNames - 1);
    return op;
  });
  AppendAll(t.arg_kinds, part.arg_kinds);
  Room(t.arg_refs, part.arg_refs.size());
  const uint32_t* ref = part.arg_refs.data();
  for (const ArgKind k : part.arg_kinds) {
    if (k == ArgKind::kTensor) t.arg_refs.push_back(r.tensor0 + *ref++);
    if (k == ArgKind::kTensorList) t.arg_refs.push_back(r.list0 + *ref++);
  }
  const std::vector<uint32_t>& items = part.list_items;
  Room(t.list_items, items.size());
  for (size_t i = 0; i < items.size();) {
    const uint32_t len = items[i++];
    t.list_items.push_back(len);
    for (uint32_t k = 0; k < len; ++k) t.list_items.push_back(r.TensorIndex(items[i++]));
  }
}

// Tensors, each impl (`impls`, by tensor) numbered in `numbering` in the
// order the tensors were read; then the allocations.
void AppendTensorsAndAllocs(Trace& t, const Trace& part, const std::vector<uint64_t>& impls,
                            const Remap& r, DenseNumbering& numbering) {
  Room(t.tensors, part.tensors.size());
  constexpr size_t kAhead = 8;  // prefetch distance (DenseNumbering::PrefetchSlot)
  for (size_t i = 0; i < part.tensors.size(); ++i) {
    if (i + kAhead < impls.size() && impls[i + kAhead] != 0)
      numbering.PrefetchSlot(impls[i + kAhead]);
    Tensor v = part.tensors[i];
    v.device = v.device == Builder::kNoTensorDevice ? 0 : r.dev[v.device];
    if (impls[i] != 0) v.impl = numbering.Number(impls[i]);
    t.tensors.push_back(v);
  }
  AppendAll(t.tensor_ptrs, part.tensor_ptrs);
  AppendAll(t.tensor_ids, part.tensor_ids);

  AppendMapped(t.allocs, part.allocs, [&](AllocInfo a) {
    a.device = r.dev[a.device];
    return a;
  });
  AppendAll(t.alloc_ptrs, part.alloc_ptrs);
  AppendAll(t.alloc_ids, part.alloc_ids);
}

// Python calls with their modules, optimizers, parameters and state.
void AppendPython(Trace& t, const Trace& part, const Remap& r) {
  auto name = [&](uint32_t s) { return r.Name(s); };
  auto tensor = [&](uint32_t i) { return r.TensorIndex(i); };
  if (!part.py_lines.empty()) {
    t.py_lines.resize(r.py0, 0);
    AppendAll(t.py_lines, part.py_lines);
  }
  AppendMapped(t.py_names, part.py_names, name);
  t.py_linked.insert(t.py_linked.end(), part.py_linked.begin(), part.py_linked.end());
  AppendMapped(t.py_links, part.py_links, [&](PyLink l) {
    l.py += r.py0;
    l.index = (l.index + (l.is_optimizer ? r.optimizer0 : r.module0)) & PyInfo::kNone31;
    return l;
  });
  AppendMapped(t.other_names, part.other_names, name);
  AppendMapped(t.modules, part.modules, [&](ModuleInfo m) {
    m.cls = r.str[m.cls];
    m.params_begin += r.param0;
    return m;
  });
  AppendMapped(t.optimizers, part.optimizers, [&](OptimizerInfo o) {
    o.params_begin += r.param0;
    o.state_begin = r.StateIndex(o.state_begin);
    return o;
  });
  AppendMapped(t.params, part.params, [&](ParamInfo p) {
    p.name = name(p.name);
    p.tensor = tensor(p.tensor);
    p.grad = tensor(p.grad);
    p.state_begin = r.StateIndex(p.state_begin);
    return p;
  });
  AppendMapped(t.states, part.states, [&](StateEntry s) {
    s.name = r.str[s.name];
    s.tensor = tensor(s.tensor);
    return s;
  });
}

}  // namespace

bool Builder::Append(Trace& part, const ChunkExtras& x) {
  Trace& t = *t_;
  if (!Fits(t, part, x)) return false;
  // The ids local to the block, in the order it first named them.
  const Remap r = InternIds(t, part, x);
  AppendEvents(t, part, x, r);
  AppendOps(t, part, r);
  // The tensors' impls are numbered after the one the last block read in
  // order may still hold.
  NumberPendingImpl();
  AppendTensorsAndAllocs(t, part, x.impls, r, impls_);
  AppendPython(t, part, r);
  for (auto& schema : part.schemas) t.schemas.push_back(std::move(schema));
  return true;
}

}  // namespace memtl::read

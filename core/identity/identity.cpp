// Port of calculateUniqueTensorIDs with the torch 1.13 conventions.
//
// Steps, in order (each one reads only what the previous ones wrote):
//   0. (1.13) resolve python-tracer storage addresses to op-input tensors;
//   1. flatten every tensor observation and allocation in record order;
//   2. allocation ids: (storage pointer, device) -> fresh id until freed;
//   3. (1.13) split reused TensorImpl addresses into distinct identities;
//   4. drop allocations that no tensor was ever seen with;
//   5. pair the allocation ids seen with each TensorImpl;
//   6. coalesce the sorted pairs greedily into tensor ids (PyTorch's exact
//      greedy walk, not a full union-find: its answers are the reference);
//   7. observations whose storage pointer is null get no key.
//
// Step 7 is the memory profiler's rule, not the id assignment's: PyTorch's
// C++ gives a tensor without storage (torch.empty(0) as `out=`, the empty
// result a unary op makes before resizing it, an undefined gradient) ids
// like any other, so it still takes part in steps 2-6, but
// TensorKey._make returns None for a null storage pointer: such a tensor
// joins no edge, has no size, bumps no version and matches a Tensor schema
// argument only where None would (the op tree treats a tensor without a
// key as None). Known to differ: a real storage at address 0 is impossible
// on the allocators PyTorch ships, so null means "no storage" here too.
#include "core/identity/identity.h"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <utility>
#include "core/identity/key_table.h"
#include "core/model/flat_map.h"
#include "core/model/large_array.h"

namespace memtl {

namespace {

// Identity gives keys only to traces with fewer tensor observations and
// allocations together: key slots then fit the graph's 30-bit edge field
// (FlowEdge::key).
constexpr size_t kMaxTargets = size_t{1} << 30;

int Rank(EventKind k) {
  switch (k) {
    case EventKind::kOp:
      return 0;
    case EventKind::kAlloc:
      return 1;
    case EventKind::kPy:
      return 2;
    default:
      return 3;
  }
}

// Step 0: each python-tracer tensor known only by its storage address takes
// the metadata of the op input with that storage pointer nearest in time to
// the python call (ties: the later one).
void ResolvePartialTensors(Trace& trace, IdentityStats& stats) {
  struct Seen {
    int64_t t;
    uint32_t tensor;
  };
  // Only the storage pointers that python-tracer tensors name are indexed;
  // a bit filter turns away most op inputs before the hash lookup. It has
  // at least 64 bits per indexed pointer (at most one op input in 64 gets
  // past it by chance), so its filtering does not wane as traces grow.
  // The op inputs seen per pointer are kept in one array, grouped by
  // pointer after the scan (a vector per pointer would leave hundreds of
  // thousands of small blocks in the heap at 10^7 events).
  FlatMap<uint64_t, uint32_t, U64Hash> list_of;
  std::vector<uint64_t> ptrs;  // by list
  for (size_t ti = 0; ti < trace.tensors.size(); ++ti) {
    const uint64_t ptr = trace.tensor_ptrs[ti];
    if (trace.tensors[ti].partial &&
        list_of.try_emplace(ptr, static_cast<uint32_t>(ptrs.size())).second) {
      ptrs.push_back(ptr);
    }
  }
  if (ptrs.empty()) return;
  int filter_bits = 16;
  while (filter_bits < 40 && (size_t{1} << filter_bits) < 64 * ptrs.size()) ++filter_bits;
  std::vector<uint64_t> filter(size_t{1} << (filter_bits - 6), 0);
  auto bit = [filter_bits](uint64_t ptr) { return Mix64(ptr) >> (64 - filter_bits); };
  for (uint64_t ptr : ptrs) filter[bit(ptr) >> 6] |= uint64_t{1} << (bit(ptr) & 63);
  auto list_of_ptr = [&](uint64_t ptr) -> uint32_t {
    const uint64_t b = bit(ptr);
    if ((filter[b >> 6] >> (b & 63) & 1) == 0) return kNone32;
    const uint32_t* i = list_of.find(ptr);
    return i == nullptr ? kNone32 : *i;
  };
  // Two scans of the op inputs: the first counts the sightings of each
  // pointer, the second puts them in place (in record order within a
  // pointer), so no array grows; each pointer's sightings are then sorted by
  // time, stably (the later record wins a tie below).
  auto for_each_sighting = [&](const OpInfo& op, auto&& fn) {
    auto seen = [&](uint32_t ti) {
      if (ti == kNone32 || trace.tensors[ti].partial) return;
      const uint32_t list = list_of_ptr(trace.tensor_ptrs[ti]);
      if (list != kNone32) fn(list, ti);
    };
    for (const Arg arg : trace.Args(op)) {
      if (arg.kind == ArgKind::kTensor) seen(arg.begin);
      for (uint32_t k = 0; arg.kind == ArgKind::kTensorList && k < arg.count; ++k) {
        seen(trace.list_items[arg.begin + k]);
      }
    }
  };
  // The counting scan reads the op records only, and marks the ops with a
  // sighting; the filling scan walks the events (for their times) and
  // reads the arguments of the marked ops only.
  std::vector<uint32_t> list_begin(ptrs.size() + 1, 0);
  std::vector<bool> op_sees(trace.ops.size(), false);
  for (uint32_t o = 0; o < trace.ops.size(); ++o) {
    for_each_sighting(trace.ops[o], [&](uint32_t list, uint32_t) {
      ++list_begin[list + 1];
      op_sees[o] = true;
    });
  }
  for (size_t l = 0; l < ptrs.size(); ++l) list_begin[l + 1] += list_begin[l];
  std::vector<Seen> all(list_begin.back());
  {
    std::vector<uint32_t> next(list_begin.begin(), list_begin.end() - 1);
    for (uint32_t ei = 0; ei < trace.events.size(); ++ei) {
      const Event& e = trace.events[ei];
      if (e.kind != EventKind::kOp || !op_sees[e.payload]) continue;
      const int64_t t0 = trace.event_t0[ei];
      for_each_sighting(trace.ops[e.payload], [&](uint32_t list, uint32_t ti) {
        all[next[list]++] = Seen{t0, ti};
      });
    }
  }
  FreeArray(op_sees);
  for (size_t l = 0; l < ptrs.size(); ++l) {
    std::stable_sort(all.begin() + list_begin[l], all.begin() + list_begin[l + 1],
                     [](const Seen& a, const Seen& b) { return a.t < b.t; });
  }
  auto resolve = [&](uint32_t ti, int64_t when) {
    if (ti == kNone32 || !trace.tensors[ti].partial) return;
    const uint32_t l = list_of_ptr(trace.tensor_ptrs[ti]);
    if (l == kNone32 || list_begin[l] == list_begin[l + 1]) {
      ++stats.dropped_python;
      return;
    }
    const Seen* first = all.data() + list_begin[l];
    const Seen* last = all.data() + list_begin[l + 1];
    // First occurrence at or after `when`, compared with the last one before.
    const Seen* after =
        std::lower_bound(first, last, when, [](const Seen& s, int64_t t) { return s.t < t; });
    const Seen* best = nullptr;
    if (after != last) best = after;
    if (after != first) {
      const Seen& before = *(after - 1);
      // Distances in 64 unsigned bits: exact for any two int64 times in
      // order, where the signed difference can overflow.
      auto gap = [](int64_t a, int64_t b) { return uint64_t(b) - uint64_t(a); };  // a <= b
      if (best == nullptr || gap(before.t, when) < gap(when, best->t)) best = &before;
    }
    // Among equal times prefer the later record.
    if (best != nullptr) {
      const Seen* last_same =
          std::upper_bound(first, last, best->t, [](int64_t t, const Seen& s) { return t < s.t; });
      best = last_same - 1;
    }
    trace.tensors[ti] = trace.tensors[best->tensor];
    trace.tensor_ptrs[ti] = trace.tensor_ptrs[best->tensor];
    ++stats.resolved_python;
  };
  for (uint32_t ei = 0; ei < trace.events.size(); ++ei) {
    const Event& e = trace.events[ei];
    if (e.kind != EventKind::kPy) continue;
    const int64_t t0 = trace.event_t0[ei];
    const PyInfo py = trace.Py(e.payload);
    auto params = [&](uint32_t begin, uint32_t count) {
      for (uint32_t p = begin; p < begin + count; ++p) {
        resolve(trace.params[p].tensor, t0);
        resolve(trace.params[p].grad, t0);
        for (uint32_t s = 0; s < trace.params[p].state_count; ++s) {
          resolve(trace.states[trace.params[p].state_begin + s].tensor, t0);
        }
      }
    };
    if (py.module() != kNone32)
      params(trace.modules[py.module()].params_begin, trace.modules[py.module()].params_count);
    if (py.optimizer() != kNone32) {
      const auto& o = trace.optimizers[py.optimizer()];
      params(o.params_begin, o.params_count);
      for (uint32_t s = o.state_begin; s < o.state_begin + o.state_count; ++s) {
        resolve(trace.states[s].tensor, t0);
      }
    }
  }
}

// Step 2: gives each observation and allocation its allocation id, in record
// order: a (storage pointer, device) gets a fresh id at its first sighting
// and keeps it until a free of that pointer is seen (this solves ABA for
// storage).
class Flattener {
 public:
  // `tensor_aid` and `alloc_aid` (sized like trace.tensors and trace.allocs,
  // zero) receive each target's allocation id.
  Flattener(const Trace& trace, std::vector<uint32_t>* tensor_aid, std::vector<uint32_t>* alloc_aid)
      : trace_(trace), tensor_aid_(*tensor_aid), alloc_aid_(*alloc_aid) {
    alloc_event_of_aid_.reserve(trace.tensors.size() + trace.allocs.size() + 1);  // never regrown
  }
  uint32_t num_aids() const { return next_aid_; }
  // One more than the largest impl number seen: Trace::num_impls, unless a
  // trace not built by the reader left that short.
  uint64_t impl_bound() const { return impl_bound_; }
  // Per allocation id, the event that allocated it (kNone32: only freed).
  std::vector<uint32_t> TakeAllocEvents() {
    alloc_event_of_aid_.resize(next_aid_, kNone32);
    return std::move(alloc_event_of_aid_);
  }

  void Tensor(uint32_t ti) {
    const auto& t = trace_.tensors[ti];
    impl_bound_ = std::max<uint64_t>(impl_bound_, uint64_t{t.impl} + 1);
    tensor_aid_[ti] = Aid(trace_.tensor_ptrs[ti], t.device, false);
  }

  void Alloc(uint32_t ei) {
    const uint32_t payload = trace_.events[ei].payload;
    const AllocInfo& a = trace_.allocs[payload];
    const uint32_t aid = Aid(trace_.alloc_ptrs[payload], a.device, a.bytes < 0);
    alloc_aid_[payload] = aid;
    if (a.bytes >= 0) {
      if (aid >= alloc_event_of_aid_.size()) alloc_event_of_aid_.resize(aid + 1, kNone32);
      if (alloc_event_of_aid_[aid] == kNone32) alloc_event_of_aid_[aid] = ei;
    }
  }

 private:
  uint32_t Aid(uint64_t ptr, DeviceIndex device, bool is_free) {
    auto [aid, inserted] = live_.try_emplace(ptr, device, next_aid_);
    next_aid_ += inserted ? 1 : 0;
    const uint32_t result = *aid;
    if (is_free) live_.erase(ptr, device);
    return result;
  }

  const Trace& trace_;
  std::vector<uint32_t>& tensor_aid_;
  std::vector<uint32_t>& alloc_aid_;
  PtrDevMap<uint32_t> live_;
  uint32_t next_aid_ = 1;
  uint64_t impl_bound_ = 1;
  std::vector<uint32_t> alloc_event_of_aid_;
};

// Step 3 (1.13 only). Without ids the producer's TensorImpl addresses are
// reused freely, so an impl address keeps its identity across a change of
// allocation only when the change is a genuine storage swap: the new storage
// was allocated inside an op (or a descendant of one) that received this impl
// with the old storage at an argument some overload of that op writes.
// Returns the number of identities (impls are renumbered 1..n).
// `alloc_event_of_aid`: per allocation id, the event that allocated it;
// `tensor_aid`: per tensor observation, its allocation id (0: none).
// `walk` visits the observations in record order (RecordWalk); each one's
// new impl number is written to `virtual_impl` (per tensor; 0: no impl).
template <typename Walk>
uint64_t DealiasImpls(const Trace& trace, const SchemaRegistry& schemas, const Walk& walk,
                      uint64_t impl_bound, const std::vector<uint32_t>& alloc_event_of_aid,
                      const std::vector<uint32_t>& tensor_aid, std::vector<uint32_t>& virtual_impl,
                      IdentityStats& stats) {
  auto op_wrote_impl = [&](uint32_t op_event, uint32_t impl, int64_t old_aid) {
    const Event& e = trace.events[op_event];
    const OpInfo& op = trace.ops[e.payload];
    const std::string& name = trace.Name(e);
    auto holds = [&](uint32_t ti) {
      return ti != kNone32 && trace.tensors[ti].impl == impl && tensor_aid[ti] == old_aid;
    };
    uint32_t a = 0;  // the argument's position
    for (const Arg arg : trace.Args(op)) {
      bool match = arg.kind == ArgKind::kTensor && holds(arg.begin);
      for (uint32_t k = 0; arg.kind == ArgKind::kTensorList && k < arg.count && !match; ++k) {
        match = holds(trace.list_items[arg.begin + k]);
      }
      if (match && schemas.AnyOverloadWrites(name, a)) return true;
      ++a;
    }
    return false;
  };
  // Per dense impl number: its current identity (0: not seen yet) and the
  // allocation id it was last seen with.
  struct ImplState {
    uint32_t virtual_impl = 0;
    uint32_t last_aid = 0;
  };
  std::vector<ImplState> states(impl_bound);
  uint32_t next_virtual = 1;
  walk.ForEachRaw(tensor_aid, [&](uint32_t ti, uint32_t impl, uint32_t aid) {
    ImplState& st = states[impl];
    if (st.virtual_impl == 0) {
      st = ImplState{next_virtual++, aid};
    } else if (st.last_aid != aid) {
      bool genuine = false;
      if (alloc_event_of_aid[aid] != kNone32) {
        for (uint32_t p = trace.events[alloc_event_of_aid[aid]].parent; p != kNone32 && !genuine;
             p = trace.events[p].parent) {
          if (trace.events[p].kind == EventKind::kOp) genuine = op_wrote_impl(p, impl, st.last_aid);
        }
      }
      if (!genuine) {
        st.virtual_impl = next_virtual++;
        ++stats.dealiased_impls;
      }
      st.last_aid = aid;
    }
    virtual_impl[ti] = st.virtual_impl;
  });
  return next_virtual;
}

bool RecordBefore(const Trace& trace, uint32_t a, uint32_t b) {
  const auto& ea = trace.events[a];
  const auto& eb = trace.events[b];
  const int64_t ta = trace.event_t0[a], tb = trace.event_t0[b];
  if (ta != tb) return ta < tb;
  return Rank(ea.kind) < Rank(eb.kind);
}

// Step 1: the tensor observations and allocations in record order, as
// PyTorch flattens them. The order is walked again by steps 3 and 5
// instead of being kept as an array of 8 bytes per observation, which was
// the largest thing identity held (and so a tenth of a 10^5-event export's
// peak); a walk reads the event and argument arrays in order and costs a
// few milliseconds per 10^6 events.
class RecordWalk {
 public:
  // Readers emit children in start order, so the event array is nearly
  // always in record order already: then it is walked as it is, with no
  // index array.
  explicit RecordWalk(const Trace& trace) : trace_(trace) {
    bool sorted = true;
    uint32_t prev = kNone32;
    for (uint32_t i = 0; i < trace.events.size() && sorted; ++i) {
      if (Rank(trace.events[i].kind) == 3) continue;
      if (prev != kNone32 && RecordBefore(trace, i, prev)) sorted = false;
      prev = i;
    }
    if (!sorted) order_ = RecordOrder(trace);
  }

  // Calls on_tensor(tensor index) for each observation identity reads (op
  // inputs, and the parameters and state of a module's or optimizer's
  // first python call, but no python-tracer tensor known only by its
  // pointer) and on_alloc(event index) for each allocation event, in
  // record order. Every observation is visited at most once.
  template <typename OnTensor, typename OnAlloc>
  void Run(OnTensor&& on_tensor, OnAlloc&& on_alloc) const {
    // The python tracer caches what it reports, so only the first call of
    // each module or optimizer is trusted.
    std::unordered_set<uint64_t> seen_modules, seen_optimizers;
    const Trace& trace = trace_;
    auto tensor = [&](uint32_t ti) {
      if (ti != kNone32 && !trace.tensors[ti].partial) on_tensor(ti);
    };
    auto event = [&](uint32_t ei) {
      const auto& e = trace.events[ei];
      if (e.kind == EventKind::kOp) {
        for (const Arg arg : trace.Args(trace.ops[e.payload])) {
          if (arg.kind == ArgKind::kTensor) tensor(arg.begin);
          if (arg.kind == ArgKind::kTensorList) {
            for (uint32_t k = 0; k < arg.count; ++k) tensor(trace.list_items[arg.begin + k]);
          }
        }
      } else if (e.kind == EventKind::kAlloc) {
        on_alloc(ei);
      } else if (e.kind == EventKind::kPy) {
        const PyInfo py = trace.Py(e.payload);
        auto first_call = [&](std::unordered_set<uint64_t>& seen, bool has_self, uint64_t self) {
          return seen.insert(has_self ? self : ~uint64_t{py.name}).second;
        };
        // A module's parameters and gradients; an optimizer's with their state.
        auto params = [&](uint32_t begin, uint32_t count, bool with_state) {
          for (uint32_t p = begin; p < begin + count; ++p) {
            tensor(trace.params[p].tensor);
            tensor(trace.params[p].grad);
            for (uint32_t s = 0; with_state && s < trace.params[p].state_count; ++s) {
              tensor(trace.states[trace.params[p].state_begin + s].tensor);
            }
          }
        };
        if (py.module() != kNone32) {
          const auto& m = trace.modules[py.module()];
          if (first_call(seen_modules, m.has_self, m.self))
            params(m.params_begin, m.params_count, false);
        }
        if (py.optimizer() != kNone32) {
          const auto& o = trace.optimizers[py.optimizer()];
          if (first_call(seen_optimizers, o.has_self, o.self)) {
            params(o.params_begin, o.params_count, true);
            for (uint32_t s = o.state_begin; s < o.state_begin + o.state_count; ++s) {
              tensor(trace.states[s].tensor);
            }
          }
        }
      }
    };
    if (!order_.empty()) {
      for (uint32_t e : order_) event(e);
      return;
    }
    for (uint32_t i = 0; i < trace.events.size(); ++i) {
      if (Rank(trace.events[i].kind) < 3) event(i);
    }
  }

  // The observations with a TensorImpl, in record order, as fn(tensor,
  // impl, allocation id): the list PyTorch flattens them into, which steps
  // 3 and 5 read.
  template <typename Fn>
  void ForEachRaw(const std::vector<uint32_t>& tensor_aid, Fn&& fn) const {
    Run(
        [&](uint32_t ti) {
          const uint32_t impl = trace_.tensors[ti].impl;
          if (impl != 0) fn(ti, impl, tensor_aid[ti]);
        },
        [](uint32_t) {});
  }

 private:
  const Trace& trace_;
  // Record order when the event array is not in it (then at least two
  // events are out of place, so it is not empty); empty when it is.
  std::vector<uint32_t> order_;
};

}  // namespace

std::vector<uint32_t> RecordOrder(const Trace& trace) {
  std::vector<uint32_t> order;
  order.reserve(trace.events.size());
  for (uint32_t i = 0; i < trace.events.size(); ++i) {
    if (Rank(trace.events[i].kind) < 3) order.push_back(i);
  }
  auto before = [&](uint32_t a, uint32_t b) { return RecordBefore(trace, a, b); };
  if (!std::is_sorted(order.begin(), order.end(), before))
    std::stable_sort(order.begin(), order.end(), before);
  return order;
}

IdentityStats AssignIdentity(Trace& trace, const SchemaRegistry& schemas, Diagnostics& diag) {
  IdentityStats stats;
  const bool legacy = !trace.header.has_ids;
  if (!legacy) {
    // The reader keeps one entry per tensor and allocation; a trace built
    // otherwise gets invalid ids (no key) for any it lacks.
    trace.tensor_ids.resize(trace.tensors.size());
    trace.alloc_ids.resize(trace.allocs.size());
  }
  if (trace.tensors.size() + trace.allocs.size() >= kMaxTargets) {
    // Far beyond any machine this runs on (2^30 tensors would be 24 GiB).
    diag.Add("trace too large for tensor identity",
             "2^30 or more tensor observations and allocations; no tensor ids assigned");
    BuildKeyTable(trace, {}, {});  // no keys
    return stats;
  }
  if (legacy) ResolvePartialTensors(trace, stats);

  // Steps 1 and 2. Each observation's and allocation's allocation id is
  // kept by target (0: none; a visited observation has one, from 1); the
  // legacy key table is built in these arrays. The storage pointers are
  // not read again.
  const RecordWalk walk(trace);
  std::vector<uint32_t> tensor_aid(trace.tensors.size(), 0);
  std::vector<uint32_t> alloc_aid(trace.allocs.size(), 0);
  uint32_t num_aids = 0;
  uint64_t impl_bound = 1;
  std::vector<uint32_t> alloc_event_of_aid;
  {
    Flattener flat(trace, &tensor_aid, &alloc_aid);
    walk.Run([&](uint32_t ti) { flat.Tensor(ti); }, [&](uint32_t ei) { flat.Alloc(ei); });
    num_aids = flat.num_aids();
    impl_bound = std::max<uint64_t>(trace.num_impls, flat.impl_bound());
    alloc_event_of_aid = flat.TakeAllocEvents();
  }
  // Step 7's input, read before the pointers go (a bit per observation).
  std::vector<bool> null_storage(trace.tensors.size(), false);
  for (size_t ti = 0; ti < trace.tensors.size(); ++ti)
    null_storage[ti] = trace.tensor_ptrs[ti] == 0;
  FreeArray(trace.tensor_ptrs);
  for (uint32_t aid : tensor_aid) stats.raw_tensors += aid != 0 ? 1 : 0;
  stats.raw_tensors += trace.allocs.size();

  // With producer ids, the computed allocation ids are only compared.
  if (!legacy) {
    for (size_t i = 0; i < tensor_aid.size(); ++i) {
      if (tensor_aid[i] != 0 && trace.tensor_ids[i].allocation != AllocationId(tensor_aid[i]))
        ++stats.id_mismatches;
    }
    for (size_t i = 0; i < alloc_aid.size(); ++i) {
      if (trace.alloc_ids[i].allocation != AllocationId(alloc_aid[i])) ++stats.id_mismatches;
    }
  }

  // Step 3. Either way impls are numbered 1..num_impls-1 afterwards (in
  // Tensor::impl: nothing after identity reads the reader's numbers). The
  // 1.13 split reads each op argument's allocation id and original impl, so
  // the new numbers are written only once it is done.
  uint64_t num_impls = 0;
  if (legacy) {
    std::vector<uint32_t> virtual_impl(trace.tensors.size(), 0);
    num_impls = DealiasImpls(trace, schemas, walk, impl_bound, alloc_event_of_aid, tensor_aid,
                             virtual_impl, stats);
    for (size_t ti = 0; ti < virtual_impl.size(); ++ti) {
      if (tensor_aid[ti] != 0) trace.tensors[ti].impl = virtual_impl[ti];
    }
  } else {
    // With producer ids no impl is split: the reader's numbers are the ones
    // to use.
    num_impls = impl_bound;
  }
  FreeArray(alloc_event_of_aid);

  // Step 4: allocations never seen with a tensor (that has a TensorImpl)
  // are not tensor storage: observations and allocations with those ids get
  // no key.
  std::vector<bool> tensor_aids(num_aids, false);
  for (size_t ti = 0; ti < tensor_aid.size(); ++ti) {
    if (tensor_aid[ti] != 0 && trace.tensors[ti].impl != 0) tensor_aids[tensor_aid[ti]] = true;
  }

  // Step 5: the first allocation id of each impl paired with every later
  // one; PyTorch sorts the pairs and walks them in order. Most pairs are an
  // allocation id with itself: those are kept as a bit per id (their sorted
  // order is the id order), the rest are sorted.
  std::vector<bool> self_pair(num_aids, false);
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  {
    std::vector<uint32_t> first_aid(num_impls, 0);  // 0: none yet (ids start at 1)
    walk.ForEachRaw(tensor_aid, [&](uint32_t, uint32_t impl, uint32_t aid) {
      uint32_t& first = first_aid[impl];
      if (first == 0) first = aid;
      if (first == aid) {
        self_pair[aid] = true;
      } else {
        pairs.emplace_back(std::min(first, aid), std::max(first, aid));
      }
    });
    std::sort(pairs.begin(), pairs.end());
    pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  }

  // Step 6: greedy coalescing over the sorted pairs ((a, a) before (a, b)
  // for b > a). Allocation ids are dense, so the id map is a vector (-1: none
  // yet). Ids count from 0 and are fewer than the allocation ids (under
  // kMaxTargets, 2^30), so 4 bytes hold one.
  std::vector<int32_t> id_of(num_aids, -1);
  {
    int32_t current = 0;
    auto visit = [&](uint32_t a, uint32_t b) {
      int32_t& ia = id_of[a];
      if (ia == -1) ia = current++;
      int32_t& ib = id_of[b];
      if (ib == -1) ib = ia;
    };
    size_t next_pair = 0;
    for (uint32_t a = 0; a < num_aids; ++a) {
      if (self_pair[a]) visit(a, a);
      for (; next_pair < pairs.size() && pairs[next_pair].first == a; ++next_pair)
        visit(a, pairs[next_pair].second);
    }
  }
  FreeArray(self_pair);
  FreeArray(pairs);

  if (legacy) {
    // The computed ids go to the key table; the aid arrays become its slot
    // arrays. id_of is -1 exactly for the allocation ids step 4 dropped
    // (step 6 visits the ids of the raws, and no other). Step 7: allocation
    // id 0 is no key.
    for (size_t ti = 0; ti < tensor_aid.size(); ++ti) {
      if (null_storage[ti]) tensor_aid[ti] = 0;
    }
    BuildKeyTableFromAids(trace, std::move(tensor_aid), std::move(alloc_aid), id_of);
    return stats;
  }

  // Producer ids: they are kept; disagreements are counted (over the
  // observations and allocations step 4 kept).
  auto compare = [&](uint32_t aid, const ProducerIds& given) {
    if (aid != 0 && tensor_aids[aid] && TensorId(id_of[aid]) != given.id) ++stats.id_mismatches;
  };
  for (size_t i = 0; i < tensor_aid.size(); ++i) compare(tensor_aid[i], trace.tensor_ids[i]);
  for (size_t i = 0; i < alloc_aid.size(); ++i) compare(alloc_aid[i], trace.alloc_ids[i]);
  if (stats.id_mismatches > 0) {
    diag.Add("producer ids differ from memtl's",
             std::to_string(stats.id_mismatches) +
                 " tensor or allocation ids differ; the producer's are used");
  }
  FreeArray(tensor_aid);
  FreeArray(alloc_aid);
  // Step 7: the producer's ids of a storage-less tensor are dropped.
  for (size_t ti = 0; ti < trace.tensor_ids.size(); ++ti) {
    if (null_storage[ti]) trace.tensor_ids[ti] = ProducerIds{};
  }
  BuildKeyTable(trace, trace.tensor_ids, trace.alloc_ids);
  return stats;
}

}  // namespace memtl

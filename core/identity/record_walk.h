// Step 1 of identity (identity.cpp): the tensor observations and
// allocations in record order, as PyTorch flattens them.
#pragma once

#include <cstdint>
#include <unordered_set>
#include <vector>

#include "core/identity/identity.h"  // RecordOrder
#include "core/model/trace.h"

namespace memtl::identity {

// Where an event kind sorts among events that start at the same time:
// torch ops, then allocations, then python calls; 3: not in the order.
inline int Rank(EventKind k) {
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

// Whether event `a` comes before event `b` in record order.
bool RecordBefore(const Trace& trace, uint32_t a, uint32_t b);

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
  RecordWalk(const Trace& trace, const TensorRecords& records) : trace_(trace), records_(records) {
    bool sorted = true;
    uint32_t prev = kNone32;
    for (uint32_t i = 0; i < trace.events.size() && sorted; ++i) {
      if (Rank(trace.events[i].kind) == 3) continue;
      if (prev != kNone32 && RecordBefore(trace, i, prev)) sorted = false;
      prev = i;
    }
    if (!sorted) order_ = memtl::RecordOrder(trace);
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
      if (ti != kNone32 && !records_.tensors[ti].partial) on_tensor(ti);
    };
    auto event = [&](uint32_t ei) {
      const auto& e = trace.events[ei];
      if (e.kind == EventKind::kOp) {
        for (const Arg arg : trace.ArgsOf(e.payload)) {
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
  // 3 and 5 read. The impl is the reader's (Tensor::impl), or the one
  // `impls` gives per observation where not null (step 3's split).
  template <typename Fn>
  void ForEachRaw(const std::vector<uint32_t>& tensor_aid, const std::vector<uint32_t>* impls,
                  Fn&& fn) const {
    Run(
        [&](uint32_t ti) {
          if (records_.tensors[ti].impl == 0) return;
          fn(ti, impls != nullptr ? (*impls)[ti] : records_.tensors[ti].impl, tensor_aid[ti]);
        },
        [](uint32_t) {});
  }

  const TensorRecords& records() const { return records_; }

 private:
  const Trace& trace_;
  const TensorRecords& records_;
  // Record order when the event array is not in it (then at least two
  // events are out of place, so it is not empty); empty when it is.
  std::vector<uint32_t> order_;
};

}  // namespace memtl::identity

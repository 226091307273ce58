// Step 3 of identity (identity.cpp), torch 1.13 only. Without ids the
// producer's TensorImpl addresses are reused freely, so an impl address keeps
// its identity across a change of allocation only when the change is a
// genuine storage swap: the new storage was allocated inside an op (or a
// descendant of one) that received this impl with the old storage at an
// argument some overload of that op writes.
#include <string>

#include "core/identity/steps.h"

namespace memtl::identity {

uint64_t DealiasImpls(const Trace& trace, const SchemaRegistry& schemas, const RecordWalk& walk,
                      uint64_t impl_bound, const std::vector<uint32_t>& alloc_event_of_aid,
                      const std::vector<uint32_t>& tensor_aid, std::vector<uint32_t>& virtual_impl,
                      IdentityStats& stats) {
  auto op_wrote_impl = [&](uint32_t op_event, uint32_t impl, int64_t old_aid) {
    const Event& e = trace.events[op_event];
    const std::string& name = trace.Name(e);
    auto holds = [&](uint32_t ti) {
      return ti != kNone32 && walk.records().tensors[ti].impl == impl && tensor_aid[ti] == old_aid;
    };
    uint32_t a = 0;  // the argument's position
    for (const Arg arg : trace.ArgsOf(e.payload)) {
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
  walk.ForEachRaw(tensor_aid, nullptr, [&](uint32_t ti, uint32_t impl, uint32_t aid) {
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

}  // namespace memtl::identity

// SizeMap construction: one pass over the time-sorted events for observed
// tensors, one for allocations.
#include "core/graph/size_map.h"

#include <algorithm>
#include <string>

#include "core/model/ptr_dev_map.h"

namespace memtl {

void SizeMap::Observe(const TensorRecords& records, const KeyTable& keys, uint32_t tensor) {
  const KeySlot key = keys.SlotOfTensor(tensor);
  if (!key.valid()) return;
  const int64_t bytes = records.tensors[tensor].bytes();
  if (bytes == kUnsized) return;  // not strided
  values_[key] = std::max<int64_t>(values_[key], bytes);
}

SizeMap::SizeMap(const OpTree& tree, const KeyTable& keys, const TensorRecords& records) {
  const Trace& trace = tree.trace();
  values_.assign(keys.size(), -1);
  for (uint32_t e : tree.sorted()) {
    const Event& ev = trace.events[e];
    if (ev.kind == EventKind::kOp) {
      for (const Arg arg : trace.ArgsOf(ev.payload)) {
        if (arg.kind == ArgKind::kTensor) Observe(records, keys, arg.begin);
        if (arg.kind == ArgKind::kTensorList) {
          for (uint32_t k = 0; k < arg.count; ++k)
            Observe(records, keys, trace.list_items[arg.begin + k]);
        }
      }
    } else if (ev.kind == EventKind::kPy) {
      const PyInfo py = trace.Py(ev.payload);
      auto params = [&](uint32_t begin, uint32_t count, bool with_state) {
        for (uint32_t p = begin; p < begin + count; ++p) {
          Observe(records, keys, trace.params[p].tensor);
          Observe(records, keys, trace.params[p].grad);
          if (!with_state) continue;
          for (uint32_t s = 0; s < trace.params[p].state_count; ++s) {
            Observe(records, keys, trace.states[trace.params[p].state_begin + s].tensor);
          }
        }
      };
      if (py.module() != kNone32)
        params(trace.modules[py.module()].params_begin, trace.modules[py.module()].params_count,
               false);
      if (py.optimizer() != kNone32) {
        const auto& o = trace.optimizers[py.optimizer()];
        params(o.params_begin, o.params_count, true);
        for (uint32_t s = o.state_begin; s < o.state_begin + o.state_count; ++s)
          Observe(records, keys, trace.states[s].tensor);
      }
    }
  }
  // The first allocation event's size wins; disagreements are counted by
  // CheckAllocations (core/checks), as PyTorch only logs them.
  PerKey<bool> sized_by_allocation(keys.size(), false);
  for (uint32_t e : tree.sorted()) {
    const Event& ev = trace.events[e];
    if (ev.kind != EventKind::kAlloc) continue;
    const KeySlot key = keys.SlotOfAlloc(ev.payload);
    if (!key.valid() || sized_by_allocation[key]) continue;
    sized_by_allocation[key] = true;
    const AllocInfo& a = trace.allocs[ev.payload];
    values_[key] = a.bytes < 0 ? -a.bytes : a.bytes;
  }
}

Expected<std::vector<bool>> UntrackedAllocationsLive(const OpTree& tree, const KeyTable& keys,
                                                     const TensorRecords& records) {
  const Trace& trace = tree.trace();
  if (records.alloc_ptrs.size() != trace.allocs.size()) {
    return Status::Error("internal error: the allocations' addresses are missing (" +
                         std::to_string(records.alloc_ptrs.size()) + " of " +
                         std::to_string(trace.allocs.size()) +
                         "); their liveness cannot be computed");
  }
  std::vector<bool> live_before(trace.allocs.size(), false);
  PtrDevMap<char> live;
  const EventOrder order = trace.header.pairs_in_time_order ? tree.sorted() : tree.preorder();
  for (uint32_t e : order) {
    const Event& ev = trace.events[e];
    if (ev.kind != EventKind::kAlloc || keys.SlotOfAlloc(ev.payload).valid()) continue;
    const AllocInfo& a = trace.allocs[ev.payload];
    const uint64_t ptr = records.alloc_ptrs[ev.payload];
    live_before[ev.payload] =
        a.bytes > 0 ? !live.try_emplace(ptr, a.device, 1).second : live.erase(ptr, a.device);
  }
  return live_before;
}

}  // namespace memtl

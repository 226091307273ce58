// Allocation checks per (pointer, device), in time order.
#include "core/checks/allocation_checks.h"

#include <cstdio>
#include <string>
#include <vector>

#include "core/model/ptr_dev_map.h"

namespace memtl {

namespace {
std::string Hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}
}  // namespace

AllocationSummary CheckAllocations(const OpTree& tree, const TensorRecords& records,
                                   Diagnostics& diag) {
  const Trace& trace = tree.trace();
  AllocationSummary s;
  // Per (pointer, device) allocated and not yet freed: the allocation's
  // event (its size and time are there). Frees erase, so the map holds the live
  // allocations only, not every pointer the trace ever names: it was a
  // twentieth of a 10^5-event export's peak when it kept freed pointers to
  // tell a double free from a free of memory allocated before profiling.
  PtrDevMap<uint32_t> live;
  // Frees of a (pointer, device) that is not live, in event order: a
  // double free if any earlier allocation or free named that pointer, a
  // pre-existing free otherwise. Told apart below, in a second pass over
  // just those pointers (a real trace has a few per step).
  std::vector<uint32_t> unmatched;
  auto where = [&](uint32_t ei) {
    const AllocInfo& a = trace.allocs[trace.events[ei].payload];
    return Hex(records.alloc_ptrs[trace.events[ei].payload]) + " on " +
           trace.devices[a.device].name + " at t=" + std::to_string(trace.event_t0[ei]);
  };
  for (const uint32_t ei : tree.sorted()) {
    const Event& e = trace.events[ei];
    if (e.kind != EventKind::kAlloc) continue;
    const AllocInfo& a = trace.allocs[e.payload];
    const uint64_t ptr = records.alloc_ptrs[e.payload];
    if (a.bytes > 0) {
      ++s.allocations;
      const auto [slot, inserted] = live.try_emplace(ptr, a.device, 0);
      if (!inserted) diag.Add("allocation at an address already live (a free missing?)", where(ei));
      *slot = ei;
      continue;
    }
    if (a.bytes == 0) {
      diag.Add("allocation event of 0 bytes", where(ei));
      continue;
    }
    ++s.frees;
    const uint32_t* alloc = live.find(ptr, a.device);
    if (alloc == nullptr) {
      unmatched.push_back(ei);
      continue;
    }
    if (const int64_t allocated = trace.allocs[trace.events[*alloc].payload].bytes;
        allocated != -a.bytes) {
      diag.Add("free size differs from its allocation",
               where(ei) + ": " + std::to_string(allocated) + " allocated, " +
                   std::to_string(-a.bytes) + " freed");
    }
    live.erase(ptr, a.device);
  }
  if (unmatched.empty()) return s;
  live = PtrDevMap<uint32_t>();  // done with it: free it before the second map
  // Per pointer of an unmatched free: 1 once an allocation or free (not a
  // 0-byte event, which changes nothing) has named it.
  PtrDevMap<uint8_t> named;
  for (const uint32_t ei : unmatched) {
    const Event& e = trace.events[ei];
    named.try_emplace(records.alloc_ptrs[e.payload], trace.allocs[e.payload].device, 0);
  }
  size_t next = 0;
  for (auto it = tree.sorted().begin(); it != tree.sorted().end() && next < unmatched.size();
       ++it) {
    const uint32_t ei = *it;
    const Event& e = trace.events[ei];
    if (e.kind != EventKind::kAlloc || trace.allocs[e.payload].bytes == 0) continue;
    uint8_t* seen = named.find(records.alloc_ptrs[e.payload], trace.allocs[e.payload].device);
    if (seen == nullptr) continue;
    if (unmatched[next] == ei) {
      if (*seen != 0) {
        diag.Add("double free", where(ei));
      } else {
        ++s.preexisting_frees;  // allocated before profiling began
      }
      ++next;
    }
    *seen = 1;
  }
  return s;
}

}  // namespace memtl

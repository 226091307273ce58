// Allocation checks in event (pre-order) order per (pointer, device).
#include "core/checks/allocation_checks.h"

#include <cstdio>
#include <string>

#include "core/model/flat_map.h"

namespace memtl {

namespace {
std::string Hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}
}  // namespace

AllocationSummary CheckAllocations(const Trace& trace, Diagnostics& diag) {
  AllocationSummary s;
  // Per (pointer, device): the live allocation's record (its size is
  // there), or kFreed. A 4-byte value keeps a slot at 16 bytes instead of
  // 24: the map holds every pointer the trace allocates or frees, and was
  // a tenth of a 10^5-event export's peak.
  constexpr uint32_t kFreed = kNone32;
  PtrDevMap<uint32_t> state;
  for (uint32_t ei = 0; ei < trace.events.size(); ++ei) {
    const Event& e = trace.events[ei];
    if (e.kind != EventKind::kAlloc) continue;
    const AllocInfo& a = trace.allocs[e.payload];
    const uint64_t ptr = trace.alloc_ptrs[e.payload];
    // Built only for a diagnostic: most events have none.
    auto where = [&] {
      return Hex(ptr) + " on " + trace.devices[a.device].name +
             " at t=" + std::to_string(trace.event_t0[ei]);
    };
    if (a.bytes > 0) {
      ++s.allocations;
      *state.try_emplace(ptr, a.device, kFreed).first = e.payload;
      continue;
    }
    if (a.bytes == 0) {
      diag.Add("allocation event of 0 bytes", where());
      continue;
    }
    ++s.frees;
    auto [live, inserted] = state.try_emplace(ptr, a.device, kFreed);
    if (inserted) {
      ++s.preexisting_frees;  // allocated before profiling began
      continue;
    }
    if (*live == kFreed) {
      diag.Add("double free", where());
    } else if (const int64_t allocated = trace.allocs[*live].bytes; allocated != -a.bytes) {
      diag.Add("free size differs from its allocation", where() + ": " + std::to_string(allocated) +
                                                            " allocated, " +
                                                            std::to_string(-a.bytes) + " freed");
    }
    *live = kFreed;
  }
  return s;
}

}  // namespace memtl

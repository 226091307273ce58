// Allocation checks in event (pre-order) order per (pointer, device).
#include "core/checks/allocation_checks.h"

#include <cstdio>
#include <string>
#include <unordered_map>

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
  struct State {
    int64_t bytes = 0;  // > 0 live with this size; 0 freed
  };
  std::unordered_map<uint64_t, State> state;  // key: ptr ^ device
  auto key = [](const AllocInfo& a) { return a.ptr * 0x9E3779B97F4A7C15ull ^ a.device; };
  for (const auto& e : trace.events) {
    if (e.kind != EventKind::kAlloc) continue;
    const AllocInfo& a = trace.allocs[e.payload];
    const std::string where =
        Hex(a.ptr) + " on " + trace.devices[a.device].name + " at t=" + std::to_string(e.t0);
    if (a.bytes > 0) {
      ++s.allocations;
      state[key(a)].bytes = a.bytes;
      continue;
    }
    if (a.bytes == 0) {
      diag.Add("allocation event of 0 bytes", where);
      continue;
    }
    ++s.frees;
    auto it = state.find(key(a));
    if (it == state.end()) {
      ++s.preexisting_frees;  // allocated before profiling began
      state[key(a)].bytes = 0;
      continue;
    }
    if (it->second.bytes == 0) {
      diag.Add("double free", where);
    } else if (it->second.bytes != -a.bytes) {
      diag.Add("free size differs from its allocation",
               where + ": " + std::to_string(it->second.bytes) + " allocated, " +
                   std::to_string(-a.bytes) + " freed");
    }
    it->second.bytes = 0;
  }
  return s;
}

}  // namespace memtl

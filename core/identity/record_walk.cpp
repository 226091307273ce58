#include "core/identity/record_walk.h"

#include <algorithm>

#include "core/identity/identity.h"

namespace memtl {

namespace identity {

bool RecordBefore(const Trace& trace, uint32_t a, uint32_t b) {
  const auto& ea = trace.events[a];
  const auto& eb = trace.events[b];
  const int64_t ta = trace.event_t0[a], tb = trace.event_t0[b];
  if (ta != tb) return ta < tb;
  return Rank(ea.kind) < Rank(eb.kind);
}

}  // namespace identity

std::vector<uint32_t> RecordOrder(const Trace& trace) {
  std::vector<uint32_t> order;
  order.reserve(trace.events.size());
  for (uint32_t i = 0; i < trace.events.size(); ++i) {
    if (identity::Rank(trace.events[i].kind) < 3) order.push_back(i);
  }
  auto before = [&](uint32_t a, uint32_t b) { return identity::RecordBefore(trace, a, b); };
  if (!std::is_sorted(order.begin(), order.end(), before))
    std::stable_sort(order.begin(), order.end(), before);
  return order;
}

}  // namespace memtl

// The dense key index: every distinct TensorKey of the trace gets a slot, in
// TensorKey order. Identity gives each allocation id exactly one (tensor id,
// device), so a vector indexed by allocation id finds a key's slot without
// hashing; keys that break that rule (possible with producer ids) fall back
// to a hash map.
#include <algorithm>

#include "core/identity/identity.h"
#include "core/model/flat_map.h"
#include "core/model/large_array.h"

namespace memtl {

void BuildKeyTable(Trace& trace) {
  KeyTable& kt = trace.key_table;
  kt = KeyTable{};
  AssignLarge(kt.of_tensor, trace.tensors.size(), kNone32);
  AssignLarge(kt.of_alloc, trace.allocs.size(), kNone32);
  // Provisional slots in order of first sighting.
  std::vector<TensorKey> found;
  const size_t direct_limit = 4 * (trace.tensors.size() + trace.allocs.size()) + 1024;
  std::vector<uint32_t> by_aid;
  // Upper bounds, so that neither is regrown (untouched capacity is address
  // space, not memory).
  ReserveLarge(found, trace.tensors.size() + trace.allocs.size());
  ReserveLarge(by_aid, direct_limit);
  FlatMap<TensorKey, uint32_t, TensorKeyHash> others;
  auto slot_of = [&](TensorId id, AllocationId aid, DeviceIndex device) -> uint32_t {
    if (!id.valid() || !aid.valid()) return kNone32;
    const TensorKey key = trace.KeyOf(id, aid, device);
    const auto a = static_cast<uint64_t>(aid.value());
    if (a < direct_limit) {
      if (a >= by_aid.size()) by_aid.resize(std::max<size_t>(a + 1, by_aid.size() * 2), kNone32);
      uint32_t& s = by_aid[a];
      if (s == kNone32) {
        s = static_cast<uint32_t>(found.size());
        found.push_back(key);
        return s;
      }
      if (found[s] == key) return s;
    }
    auto [s, inserted] = others.try_emplace(key, static_cast<uint32_t>(found.size()));
    if (inserted) found.push_back(key);
    return *s;
  };
  for (size_t i = 0; i < trace.tensors.size(); ++i) {
    const Tensor& t = trace.tensors[i];
    if (!t.partial) kt.of_tensor[i] = slot_of(t.id, t.allocation, t.device);
  }
  for (size_t i = 0; i < trace.allocs.size(); ++i) {
    const AllocInfo& a = trace.allocs[i];
    kt.of_alloc[i] = slot_of(a.id, a.allocation, a.device);
  }
  // Renumber in TensorKey order.
  std::vector<uint32_t> order(found.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return found[a] < found[b]; });
  std::vector<uint32_t> rank(found.size());
  kt.keys.resize(found.size());
  for (uint32_t i = 0; i < order.size(); ++i) {
    rank[order[i]] = i;
    kt.keys[i] = found[order[i]];
  }
  for (auto& s : kt.of_tensor) {
    if (s != kNone32) s = rank[s];
  }
  for (auto& s : kt.of_alloc) {
    if (s != kNone32) s = rank[s];
  }
  // Tensor ids in key order are non-decreasing: number them as they change.
  kt.id_slot.resize(kt.keys.size());
  for (size_t i = 0; i < kt.keys.size(); ++i) {
    if (i == 0 || kt.keys[i].id != kt.keys[i - 1].id) ++kt.num_ids;
    kt.id_slot[i] = kt.num_ids - 1;
  }
}

}  // namespace memtl

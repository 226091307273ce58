// The blocks the join maps without an op around them (et_join_impl.h):
// those that code torch.compile generated allocates (Join::MapCompiled) and
// those allocated before the profile that it frees (Join::MapFreedBefore).
#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/read/et/et_join_impl.h"

namespace memtl::et_join_detail {

bool Join::InCompiledRegion(uint32_t e) const {
  for (uint32_t p = t_.events[e].parent; p != kNone32; p = t_.events[p].parent) {
    if (t_.events[p].kind != EventKind::kOp) continue;
    const std::string_view name = t_.strings.Get(t_.ops[t_.events[p].payload].name);
    if (name.starts_with("## Call CompiledFxGraph") || name.starts_with("Torch-Compiled Region") ||
        name == "CompiledFunction" || name == "CompiledFunctionBackward")
      return true;
  }
  return false;
}

size_t Join::MapCompiled(const std::vector<uint32_t>& allocs,
                         const std::vector<uint32_t>& free_of) {
  if (allocs.empty()) return 0;
  struct Unmapped {
    uint64_t storage;
    uint32_t first, last;  // reads' positions
    int64_t bytes;
    uint32_t device;  // string id
  };
  std::unordered_map<uint64_t, const EtTensor*> tensor_of;
  for (const EtTensor& tensor : et_.tensors)
    if (HasData(tensor)) {
      const EtTensor*& t = tensor_of[tensor.storage_id];
      if (t == nullptr || t->extent < tensor.extent) t = &tensor;
    }
  std::vector<Unmapped> unmapped;
  for (const auto& [storage, at] : reads_) {
    if (addr_of_.contains(storage) || creations_.contains(storage)) continue;
    const auto it = tensor_of.find(storage);
    if (it == tensor_of.end()) continue;
    unmapped.push_back({storage, at.front(), at.back(), it->second->extent, it->second->device});
  }
  // Read first, taken first: among storages that fit the same blocks
  // alike, the order of the reads is the only evidence left.
  std::sort(unmapped.begin(), unmapped.end(), [](const Unmapped& x, const Unmapped& y) {
    return std::tie(x.first, x.storage) < std::tie(y.first, y.storage);
  });
  std::vector<bool> taken(unmapped.size(), false);
  size_t mapped = 0;
  for (const uint32_t e : allocs) {
    const AllocInfo& a = t_.allocs[t_.events[e].payload];
    const std::string& device = t_.devices[a.device].name;
    const uint32_t begin = time_pos_[e] + 1;
    const uint32_t end =
        free_of[e] != kNone32 ? time_pos_[free_of[e]] : static_cast<uint32_t>(t_.events.size());
    // Only storages first read inside the block: from the first read at
    // or after its allocation until one at or after its free.
    size_t best = unmapped.size();
    const auto from = std::lower_bound(unmapped.begin(), unmapped.end(), begin,
                                       [](const Unmapped& u, uint32_t p) { return u.first < p; });
    for (size_t i = static_cast<size_t>(from - unmapped.begin());
         i < unmapped.size() && unmapped[i].first < end; ++i) {
      const Unmapped& u = unmapped[i];
      if (taken[i] || u.bytes > a.bytes || u.last >= end) continue;
      const std::string& d = et_.strings.Get(u.device);
      if ((d.empty() ? "cpu" : d) != device) continue;
      if (best == unmapped.size() || (u.bytes == a.bytes && unmapped[best].bytes != a.bytes))
        best = i;
      if (u.bytes == a.bytes) break;
    }
    if (best == unmapped.size()) continue;
    taken[best] = true;
    addr_of_.emplace(unmapped[best].storage, t_.alloc_ptrs[t_.events[e].payload]);
    ++mapped;
  }
  return mapped;
}

void Join::MapFreedBefore(const std::vector<uint32_t>& frees) {
  if (frees.empty()) return;
  struct Need {
    int64_t bytes = 0;
    uint32_t device = 0;  // string id
  };
  std::unordered_map<uint64_t, Need> need;
  for (const EtTensor& tensor : et_.tensors) {
    if (!HasData(tensor)) continue;
    Need& n = need[tensor.storage_id];
    n.bytes = std::max(n.bytes, tensor.extent);
    n.device = tensor.device;
  }
  // The candidates by (device name, bytes).
  std::map<std::pair<std::string, int64_t>, std::vector<uint64_t>> by_size;
  for (const auto& [storage, at] : reads_) {
    if (addr_of_.contains(storage) || creations_.contains(storage)) continue;
    const auto it = need.find(storage);
    if (it == need.end()) continue;
    const std::string& device = et_.strings.Get(it->second.device);
    by_size[{device.empty() ? "cpu" : device, it->second.bytes}].push_back(storage);
  }
  for (const uint32_t f : frees) {
    const AllocInfo& a = t_.allocs[t_.events[f].payload];
    const auto bucket = by_size.find({t_.devices[a.device].name, -int64_t{a.bytes}});
    if (bucket == by_size.end()) continue;
    uint64_t found = 0;
    int fits = 0;
    for (const uint64_t storage : bucket->second) {
      if (addr_of_.contains(storage) || reads_.at(storage).back() >= time_pos_[f]) continue;
      found = storage;
      ++fits;
    }
    if (fits == 1) addr_of_.emplace(found, t_.alloc_ptrs[t_.events[f].payload]);
  }
}

}  // namespace memtl::et_join_detail

// Steps 5 and 6 of identity (identity.cpp).
#include <algorithm>

#include "core/identity/steps.h"
#include "core/model/large_array.h"

namespace memtl::identity {

std::vector<int32_t> CoalesceIds(const RecordWalk& walk, const std::vector<uint32_t>& tensor_aid,
                                 const std::vector<uint32_t>* impls, uint32_t num_aids,
                                 uint64_t num_impls) {
  // Step 5: the first allocation id of each impl paired with every later
  // one; PyTorch sorts the pairs and walks them in order. Most pairs are an
  // allocation id with itself: those are kept as a bit per id (their sorted
  // order is the id order), the rest are sorted.
  std::vector<bool> self_pair(num_aids, false);
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  {
    std::vector<uint32_t> first_aid(num_impls, 0);  // 0: none yet (ids start at 1)
    walk.ForEachRaw(tensor_aid, impls, [&](uint32_t, uint32_t impl, uint32_t aid) {
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
  return id_of;
}

}  // namespace memtl::identity

// The steps of identity (identity.cpp) that have a file of their own,
// for the orchestrator; step 1, the record order, is record_walk.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/identity/identity.h"
#include "core/identity/record_walk.h"
#include "core/model/ptr_dev_map.h"
#include "core/model/trace.h"
#include "core/schema/schema.h"

namespace memtl::identity {

// Step 2: gives each observation and allocation its allocation id, in record
// order: a (storage pointer, device) gets a fresh id at its first sighting
// and keeps it until a free of that pointer is seen (this solves ABA for
// storage).
class Flattener {
 public:
  // `tensor_aid` and `alloc_aid` (sized like records.tensors and trace.allocs,
  // zero) receive each target's allocation id; `tensor_ptrs`: the storage
  // pointer per tensor observation.
  Flattener(const Trace& trace, const TensorRecords& records,
            const std::vector<uint64_t>& tensor_ptrs, std::vector<uint32_t>* tensor_aid,
            std::vector<uint32_t>* alloc_aid, const StorageSplits& splits)
      : trace_(trace),
        records_(records),
        tensor_ptrs_(tensor_ptrs),
        tensor_aid_(*tensor_aid),
        alloc_aid_(*alloc_aid),
        splits_(splits),
        next_split_aid_(static_cast<uint32_t>(splits.first_new_id)) {
    alloc_event_of_aid_.reserve(records.tensors.size() + trace.allocs.size() + 1);  // never regrown
  }
  // One more than the largest allocation id given (split storages' ids
  // included).
  uint32_t num_aids() const { return std::max(next_aid_, next_split_aid_); }
  size_t num_splits() const { return num_splits_; }
  // Per split: the earlier storage's allocation id and the allocation
  // event that reused its address.
  std::vector<std::pair<int64_t, uint32_t>> TakeEnds() { return std::move(ends_); }
  // One more than the largest impl number seen: Trace::num_impls, unless a
  // trace not built by the reader left that short.
  uint64_t impl_bound() const { return impl_bound_; }
  // Per allocation id, the event that allocated it (kNone32: only freed).
  std::vector<uint32_t> TakeAllocEvents() {
    alloc_event_of_aid_.resize(num_aids(), kNone32);
    return std::move(alloc_event_of_aid_);
  }

  void Tensor(uint32_t ti) {
    const auto& t = records_.tensors[ti];
    impl_bound_ = std::max<uint64_t>(impl_bound_, uint64_t{t.impl} + 1);
    tensor_aid_[ti] = Aid(tensor_ptrs_[ti], t.device, false);
  }

  void Alloc(uint32_t ei) {
    const uint32_t payload = trace_.events[ei].payload;
    const AllocInfo& a = trace_.allocs[payload];
    event_ = ei;
    const uint32_t aid = Aid(records_.alloc_ptrs[payload], a.device, a.bytes<0, a.bytes> 0);
    alloc_aid_[payload] = aid;
    if (a.bytes >= 0) {
      if (aid >= alloc_event_of_aid_.size()) alloc_event_of_aid_.resize(aid + 1, kNone32);
      if (alloc_event_of_aid_[aid] == kNone32) alloc_event_of_aid_[aid] = ei;
    }
  }

 private:
  uint32_t Aid(uint64_t ptr, DeviceIndex device, bool is_free, bool is_allocation = false) {
    auto [aid, inserted] = live_.try_emplace(ptr, device, next_aid_);
    next_aid_ += inserted ? 1 : 0;
    // A storage of `splits_` (or one split from it: each reuse while live
    // starts another), allocated again while live.
    if (!inserted && is_allocation && !splits_.empty() &&
        (splits_.Contains(*aid) || *aid >= splits_.first_new_id)) {
      ends_.emplace_back(*aid, event_);
      *aid = next_split_aid_++;
      ++num_splits_;
    }
    const uint32_t result = *aid;
    if (is_free) live_.erase(ptr, device);
    return result;
  }

  const Trace& trace_;
  const TensorRecords& records_;
  const std::vector<uint64_t>& tensor_ptrs_;
  std::vector<uint32_t>& tensor_aid_;
  std::vector<uint32_t>& alloc_aid_;
  PtrDevMap<uint32_t> live_;
  const StorageSplits& splits_;
  uint32_t next_aid_ = 1;
  uint32_t next_split_aid_ = 0;
  size_t num_splits_ = 0;
  uint32_t event_ = 0;  // the allocation event Aid is called for
  std::vector<std::pair<int64_t, uint32_t>> ends_;
  uint64_t impl_bound_ = 1;
  std::vector<uint32_t> alloc_event_of_aid_;
};

// Step 3 (1.13 only; dealias.cpp): splits TensorImpl addresses reused across
// allocations into distinct identities, writing each observation's new impl
// number to `virtual_impl` (per tensor; 0: no impl). Returns the number of
// identities (impls are renumbered 1..n). `alloc_event_of_aid`: per
// allocation id, the event that allocated it; `tensor_aid`: per tensor
// observation, its allocation id (0: none).
uint64_t DealiasImpls(const Trace& trace, const SchemaRegistry& schemas, const RecordWalk& walk,
                      uint64_t impl_bound, const std::vector<uint32_t>& alloc_event_of_aid,
                      const std::vector<uint32_t>& tensor_aid, std::vector<uint32_t>& virtual_impl,
                      IdentityStats& stats);

// Steps 5 and 6 (coalesce.cpp): the tensor id of each allocation id (-1:
// none, the ids step 4 dropped), from the allocation ids seen with each
// TensorImpl, coalesced by PyTorch's greedy walk over the sorted pairs.
// `impls`: step 3's numbers per observation (1.13), or null for the
// reader's (Tensor::impl).
std::vector<int32_t> CoalesceIds(const RecordWalk& walk, const std::vector<uint32_t>& tensor_aid,
                                 const std::vector<uint32_t>* impls, uint32_t num_aids,
                                 uint64_t num_impls);

}  // namespace memtl::identity

// The key table: identity's result (AssignIdentity returns it; the pipeline
// owns it beside the Trace, which identity only reads it from). Every stage
// after identity that needs a tensor's key takes it by const reference.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/model/ids.h"
#include "core/model/records.h"

namespace memtl {

// A dense index of the TensorKeys identity produced, so that later stages
// keep arrays indexed by key slot instead of hash maps keyed by TensorKey.
// Slots are numbered in TensorKey order (id, allocation id, device rank), so
// comparing slots compares keys.
struct KeyTable {
  std::vector<TensorKey> keys;      // by slot, sorted, distinct
  std::vector<uint32_t> of_tensor;  // per trace tensor: its slot, or kNone32
  std::vector<uint32_t> of_alloc;   // per allocation event: its slot, or kNone32
  std::vector<uint32_t> id_slot;    // per slot: dense index of keys[slot].id
  uint32_t num_ids = 0;

  uint32_t size() const { return static_cast<uint32_t>(keys.size()); }
  // The slot of a tensor observation (kNone32 allowed: an absent tensor) or
  // of an allocation event; kNone32 when identity gave it no key.
  uint32_t SlotOfTensor(uint32_t tensor) const {
    return tensor == kNone32 ? kNone32 : of_tensor[tensor];
  }
  uint32_t SlotOfAlloc(uint32_t alloc) const { return of_alloc[alloc]; }
  // The slot of `key`, or kNone32 (a binary search; for tests and tools).
  uint32_t Find(const TensorKey& key) const {
    const auto it = std::lower_bound(keys.begin(), keys.end(), key);
    return it != keys.end() && *it == key ? static_cast<uint32_t>(it - keys.begin()) : kNone32;
  }
};

}  // namespace memtl

// How identity fills the dense key index (KeyTable, core/model/key_table.h),
// which it returns as its result: each
// tensor observation and allocation that has both ids is given to the
// builder, in any order; Finish() numbers the distinct TensorKeys in key
// order and rewrites every slot accordingly. Identity gives each allocation
// id exactly one (tensor id, device), so a vector indexed by allocation id
// finds a key's slot without hashing; keys that break that rule (possible
// with producer ids) fall back to a hash map.
#pragma once

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/model/key_table.h"
#include "core/model/trace.h"

namespace memtl {

// Identity without producer ids gives every allocation id one key: (its
// tensor id, itself, its device). `tensor_aid` and `alloc_aid` (per tensor
// observation and allocation: its allocation id, 0 for none) are rewritten
// in place into the returned table's slot arrays; `id_of` gives each
// allocation id's tensor id (-1: no key).
KeyTable BuildKeyTableFromAids(const Trace& trace, const TensorRecords& records,
                               std::vector<uint32_t> tensor_aid, std::vector<uint32_t> alloc_aid,
                               const std::vector<int32_t>& id_of);

class KeyTableBuilder {
 public:
  // Starts a table in which no observation or allocation has a slot.
  KeyTableBuilder(const Trace& trace, const TensorRecords& records);
  // Tensor observation / allocation `i` has these ids (invalid: no slot).
  // Partial tensors (torch 1.13 python-tracer addresses) never get one.
  void Tensor(uint32_t i, TensorId id, AllocationId aid);
  void Alloc(uint32_t i, TensorId id, AllocationId aid);
  // The table, its slots in key order.
  KeyTable Finish();

 private:
  uint32_t SlotOf(TensorId id, AllocationId aid, DeviceIndex device);

  const Trace& trace_;
  const TensorRecords& records_;
  KeyTable kt_;
  const size_t direct_limit_;
  std::vector<TensorKey> found_;  // provisional slots, in order of first sighting
  std::vector<uint32_t> by_aid_;  // allocation id -> provisional slot
  absl::flat_hash_map<TensorKey, uint32_t, TensorKeyHash> others_;
};

}  // namespace memtl

// Identity assignment: gives every tensor observation and allocation event a
// TensorId and AllocationId, as PyTorch 2.x's calculateUniqueTensorIDs
// (torch/csrc/profiler/data_flow.cpp) does, plus the conventions that make a
// torch 1.13 trace (which records no ids) give the answers 2.x would give.
// See docs/architecture.md, "Identity".
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/model/diagnostics.h"
#include "core/model/key_table.h"
#include "core/model/trace.h"
#include "core/schema/schema.h"

namespace memtl {

struct IdentityStats {
  size_t raw_tensors = 0;      // observations that took part
  size_t dealiased_impls = 0;  // 1.13 impl addresses split into new identities
  size_t id_mismatches = 0;    // producer ids that differ from the computed ones
  size_t split_storages = 0;   // new storages made by StorageSplits
  // One more than the largest allocation id of the trace, computed or
  // given: where a StorageSplits of this trace may start numbering.
  int64_t allocation_id_bound = 1;
};

// Storages that identity splits in two where an allocation reuses their
// address while they are live. PyTorch keeps one allocation id per
// (address, device) until a free is recorded, and its CPU allocator records
// no free of a block allocated before the profile; a storage freed so and
// then mutated, whose address is allocated again, breaks its data-flow
// graph ("version mismatch"). The pipeline asks for the split only for the
// keys whose graph broke so (DataFlowGraph::Build's reused storages), so
// every trace PyTorch answers keeps PyTorch's ids. docs/categories.md,
// "Storages freed unseen".
struct StorageSplits {
  std::vector<int64_t> allocation_ids;  // sorted: the keys' allocation ids
  int64_t first_new_id = 0;             // ids of the new storages count up from here
  bool empty() const { return allocation_ids.empty(); }
  bool Contains(int64_t aid) const {
    return std::binary_search(allocation_ids.begin(), allocation_ids.end(), aid);
  }
};

// Identity's result: the key table every later stage reads, and counts.
struct [[nodiscard]] IdentityResult {
  KeyTable keys;
  IdentityStats stats;
};

// Computes the ids and returns them as the key table; the trace is only
// read. When it carries producer ids they are kept and the computed ones
// only checked against them (mismatches are counted in `diag`).
// `records`: the trace's tensor observations and allocation addresses
// (TakeTensorRecords). `tensor_ptrs`: the storage pointer per tensor
// observation (Trace::tensor_ptrs, which the pipeline hands over, as
// nothing after identity reads them); identity frees them once its first
// steps have read them, before its largest arrays are made.
// `splits`: storages to split (none on a first analysis).
IdentityResult AssignIdentity(const Trace& trace, const TensorRecords& records,
                              std::vector<uint64_t> tensor_ptrs, const SchemaRegistry& schemas,
                              Diagnostics& diag, const StorageSplits& splits = {});

// The key table of ids per tensor observation and per allocation (parallel
// to records.tensors and trace.allocs; an empty vector: none have ids).
// AssignIdentity calls it with the ids it settled on.
KeyTable BuildKeyTable(const Trace& trace, const TensorRecords& records,
                       const std::vector<ProducerIds>& tensor_ids,
                       const std::vector<ProducerIds>& alloc_ids);

// The event order PyTorch 2.x assigns ids in: a stable sort by start time of
// torch ops, then allocations, then python calls (ties: that rank, then
// pre-order). Other events are left out.
std::vector<uint32_t> RecordOrder(const Trace& trace);

}  // namespace memtl

// Identity assignment: gives every tensor observation and allocation event a
// TensorId and AllocationId, as PyTorch 2.x's calculateUniqueTensorIDs
// (torch/csrc/profiler/data_flow.cpp) does, plus the conventions that make a
// torch 1.13 trace (which records no ids) give the answers 2.x would give.
// See docs/architecture.md, "Identity".
#pragma once

#include "core/model/diagnostics.h"
#include "core/model/key_table.h"
#include "core/model/trace.h"
#include "core/schema/schema.h"

namespace memtl {

struct IdentityStats {
  size_t raw_tensors = 0;      // observations that took part
  size_t dealiased_impls = 0;  // 1.13 impl addresses split into new identities
  size_t id_mismatches = 0;    // producer ids that differ from the computed ones
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
IdentityResult AssignIdentity(const Trace& trace, const TensorRecords& records,
                              std::vector<uint64_t> tensor_ptrs, const SchemaRegistry& schemas,
                              Diagnostics& diag);

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

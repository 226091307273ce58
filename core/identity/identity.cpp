// Port of calculateUniqueTensorIDs with the torch 1.13 conventions: the
// orchestrator, as long as PyTorch's; steps with more than a few lines have
// a file of their own (steps.h says which).
//
// Identity reads the Trace and writes nothing into it: its result is the
// key table. (torch 1.13's python-tracer tensors, known by their storage
// address only, were given an op input's metadata by the reader:
// core/read/memtl/partial_tensors.h.)
//
// Steps, in order (each one reads only what the previous ones wrote):
//   1. flatten every tensor observation and allocation in record order;
//   2. allocation ids: (storage pointer, device) -> fresh id until freed;
//   3. (1.13) split reused TensorImpl addresses into distinct identities;
//   4. drop allocations that no tensor was ever seen with;
//   5. pair the allocation ids seen with each TensorImpl;
//   6. coalesce the sorted pairs greedily into tensor ids (PyTorch's exact
//      greedy walk, not a full union-find: its answers are the reference);
//   7. observations whose storage pointer is null get no key.
//
// Step 7 is the memory profiler's rule, not the id assignment's: PyTorch's
// C++ gives a tensor without storage (torch.empty(0) as `out=`, the empty
// result a unary op makes before resizing it, an undefined gradient) ids
// like any other, so it still takes part in steps 2-6, but
// TensorKey._make returns None for a null storage pointer: such a tensor
// joins no edge, has no size, bumps no version and matches a Tensor schema
// argument only where None would (the op tree treats a tensor without a
// key as None). Known to differ: a real storage at address 0 is impossible
// on the allocators PyTorch ships, so null means "no storage" here too.
#include "core/identity/identity.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "core/identity/key_table_builder.h"
#include "core/identity/record_walk.h"
#include "core/identity/steps.h"
#include "core/model/large_array.h"

namespace memtl {

using identity::CoalesceIds;
using identity::DealiasImpls;
using identity::Flattener;
using identity::RecordWalk;

namespace {

// Identity gives keys only to traces with fewer tensor observations and
// allocations together: key slots then fit the graph's 30-bit edge field
// (FlowEdge::key).
constexpr size_t kMaxTargets = size_t{1} << 30;

// The producer's ids of tensor observation or allocation `i` (invalid
// where the trace has none: a trace built otherwise than by the reader
// may lack entries).
ProducerIds Given(const std::vector<ProducerIds>& ids, size_t i) {
  return i < ids.size() ? ids[i] : ProducerIds{};
}

// The key table with the ends of split storages: (the earlier storage's
// allocation id, the allocation event that reused its address) become
// (its key slot, that event). An allocation id names one key.
KeyTable WithUnseenEnds(KeyTable kt, const std::vector<std::pair<int64_t, uint32_t>>& ends) {
  if (ends.empty()) return kt;
  absl::flat_hash_map<int64_t, KeySlot> slot_of;
  for (const auto& [aid, _] : ends) slot_of.emplace(aid, KeySlot());
  for (KeySlot k : kt.slots()) {
    if (auto it = slot_of.find(kt[k].allocation.value()); it != slot_of.end()) it->second = k;
  }
  for (const auto& [aid, event] : ends) {
    if (const KeySlot k = slot_of[aid]; k.valid()) kt.ended_unseen.push_back({k, event});
  }
  return kt;
}

// Steps 1 and 2's result. Each observation's and allocation's allocation id
// is kept by target (0: none; a visited observation has one, from 1); the
// legacy key table is built in these arrays.
struct Flattened {
  std::vector<uint32_t> tensor_aid, alloc_aid;
  uint32_t num_aids = 0;
  uint64_t impl_bound = 1;
  std::vector<uint32_t> alloc_event_of_aid;
  std::vector<std::pair<int64_t, uint32_t>> ends;  // of split storages
};

// Steps 1 and 2.
Flattened FlattenRecords(const Trace& trace, const TensorRecords& records,
                         const std::vector<uint64_t>& tensor_ptrs, const RecordWalk& walk,
                         bool legacy, const StorageSplits& splits, IdentityStats& stats) {
  Flattened f;
  f.tensor_aid.assign(records.tensors.size(), 0);
  f.alloc_aid.assign(trace.allocs.size(), 0);
  // With producer ids the computed ids are only compared: the split is
  // made on the producer's (ProducerKeys).
  static const StorageSplits kNoSplits;
  Flattener flat(trace, records, tensor_ptrs, &f.tensor_aid, &f.alloc_aid,
                 legacy ? splits : kNoSplits);
  walk.Run([&](uint32_t ti) { flat.Tensor(ti); }, [&](uint32_t ei) { flat.Alloc(ei); });
  f.num_aids = flat.num_aids();
  stats.split_storages = flat.num_splits();
  f.ends = flat.TakeEnds();
  stats.allocation_id_bound = f.num_aids;
  f.impl_bound = std::max<uint64_t>(trace.num_impls, flat.impl_bound());
  f.alloc_event_of_aid = flat.TakeAllocEvents();
  return f;
}

// With producer ids, the computed allocation ids are only compared.
void CompareAllocationIds(const Trace& trace, const TensorRecords& records, const Flattened& f,
                          IdentityStats& stats) {
  // One past the largest id, saturated: an id from a trace may be the
  // largest int64 (no overflow before the checks).
  auto past = [](AllocationId a) {
    return a.value() < std::numeric_limits<int64_t>::max() ? a.value() + 1 : a.value();
  };
  for (const ProducerIds& ids : records.tensor_ids)
    stats.allocation_id_bound = std::max(stats.allocation_id_bound, past(ids.allocation));
  for (const ProducerIds& ids : trace.alloc_ids)
    stats.allocation_id_bound = std::max(stats.allocation_id_bound, past(ids.allocation));
  for (size_t i = 0; i < f.tensor_aid.size(); ++i) {
    if (f.tensor_aid[i] != 0 &&
        Given(records.tensor_ids, i).allocation != AllocationId(f.tensor_aid[i]))
      ++stats.id_mismatches;
  }
  for (size_t i = 0; i < f.alloc_aid.size(); ++i) {
    if (Given(trace.alloc_ids, i).allocation != AllocationId(f.alloc_aid[i])) ++stats.id_mismatches;
  }
}

// Producer ids: they are kept; disagreements are counted (over the
// observations and allocations step 4 kept).
void CompareTensorIds(const Trace& trace, const TensorRecords& records, const Flattened& f,
                      const std::vector<bool>& tensor_aids, const std::vector<int32_t>& id_of,
                      Diagnostics& diag, IdentityStats& stats) {
  auto compare = [&](uint32_t aid, const ProducerIds& given) {
    if (aid != 0 && tensor_aids[aid] && TensorId(id_of[aid]) != given.id) ++stats.id_mismatches;
  };
  for (size_t i = 0; i < f.tensor_aid.size(); ++i)
    compare(f.tensor_aid[i], Given(records.tensor_ids, i));
  for (size_t i = 0; i < f.alloc_aid.size(); ++i)
    compare(f.alloc_aid[i], Given(trace.alloc_ids, i));
  if (stats.id_mismatches > 0) {
    diag.Add("producer ids differ from memtl's",
             std::to_string(stats.id_mismatches) +
                 " tensor or allocation ids differ; the producer's are used");
  }
}

// The storages to split get new allocation ids from where an allocation
// reuses their address while they are live (-1: the producer's id), per
// observation and per allocation; each split's end is added to `ends`.
struct ProducerSplits {
  std::vector<int64_t> tensor, alloc;
};
ProducerSplits SplitProducerStorages(const Trace& trace, const TensorRecords& records,
                                     const RecordWalk& walk, const StorageSplits& splits,
                                     const std::vector<bool>& null_storage,
                                     std::vector<std::pair<int64_t, uint32_t>>& ends,
                                     IdentityStats& stats) {
  ProducerSplits out;
  if (splits.empty()) return out;
  out.tensor.assign(records.tensors.size(), -1);
  out.alloc.assign(trace.allocs.size(), -1);
  absl::flat_hash_map<int64_t, std::pair<int64_t, bool>> now;  // aid -> (id given, live)
  int64_t next = splits.first_new_id;
  uint32_t alloc_event = 0;  // the allocation event `see` is called for
  auto see = [&](int64_t aid, bool allocation, bool free) -> int64_t {
    auto [it, fresh] = now.try_emplace(aid, aid, false);
    auto& [given, live] = it->second;
    if (allocation && live && !fresh) {
      ends.emplace_back(given, alloc_event);
      given = next++;
      ++stats.split_storages;
    }
    live = !free;
    return given;
  };
  walk.Run(
      [&](uint32_t ti) {
        const int64_t aid = Given(records.tensor_ids, ti).allocation.value();
        if (!null_storage[ti] && splits.Contains(aid)) out.tensor[ti] = see(aid, false, false);
      },
      [&](uint32_t ei) {
        const uint32_t i = trace.events[ei].payload;
        const int64_t aid = Given(trace.alloc_ids, i).allocation.value();
        const int64_t bytes = trace.allocs[i].bytes;
        alloc_event = ei;
        if (splits.Contains(aid)) out.alloc[i] = see(aid, bytes > 0, bytes < 0);
      });
  return out;
}

// The key table of a trace with producer ids: the producer's ids, with
// the split storages' new allocation ids.
KeyTable ProducerKeys(const Trace& trace, const TensorRecords& records, const RecordWalk& walk,
                      const StorageSplits& splits, const std::vector<bool>& null_storage,
                      std::vector<std::pair<int64_t, uint32_t>> ends, IdentityStats& stats) {
  const ProducerSplits split =
      SplitProducerStorages(trace, records, walk, splits, null_storage, ends, stats);
  auto allocation = [](const std::vector<int64_t>& split, uint32_t i, AllocationId given) {
    return i < split.size() && split[i] >= 0 ? AllocationId(split[i]) : given;
  };
  // Step 7: a storage-less tensor's producer ids give it no key.
  KeyTableBuilder keys(trace, records);
  for (uint32_t ti = 0; ti < records.tensors.size(); ++ti) {
    const ProducerIds ids = null_storage[ti] ? ProducerIds{} : Given(records.tensor_ids, ti);
    keys.Tensor(ti, ids.id, allocation(split.tensor, ti, ids.allocation));
  }
  for (uint32_t i = 0; i < trace.allocs.size(); ++i) {
    const ProducerIds ids = Given(trace.alloc_ids, i);
    keys.Alloc(i, ids.id, allocation(split.alloc, i, ids.allocation));
  }
  return WithUnseenEnds(keys.Finish(), ends);
}

}  // namespace

IdentityResult AssignIdentity(const Trace& trace, const TensorRecords& records,
                              std::vector<uint64_t> tensor_ptrs, const SchemaRegistry& schemas,
                              Diagnostics& diag, const StorageSplits& splits) {
  IdentityStats stats;
  // A trace built otherwise than by the reader may lack them: no storage.
  tensor_ptrs.resize(records.tensors.size(), 0);
  const bool legacy = !trace.header.has_ids;
  if (records.tensors.size() + trace.allocs.size() >= kMaxTargets) {
    // Far beyond any machine this runs on (2^30 tensors would be 24 GiB).
    diag.Add("trace too large for tensor identity",
             "2^30 or more tensor observations and allocations; no tensor ids assigned");
    return {BuildKeyTable(trace, records, {}, {}), stats};  // no keys
  }
  // Steps 1 and 2. The storage pointers are not read again.
  const RecordWalk walk(trace, records);
  Flattened f = FlattenRecords(trace, records, tensor_ptrs, walk, legacy, splits, stats);
  // Step 7's input, read before the pointers go (a bit per observation).
  std::vector<bool> null_storage(records.tensors.size(), false);
  for (size_t ti = 0; ti < records.tensors.size(); ++ti) null_storage[ti] = tensor_ptrs[ti] == 0;
  FreeArray(tensor_ptrs);
  for (uint32_t aid : f.tensor_aid) stats.raw_tensors += aid != 0 ? 1 : 0;
  stats.raw_tensors += trace.allocs.size();

  if (!legacy) CompareAllocationIds(trace, records, f, stats);

  // Step 3. Either way impls are numbered 1..num_impls-1 afterwards: the
  // 1.13 split's numbers are per observation in `virtual_impl` (0 where the
  // observation has no impl), which steps 5 and 6 read instead of the
  // reader's Tensor::impl.
  uint64_t num_impls = 0;
  std::vector<uint32_t> virtual_impl;
  const bool dealias = legacy && !trace.header.impls_held;
  if (dealias) {
    virtual_impl.assign(records.tensors.size(), 0);
    num_impls = DealiasImpls(trace, schemas, walk, f.impl_bound, f.alloc_event_of_aid, f.tensor_aid,
                             virtual_impl, stats);
  } else {
    // With producer ids no impl is split: the reader's numbers are the ones
    // to use.
    num_impls = f.impl_bound;
  }
  FreeArray(f.alloc_event_of_aid);

  // Step 4: allocations never seen with a tensor (that has a TensorImpl)
  // are not tensor storage: observations and allocations with those ids get
  // no key. (The split keeps "has an impl": a visited observation with the
  // reader's impl 0 has virtual impl 0, and one with an impl a number from 1.)
  std::vector<bool> tensor_aids(f.num_aids, false);
  for (size_t ti = 0; ti < f.tensor_aid.size(); ++ti) {
    if (f.tensor_aid[ti] != 0 && records.tensors[ti].impl != 0)
      tensor_aids[f.tensor_aid[ti]] = true;
  }

  // Steps 5 and 6.
  const std::vector<int32_t> id_of =
      CoalesceIds(walk, f.tensor_aid, dealias ? &virtual_impl : nullptr, f.num_aids, num_impls);
  FreeArray(virtual_impl);

  if (legacy) {
    // The computed ids go to the key table; the aid arrays become its slot
    // arrays. id_of is -1 exactly for the allocation ids step 4 dropped
    // (step 6 visits the ids of the raws, and no other). Step 7: allocation
    // id 0 is no key.
    for (size_t ti = 0; ti < f.tensor_aid.size(); ++ti) {
      if (null_storage[ti]) f.tensor_aid[ti] = 0;
    }
    return {WithUnseenEnds(BuildKeyTableFromAids(trace, records, std::move(f.tensor_aid),
                                                 std::move(f.alloc_aid), id_of),
                           f.ends),
            stats};
  }

  CompareTensorIds(trace, records, f, tensor_aids, id_of, diag, stats);
  FreeArray(f.tensor_aid);
  FreeArray(f.alloc_aid);
  KeyTable keys =
      ProducerKeys(trace, records, walk, splits, null_storage, std::move(f.ends), stats);
  return {std::move(keys), stats};
}

}  // namespace memtl

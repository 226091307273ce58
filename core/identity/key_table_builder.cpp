// The dense key index (see key_table.h).
#include "core/identity/key_table_builder.h"

#include <algorithm>

#include "core/identity/identity.h"
#include "core/model/large_array.h"

namespace memtl {

namespace {

// Tensor ids in key order are non-decreasing: number them as they change.
void NumberIds(KeyTable& kt) {
  kt.id_slot.resize(kt.keys.size());
  kt.num_ids = 0;
  for (size_t i = 0; i < kt.keys.size(); ++i) {
    if (i == 0 || kt.keys[i].id != kt.keys[i - 1].id) ++kt.num_ids;
    kt.id_slot[i] = kt.num_ids - 1;
  }
}

}  // namespace

KeyTableBuilder::KeyTableBuilder(const Trace& trace, const TensorRecords& records)
    : trace_(trace),
      records_(records),
      direct_limit_(4 * (records.tensors.size() + trace.allocs.size()) + 1024) {
  kt_.of_tensor.assign(records.tensors.size(), kNone32);
  kt_.of_alloc.assign(trace.allocs.size(), kNone32);
  // Upper bounds, so that neither is regrown (untouched capacity is address
  // space, not memory).
  found_.reserve(records.tensors.size() + trace.allocs.size());
  by_aid_.reserve(direct_limit_);
}

uint32_t KeyTableBuilder::SlotOf(TensorId id, AllocationId aid, DeviceIndex device) {
  if (!id.valid() || !aid.valid()) return kNone32;
  const TensorKey key = trace_.KeyOf(id, aid, device);
  const auto a = static_cast<uint64_t>(aid.value());
  if (a < direct_limit_) {
    if (a >= by_aid_.size()) by_aid_.resize(std::max<size_t>(a + 1, by_aid_.size() * 2), kNone32);
    uint32_t& s = by_aid_[a];
    if (s == kNone32) {
      s = static_cast<uint32_t>(found_.size());
      found_.push_back(key);
      return s;
    }
    if (found_[s] == key) return s;
  }
  auto [it, inserted] = others_.try_emplace(key, static_cast<uint32_t>(found_.size()));
  if (inserted) found_.push_back(key);
  return it->second;
}

void KeyTableBuilder::Tensor(uint32_t i, TensorId id, AllocationId aid) {
  if (!records_.tensors[i].partial) kt_.of_tensor[i] = SlotOf(id, aid, records_.tensors[i].device);
}

void KeyTableBuilder::Alloc(uint32_t i, TensorId id, AllocationId aid) {
  kt_.of_alloc[i] = SlotOf(id, aid, trace_.allocs[i].device);
}

KeyTable KeyTableBuilder::Finish() {
  FreeArray(by_aid_);
  others_ = {};
  // Renumber in TensorKey order. The keys are sorted where they lie (a
  // second array of them would be the largest thing identity holds at
  // 10^7 events): rank[provisional slot] = final slot, then every slot is
  // rewritten, then the keys are moved along rank's cycles.
  std::vector<uint32_t> rank;
  {
    std::vector<uint32_t> order(found_.size());
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](uint32_t a, uint32_t b) { return found_[a] < found_[b]; });
    rank.resize(found_.size());
    for (uint32_t i = 0; i < order.size(); ++i) rank[order[i]] = i;
  }
  for (auto& s : kt_.of_tensor) {
    if (s != kNone32) s = rank[s];
  }
  for (auto& s : kt_.of_alloc) {
    if (s != kNone32) s = rank[s];
  }
  for (uint32_t i = 0; i < rank.size(); ++i) {
    while (rank[i] != i) {
      const uint32_t j = rank[i];
      std::swap(found_[i], found_[j]);
      std::swap(rank[i], rank[j]);
    }
  }
  FreeArray(rank);
  kt_.keys = std::move(found_);  // (its untouched reservation is address space only)
  NumberIds(kt_);
  return std::move(kt_);
}

KeyTable BuildKeyTableFromAids(const Trace& trace, const TensorRecords& records,
                               std::vector<uint32_t> tensor_aid, std::vector<uint32_t> alloc_aid,
                               const std::vector<int32_t>& id_of) {
  KeyTable kt;
  // One key per allocation id that has a tensor id: its device is that of
  // any target with the id (an allocation id is minted per storage pointer
  // and device).
  size_t num_keys = 0;
  for (int32_t id : id_of) num_keys += id >= 0 ? 1 : 0;
  kt.keys.reserve(num_keys);  // at most: one per allocation id with a tensor id
  std::vector<uint32_t> slot_of_aid(id_of.size(), kNone32);
  auto add = [&](uint32_t aid, DeviceIndex device) {
    if (aid == 0 || aid >= id_of.size() || id_of[aid] < 0 || slot_of_aid[aid] != kNone32) return;
    slot_of_aid[aid] = static_cast<uint32_t>(kt.keys.size());
    kt.keys.push_back(trace.KeyOf(TensorId(id_of[aid]), AllocationId(aid), device));
  };
  for (size_t i = 0; i < tensor_aid.size(); ++i) add(tensor_aid[i], records.tensors[i].device);
  for (size_t i = 0; i < alloc_aid.size(); ++i) add(alloc_aid[i], trace.allocs[i].device);
  // Slots in key order: each key names its allocation id, which is unique.
  std::sort(kt.keys.begin(), kt.keys.end());
  for (size_t s = 0; s < kt.keys.size(); ++s)
    slot_of_aid[static_cast<size_t>(kt.keys[s].allocation.value())] = static_cast<uint32_t>(s);
  auto to_slots = [&](std::vector<uint32_t>& v) {
    for (auto& a : v) a = a == 0 || a >= slot_of_aid.size() ? kNone32 : slot_of_aid[a];
  };
  to_slots(tensor_aid);
  to_slots(alloc_aid);
  FreeArray(slot_of_aid);
  kt.of_tensor = std::move(tensor_aid);
  kt.of_alloc = std::move(alloc_aid);
  NumberIds(kt);
  return kt;
}

KeyTable BuildKeyTable(const Trace& trace, const TensorRecords& records,
                       const std::vector<ProducerIds>& tensor_ids,
                       const std::vector<ProducerIds>& alloc_ids) {
  KeyTableBuilder b(trace, records);
  for (uint32_t i = 0; i < records.tensors.size() && i < tensor_ids.size(); ++i)
    b.Tensor(i, tensor_ids[i].id, tensor_ids[i].allocation);
  for (uint32_t i = 0; i < trace.allocs.size() && i < alloc_ids.size(); ++i)
    b.Alloc(i, alloc_ids[i].id, alloc_ids[i].allocation);
  return b.Finish();
}

}  // namespace memtl

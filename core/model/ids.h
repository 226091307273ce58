// Strong identifier types for tensors, allocations and versions.
//
// Why tensor identity is hard
// ---------------------------
// A profiler sees raw addresses: the TensorImpl of a tensor and the data
// pointer of its storage. Both are reused constantly. Once a block is freed
// the caching allocator hands the same pointer to the next request, so
// "pointer P" names many unrelated buffers over a run: the ABA problem.
// memtl (like PyTorch's profiler, torch/csrc/profiler/data_flow.cpp) splits
// identity into two levels:
//
//   AllocationId  one live period of one storage buffer: a (pointer, device)
//                 pair gets a fresh id at its first sighting and keeps it until
//                 a free of that pointer is seen. This solves ABA for storage.
//   TensorId      one logical tensor: the allocation ids that a single
//                 TensorImpl was seen with are merged, so that a tensor whose
//                 storage is swapped (resize_, set_, out= arguments) keeps one
//                 id across the swap.
//
// A TensorKey is the pair plus the device; it names one concrete storage of
// one logical tensor and is what the data-flow graph versions. Version counts
// the in-place writes to a TensorKey seen so far (v0 is the first value).
//
// All three are distinct types so that a tensor id can never be passed where
// an allocation id is expected.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>

namespace memtl {

template <typename Tag>
class StrongId {
 public:
  constexpr StrongId() = default;
  constexpr explicit StrongId(int64_t v) : value_(v) {}
  constexpr int64_t value() const { return value_; }
  constexpr bool valid() const { return value_ >= 0; }
  friend constexpr auto operator<=>(StrongId, StrongId) = default;

 private:
  int64_t value_ = -1;  // -1: no id (the producer or identity gave none)
};

struct TensorIdTag {};
struct AllocationIdTag {};
using TensorId = StrongId<TensorIdTag>;
using AllocationId = StrongId<AllocationIdTag>;

// Index into Trace::devices. Ordering between devices is by DeviceTable rank,
// not by this index (see trace.h).
using DeviceIndex = uint16_t;

// A version of a tensor key: v0 is its first value, each in-place write
// makes the next. -1 (None()) is "no version": a key no graph node names.
class Version {
 public:
  constexpr Version() = default;
  constexpr explicit Version(int32_t v) : value_(v) {}
  static constexpr Version None() { return Version(-1); }
  constexpr int32_t value() const { return value_; }
  constexpr bool valid() const { return value_ >= 0; }
  constexpr Version next() const { return Version(value_ + 1); }
  friend constexpr auto operator<=>(Version, Version) = default;

 private:
  int32_t value_ = 0;
};

// A slot of the key table (KeyTable, core/model/key_table.h): identity's
// dense numbering of the TensorKeys, in TensorKey order, so comparing slots
// compares keys. Every stage after identity names a tensor storage by its
// slot and keeps per-key facts in arrays indexed by value(). A distinct
// type, so that a slot is never taken for an event, tensor or value index.
class KeySlot {
 public:
  static constexpr uint32_t kNone = 0xffffffffu;
  constexpr KeySlot() = default;  // no key
  constexpr explicit KeySlot(uint32_t v) : value_(v) {}
  constexpr uint32_t value() const { return value_; }
  constexpr bool valid() const { return value_ != kNone; }
  friend constexpr auto operator<=>(KeySlot, KeySlot) = default;

 private:
  uint32_t value_ = kNone;
};

// A value of the data-flow graph (DataFlowGraph::value): one version of one
// key, in the graph's dense numbering (a key's versions are consecutive).
// The passes and the explaining outputs keep per-value facts in PerValue
// arrays. A distinct type, so that a value is never taken for a key slot.
class ValueIndex {
 public:
  constexpr ValueIndex() = default;
  constexpr explicit ValueIndex(uint32_t v) : value_(v) {}
  constexpr uint32_t value() const { return value_; }
  constexpr ValueIndex next() const { return ValueIndex(value_ + 1); }
  friend constexpr auto operator<=>(ValueIndex, ValueIndex) = default;

 private:
  uint32_t value_ = 0;
};

// One concrete storage of one logical tensor. `device_rank` orders keys the
// way PyTorch sorts TensorKey: (id, allocation id, device type, device index).
struct TensorKey {
  TensorId id;
  AllocationId allocation;
  uint32_t device_rank = 0;
  DeviceIndex device = 0;

  bool operator==(const TensorKey& o) const {
    return id == o.id && allocation == o.allocation && device == o.device;
  }
  bool operator<(const TensorKey& o) const {
    if (id != o.id) return id < o.id;
    if (allocation != o.allocation) return allocation < o.allocation;
    return device_rank < o.device_rank;
  }
};

struct TensorKeyHash {
  size_t operator()(const TensorKey& k) const {
    uint64_t x = static_cast<uint64_t>(k.id.value()) * 0x9E3779B97F4A7C15ull ^
                 static_cast<uint64_t>(k.allocation.value()) * 0xC2B2AE3D27D4EB4Full ^ k.device;
    x ^= x >> 31;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 29;
    return static_cast<size_t>(x);
  }
};

}  // namespace memtl

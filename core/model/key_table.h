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
  std::vector<TensorKey> keys;  // by slot, sorted, distinct
  // Per trace tensor and per allocation event: its slot's value, or
  // KeySlot::kNone. Identity fills them in place from its own arrays; read
  // them through SlotOfTensor and SlotOfAlloc.
  std::vector<uint32_t> of_tensor;
  std::vector<uint32_t> of_alloc;
  std::vector<uint32_t> id_slot;  // per slot: dense index of keys[slot].id
  uint32_t num_ids = 0;
  // Storages that identity split (StorageSplits, core/identity/identity.h):
  // the earlier storage's key and the allocation event whose reuse of its
  // address ends it (its own free went unrecorded). The timeline destroys
  // it there. Empty unless a split was asked for.
  struct UnseenEnd {
    KeySlot key;
    uint32_t event = 0;
  };
  std::vector<UnseenEnd> ended_unseen;

  uint32_t size() const { return static_cast<uint32_t>(keys.size()); }
  const TensorKey& operator[](KeySlot s) const { return keys[s.value()]; }
  // The dense index of slot `s`'s tensor id (0 .. num_ids - 1).
  uint32_t IdIndex(KeySlot s) const { return id_slot[s.value()]; }
  // The slot of a tensor observation (kNone32 allowed: an absent tensor) or
  // of an allocation event; invalid when identity gave it no key.
  KeySlot SlotOfTensor(uint32_t tensor) const {
    return tensor == kNone32 ? KeySlot() : KeySlot(of_tensor[tensor]);
  }
  KeySlot SlotOfAlloc(uint32_t alloc) const { return KeySlot(of_alloc[alloc]); }
  // The slot of `key`, or an invalid one (a binary search; for tests and tools).
  KeySlot Find(const TensorKey& key) const {
    const auto it = std::lower_bound(keys.begin(), keys.end(), key);
    return it != keys.end() && *it == key ? KeySlot(static_cast<uint32_t>(it - keys.begin()))
                                          : KeySlot();
  }

  // Every slot, in order: for (KeySlot k : table.slots()).
  class SlotRange {
   public:
    class Iter {
     public:
      explicit Iter(uint32_t v) : v_(v) {}
      KeySlot operator*() const { return KeySlot(v_); }
      Iter& operator++() {
        ++v_;
        return *this;
      }
      bool operator!=(const Iter& o) const { return v_ != o.v_; }

     private:
      uint32_t v_;
    };
    explicit SlotRange(uint32_t n) : n_(n) {}
    Iter begin() const { return Iter(0); }
    Iter end() const { return Iter(n_); }

   private:
    uint32_t n_;
  };
  SlotRange slots() const { return SlotRange(size()); }
};

// An array indexed by one strong index type only (its value() is the
// position): PerKey holds a fact per key slot, the way the stages after
// identity keep one per tensor key; PerValue one per value of the
// data-flow graph (ValueIndex).
template <typename Index, typename T>
class IndexedArray {
 public:
  IndexedArray() = default;
  IndexedArray(uint32_t n, const T& init) : v_(n, init) {}
  typename std::vector<T>::reference operator[](Index i) { return v_[i.value()]; }
  typename std::vector<T>::const_reference operator[](Index i) const { return v_[i.value()]; }
  uint32_t size() const { return static_cast<uint32_t>(v_.size()); }
  bool empty() const { return v_.empty(); }
  void assign(uint32_t n, const T& init) { v_.assign(n, init); }
  void clear() { v_ = {}; }  // frees the memory

 private:
  std::vector<T> v_;
};

template <typename T>
using PerKey = IndexedArray<KeySlot, T>;
template <typename T>
using PerValue = IndexedArray<ValueIndex, T>;

}  // namespace memtl

// DenseNumbering, memtl's own hash table for the reader's TensorImpl
// addresses (the other address-keyed maps are absl::flat_hash_map, as in
// ptr_dev_map.h; docs/performance.md, "Libraries measured", says why).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace memtl {

// Mixes 64 bits well enough for linear probing on pointers and small ids.
inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

// Numbers distinct 64-bit keys densely, 1, 2, ... in order of first
// sighting (0 is never a number). The table holds numbers only, 4 bytes a
// slot, and a probe compares the key stored under the number: a third of
// a map's 16-byte (key, number) slots, and growing rebuilds the table from
// the keys, so the old table is gone before the new one fills. It stays
// memtl's own because absl::flat_hash_map, a little faster, held far more
// memory here, where the reader's peak is.
class DenseNumbering {
 public:
  DenseNumbering() : keys_{0}, table_(16, 0), mask_(15) {}

  uint32_t Number(uint64_t key) {
    if (keys_.size() * 10 > table_.size() * 7) Grow();
    size_t i = Mix64(key) & mask_;
    while (table_[i] != 0) {
      if (keys_[table_[i]] == key) return table_[i];
      i = (i + 1) & mask_;
    }
    const auto n = static_cast<uint32_t>(keys_.size());
    table_[i] = n;
    keys_.push_back(key);
    return n;
  }
  // Number(key) of a large numbering misses the cache twice, on its table
  // slot and then on the key that slot names. A caller that knows a key
  // early starts the first fetch with PrefetchSlot and, once that slot has
  // arrived, the second with PrefetchKey; both are hints and change nothing.
  void PrefetchSlot(uint64_t key) const { __builtin_prefetch(&table_[Mix64(key) & mask_]); }
  void PrefetchKey(uint64_t key) const {
    const uint32_t n = table_[Mix64(key) & mask_];
    if (n != 0) __builtin_prefetch(&keys_[n]);
  }
  // Numbers given so far, plus one (the unused 0).
  size_t size() const { return keys_.size(); }
  // The key of each number; [0] is unused. Leaves the numbering unusable:
  // nothing may be numbered or fetched after it.
  std::vector<uint64_t> TakeKeys() {
    std::vector<uint32_t>().swap(table_);
    return std::move(keys_);
  }

 private:
  void Grow() {
    const size_t cap = table_.size() * 2;
    std::vector<uint32_t>().swap(table_);
    table_.assign(cap, 0);
    mask_ = cap - 1;
    for (uint32_t n = 1; n < keys_.size(); ++n) {
      size_t i = Mix64(keys_[n]) & mask_;
      while (table_[i] != 0) i = (i + 1) & mask_;
      table_[i] = n;
    }
  }
  std::vector<uint64_t> keys_;
  std::vector<uint32_t> table_;
  size_t mask_;
};

}  // namespace memtl

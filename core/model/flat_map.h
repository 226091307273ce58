// An open-addressing hash map (linear probing, backward-shift deletion) for
// the hot paths of the pipeline, where std::unordered_map's node per entry
// dominated the profile (docs/performance.md). Keys and values are small
// trivially copyable types; iteration order is unspecified, so nothing that
// reaches an output may iterate it (sort first).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace memtl {

template <typename K, typename V, typename Hash>
class FlatMap {
 public:
  FlatMap() { Rehash(16); }

  size_t size() const { return size_; }
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap * 7 / 10 < n) cap *= 2;
    if (cap > slots_.size()) Rehash(cap);
  }
  void clear() {
    for (auto& s : slots_) s.used = false;
    size_ = 0;
  }

  // Inserts `value` if `key` is absent; returns the stored value and whether
  // it was inserted.
  std::pair<V*, bool> try_emplace(const K& key, const V& value) {
    if ((size_ + 1) * 10 > slots_.size() * 7) Rehash(slots_.size() * 2);
    size_t i = Hash()(key) & mask_;
    while (slots_[i].used) {
      if (slots_[i].key == key) return {&slots_[i].value, false};
      i = (i + 1) & mask_;
    }
    slots_[i].used = true;
    slots_[i].key = key;
    slots_[i].value = value;
    ++size_;
    return {&slots_[i].value, true};
  }
  V& operator[](const K& key) { return *try_emplace(key, V{}).first; }

  V* find(const K& key) {
    size_t i = Hash()(key) & mask_;
    while (slots_[i].used) {
      if (slots_[i].key == key) return &slots_[i].value;
      i = (i + 1) & mask_;
    }
    return nullptr;
  }
  const V* find(const K& key) const { return const_cast<FlatMap*>(this)->find(key); }
  bool contains(const K& key) const { return find(key) != nullptr; }

  bool erase(const K& key) {
    size_t i = Hash()(key) & mask_;
    while (slots_[i].used && !(slots_[i].key == key)) i = (i + 1) & mask_;
    if (!slots_[i].used) return false;
    // Backward-shift: move later entries of the probe run into the hole.
    size_t hole = i;
    size_t j = i;
    for (;;) {
      j = (j + 1) & mask_;
      if (!slots_[j].used) break;
      const size_t home = Hash()(slots_[j].key) & mask_;
      // Move j into the hole unless its home lies cyclically in (hole, j].
      const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (!stays) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole].used = false;
    --size_;
    return true;
  }

  template <typename F>
  void for_each(F&& f) const {
    for (const auto& s : slots_) {
      if (s.used) f(s.key, s.value);
    }
  }

 private:
  struct Slot {
    K key{};
    V value{};
    bool used = false;
  };
  void Rehash(size_t cap) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    size_ = 0;
    for (const auto& s : old) {
      if (s.used) try_emplace(s.key, s.value);
    }
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

// Mixes 64 bits well enough for linear probing on pointers and small ids.
inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

struct U64Hash {
  size_t operator()(uint64_t v) const { return static_cast<size_t>(Mix64(v)); }
};

// Numbers distinct 64-bit keys densely, 1, 2, ... in order of first
// sighting (0 is never a number). The table holds numbers only, 4 bytes a
// slot, and a probe compares the key stored under the number: a third of a
// FlatMap<uint64_t, uint32_t>'s 16-byte slots, and growing rebuilds the
// table from the keys, so the old table is gone before the new one fills.
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

// A map keyed by (pointer, device), how storage is told apart: one FlatMap
// of pointers per device (a trace has a few devices), so that a slot holds an
// 8-byte key instead of a padded 16-byte pair (16 bytes a slot instead of 24
// for a 4-byte value).
template <typename V>
class PtrDevMap {
 public:
  std::pair<V*, bool> try_emplace(uint64_t ptr, uint16_t device, const V& value) {
    if (device >= maps_.size()) maps_.resize(size_t{device} + 1);
    return maps_[device].try_emplace(ptr, value);
  }
  V* find(uint64_t ptr, uint16_t device) {
    return device < maps_.size() ? maps_[device].find(ptr) : nullptr;
  }
  bool erase(uint64_t ptr, uint16_t device) {
    return device < maps_.size() && maps_[device].erase(ptr);
  }
  size_t size() const {
    size_t n = 0;
    for (const auto& m : maps_) n += m.size();
    return n;
  }

 private:
  std::vector<FlatMap<uint64_t, V, U64Hash>> maps_;
};

}  // namespace memtl

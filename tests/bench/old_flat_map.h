// memtl's hand-made hash map as it was before absl::flat_hash_map replaced
// it (core/model/flat_map.h at 0b438cb), kept only as bench_flat_map.cpp's
// baseline, so the measured figures in docs/performance.md can be
// reproduced. Not used by memtl.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/model/flat_map.h"  // Mix64

namespace memtl::bench {

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

struct U64Hash {
  size_t operator()(uint64_t v) const { return static_cast<size_t>(memtl::Mix64(v)); }
};

}  // namespace memtl::bench

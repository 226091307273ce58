// PtrDevMap: absl::flat_hash_map keyed by (storage pointer, device), for
// identity's allocation ids, the allocation checks and the size map.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace memtl {

// A map keyed by (pointer, device), how storage is told apart: one map of
// pointers per device (a trace has a few devices), so that a slot holds an
// 8-byte key instead of a padded 16-byte pair (16 bytes a slot instead of 24
// for a 4-byte value). A pointer to a value lasts until the next insertion.
// Iteration order is unspecified: nothing may iterate it into an output.
template <typename V>
class PtrDevMap {
 public:
  std::pair<V*, bool> try_emplace(uint64_t ptr, uint16_t device, const V& value) {
    if (device >= maps_.size()) maps_.resize(size_t{device} + 1);
    auto [it, inserted] = maps_[device].try_emplace(ptr, value);
    return {&it->second, inserted};
  }
  V* find(uint64_t ptr, uint16_t device) {
    if (device >= maps_.size()) return nullptr;
    auto it = maps_[device].find(ptr);
    return it == maps_[device].end() ? nullptr : &it->second;
  }
  bool erase(uint64_t ptr, uint16_t device) {
    return device < maps_.size() && maps_[device].erase(ptr) != 0;
  }
  size_t size() const {
    size_t n = 0;
    for (const auto& m : maps_) n += m.size();
    return n;
  }

 private:
  std::vector<absl::flat_hash_map<uint64_t, V>> maps_;
};

}  // namespace memtl

// Bytes per tensor key, as PyTorch's SizeMap computes them: the largest
// extent seen in any strided observation (max over dims of size * stride,
// times the element size), overridden by the allocation's byte count when an
// allocation event carries the key.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/graph/op_tree.h"

namespace memtl {

class SizeMap {
 public:
  explicit SizeMap(const OpTree& tree);
  // Bytes of a key slot; 0 for a key never sized (PyTorch would raise
  // KeyError; memtl counts it).
  int64_t operator[](uint32_t key) const { return std::max<int64_t>(values_[key], 0); }
  bool contains(uint32_t key) const { return values_[key] >= 0; }

 private:
  void Observe(const Trace& trace, uint32_t tensor);
  std::vector<int64_t> values_;  // by key slot; -1: never sized
};

}  // namespace memtl

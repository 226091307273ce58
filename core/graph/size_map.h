// Bytes per tensor key, as PyTorch's SizeMap computes them: the largest
// extent seen in any strided observation (max over dims of size * stride,
// times the element size), overridden by the allocation's byte count when an
// allocation event carries the key.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "core/graph/op_tree.h"

namespace memtl {

class SizeMap {
 public:
  explicit SizeMap(const OpTree& tree);
  // 0 for a key never sized (PyTorch would raise KeyError; memtl counts it).
  int64_t operator[](const TensorKey& key) const {
    auto it = values_.find(key);
    return it == values_.end() ? 0 : it->second;
  }
  bool contains(const TensorKey& key) const { return values_.count(key) != 0; }

 private:
  void Observe(const Trace& trace, uint32_t tensor);
  std::unordered_map<TensorKey, int64_t, TensorKeyHash> values_;
};

}  // namespace memtl

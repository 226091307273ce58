// Bytes per tensor key, as PyTorch's SizeMap computes them: the largest
// extent seen in any strided observation (max over dims of size * stride,
// times the element size), overridden by the allocation's byte count when an
// allocation event carries the key.
#pragma once

#include <cstdint>

#include "core/graph/op_tree.h"
#include "core/model/flat_map.h"

namespace memtl {

class SizeMap {
 public:
  explicit SizeMap(const OpTree& tree);
  // 0 for a key never sized (PyTorch would raise KeyError; memtl counts it).
  int64_t operator[](const TensorKey& key) const {
    const int64_t* v = values_.find(key);
    return v == nullptr ? 0 : *v;
  }
  bool contains(const TensorKey& key) const { return values_.contains(key); }

 private:
  void Observe(const Trace& trace, uint32_t tensor);
  FlatMap<TensorKey, int64_t, TensorKeyHash> values_;
};

}  // namespace memtl

// The versioned data-flow graph (PyTorch's DataFlowGraph): one node per
// top-level op (the topmost op that matches a schema, or a backward function)
// and per allocation outside any such op; edges say which (tensor, version)
// each node reads, writes (a version bump), allocates or frees.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/graph/op_tree.h"
#include "core/model/status.h"

namespace memtl {

// 8 bytes (a trace has about one edge per tensor argument and allocation).
struct FlowEdge {
  static constexpr int32_t kAllocated = -1;  // input_version of an allocation
  // The key slot's value (KeyTable; slot order is TensorKey order), read
  // as key(). Fewer than 2^30: every key belongs to a tensor observation or
  // an allocation, and identity gives keys only to traces with fewer than
  // 2^30 of them together.
  uint32_t slot : 30 = 0;
  int32_t mutated : 2 = 0;  // 1 written, 0 read, -1 deleted (PyTorch's None)
  int32_t input_version = kAllocated;

  KeySlot key() const { return KeySlot(slot); }
  bool is_allocation() const { return input_version == kAllocated; }
  bool is_deletion() const { return mutated == -1; }
  bool is_input() const { return !is_allocation(); }
  bool is_output() const { return (is_allocation() && !is_deletion()) || mutated == 1; }
  // The version read (an input), and the version made (an output): an
  // allocation makes v0, a write the version after the one it read.
  Version input() const { return Version(input_version); }
  Version output_version() const { return is_allocation() ? Version(0) : input().next(); }
  bool is_intermediate() const { return is_allocation() && is_deletion(); }
};
static_assert(sizeof(FlowEdge) == 8);

// 8 bytes (a trace has about one node per six events); its start time is
// its event's. Nodes' edges are stored in node order, so a node's edges end
// where the next node's begin (DataFlowGraph::end).
struct FlowNode {
  uint32_t event = 0;
  uint32_t edges_begin = 0;  // into DataFlowGraph::edges(), sorted by key
};
static_assert(sizeof(FlowNode) == 8);

// The most versions a tensor may reach: the timeline keeps a version in
// 29 bits. Build refuses a trace that mutates one tensor more often (that
// trace would hold over 2^28 events for the one tensor).
inline constexpr int32_t kMaxVersion = (int32_t{1} << 28) - 1;

class DataFlowGraph {
 public:
  // Builds and validates the graph; a broken invariant (a version created
  // twice, a double free inside one op, versions out of order) is an error.
  // With `reused`, an allocation of a key that an earlier op mutated (an
  // address allocated again while its storage is live by the trace's
  // records: PyTorch's "version mismatch") is not: every such key is
  // listed there, sorted, and the build fails once all are found, for the
  // pipeline to split those storages (identity's StorageSplits) and build
  // again.
  static Expected<DataFlowGraph> Build(const OpTree& tree, const KeyTable& keys,
                                       std::vector<KeySlot>* reused = nullptr);

  const std::vector<FlowNode>& nodes() const { return nodes_; }
  const std::vector<FlowEdge>& edges() const { return edges_; }
  // `n` is an element of nodes().
  const FlowEdge* begin(const FlowNode& n) const { return edges_.data() + n.edges_begin; }
  const FlowEdge* end(const FlowNode& n) const {
    const FlowNode* next = &n + 1;
    return next != nodes_.data() + nodes_.size() ? edges_.data() + next->edges_begin
                                                 : edges_.data() + edges_.size();
  }

  // The latest version of a key slot, Version::None() when no node
  // mentions the key.
  Version last_version(KeySlot key) const { return Version(last_version_[key]); }
  // Dense numbering of every (key, version): key k's versions 0..max(last, 0)
  // are values value_begin()[k] .. value_begin()[k + 1]. Stages that keep a
  // fact per tensor version index arrays by it.
  const std::vector<uint32_t>& value_begin() const { return value_begin_; }
  uint32_t num_values() const { return value_begin_.empty() ? 0 : value_begin_.back(); }
  ValueIndex value(KeySlot key, Version version) const {
    return ValueIndex(value_begin_[key.value()] + static_cast<uint32_t>(version.value()));
  }
  // Key `key`'s values, value_begin()[key] .. value_begin()[key + 1].
  ValueIndex values_begin(KeySlot key) const { return ValueIndex(value_begin_[key.value()]); }
  ValueIndex values_end(KeySlot key) const { return ValueIndex(value_begin_[key.value() + 1]); }
  // How many values key `key` has: its versions 0 .. num_versions - 1.
  int32_t num_versions(KeySlot key) const {
    return static_cast<int32_t>(value_begin_[key.value() + 1] - value_begin_[key.value()]);
  }

 private:
  std::vector<FlowNode> nodes_;
  std::vector<FlowEdge> edges_;
  PerKey<int32_t> last_version_;
  std::vector<uint32_t> value_begin_;
};

// The graph in the line layout of PyTorch's `_run_and_format_data_flow`
// test helper, one line per node with inputs or outputs.
std::string FormatDataFlow(const Trace& trace, const KeyTable& keys, const DataFlowGraph& graph);

}  // namespace memtl

// What the execution-trace join (et_join.h) takes from the nodes' op_schema
// (the overload each node ran), so that the joined ops match schemas as
// PyTorch's profiler matches them on the run's own PyTorch:
//
// - schema records where memtl's built-in table (PyTorch 1.13's operators)
//   lacks the overload a node ran: without it an op of a later PyTorch
//   (scaled_dot_product_attention, _fused_adamw_, the optimizers'
//   _foreach_add_.Tensor on their step tensors) matches no schema, so it is
//   no node of the data-flow graph, and its allocations and the writes of
//   its tensor lists are its children's, one at a time;
// - which arguments are tensor lists: PyTorch's profiler records only a
//   tensor list as a list, and an execution trace names no element type
//   for an empty list.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/model/diagnostics.h"
#include "core/read/et/et_reader.h"

namespace memtl::read {

// Schema records (Trace::schemas: by op name, its schemas) for the op names of the joined nodes
// (`node_of_op`: per Kineto op, its node or kNone32) whose nodes ran an
// overload the built-in table lacks: the overloads the nodes ran, then
// the built-in ones of the other overload names (PyTorch matches all of a
// name's). A name whose nodes ran only built-in overloads keeps the
// built-in schemas, as a trace without schema records does. A schema memtl
// cannot parse is left out, counted in `diagnostics`.
std::vector<std::pair<std::string, std::vector<std::string>>> EtSchemaRecords(
    const ExecutionTrace& et, const std::vector<uint32_t>& node_of_op, Diagnostics& diagnostics);

// Whether a node's schema takes a tensor list (`Tensor[]`) at an argument,
// parsed once per schema.
class EtTensorLists {
 public:
  explicit EtTensorLists(const ExecutionTrace& et) : et_(et) {}
  // 1 yes, 0 no (an int list, `Tensor?[]`: PyTorch's profiler captures
  // neither, and None is what matches them), -1 unknown (no schema).
  int At(const EtNode& node, uint32_t index);

 private:
  const ExecutionTrace& et_;
  std::unordered_map<uint32_t, std::vector<bool>> by_schema_;  // by string id
};

}  // namespace memtl::read

// Reads an execution trace, as torch.profiler.ExecutionTraceObserver writes
// it (one JSON object with "nodes"; schema 1.0.x with flat "inputs",
// "input_shapes", "input_types" and node-level "rf_id", "parent", or 1.1.x
// with "inputs": {"values", "shapes", "types", "strides"}, "ctrl_deps" and
// "attrs"), into compact records: per node its record-function id, name,
// schema, its inputs as memtl's argument kinds, and the tensors of its
// outputs. The nodes array is streamed element by element (KinetoStream);
// nothing of the document is held beyond the node being parsed.
//
// A tensor value is [tensor_id, storage_id, offset, numel, itemsize,
// device]. PyTorch numbers TensorImpl addresses and storage data pointers
// by first sight and never forgets them, so a tensor id is an address in
// disguise (reused when PyTorch reuses the TensorImpl), and a storage id
// names one data pointer for the whole trace: the join (et_join.h) maps it
// back to the address in the Kineto trace's [memory] events.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/status.h"
#include "core/model/trace.h"
#include "core/read/common/read_options.h"

namespace memtl::read {

struct EtTensor {
  uint64_t tensor_id = 0;
  uint64_t storage_id = 0;  // 0: a tensor without storage
  int64_t offset = 0;
  int64_t numel = 0;
  // (offset + numel) * itemsize: the bytes of storage the tensor reaches
  // to, computed by the reader, which refuses a tensor where it overflows.
  int64_t extent = 0;
  uint32_t itemsize = 0;
  uint32_t device = 0;      // string id in ExecutionTrace::strings
  uint32_t dims_begin = 0;  // into ExecutionTrace::dims: sizes, then strides
  uint32_t num_sizes = 0;
  uint32_t num_strides = 0;
};

// The dtype name a tensor of `itemsize` bytes per element takes in the
// joined trace: memtl keeps only the bytes a tensor takes (the execution
// trace's dtype names are C++ type names, "float", "long int", "c10::Half").
// An undefined tensor's 0 is float32's, as the reader checks it.
inline std::string_view DtypeOfItemsize(uint32_t itemsize) {
  switch (itemsize) {
    case 1:
      return "uint8";
    case 2:
      return "float16";
    case 8:
      return "int64";
    case 16:
      return "complex128";
    default:
      return "float32";
  }
}

enum class EtArgKind : uint8_t { kNone, kTensor, kList, kBool, kInt, kFloat, kString };

struct EtArg {
  EtArgKind kind = EtArgKind::kNone;
  // kTensor: the tensor's index; kList: its elements in items[begin,
  // begin + count) (a tensor index, or kNone32 for an element that is not;
  // an empty list may be of any element type).
  uint32_t begin = 0;
  uint32_t count = 0;
  int64_t i = 0;     // kBool, kInt
  double f = 0;      // kFloat
  uint32_t str = 0;  // kString: string id
};

struct EtNode {
  uint64_t id = 0;
  uint64_t rf = 0;                          // record-function id (0: none, as for the root nodes)
  uint32_t name = 0;                        // string id
  uint32_t schema = 0;                      // string id ("" when the trace gives none)
  uint32_t args_begin = 0, args_count = 0;  // into ExecutionTrace::args
  uint32_t outs_begin = 0, outs_count = 0;  // output tensors, into items
};

struct ExecutionTrace {
  std::string schema;  // the trace's "schema" (format version)
  std::vector<EtNode> nodes;
  std::vector<EtArg> args;
  std::vector<uint32_t> items;
  std::vector<EtTensor> tensors;
  std::vector<int64_t> dims;
  StringTable strings;
};

// The first input tensor of `node` (a tensor argument, or an item of a
// tensor list, in argument order) for which pred(tensor index, argument
// position) is true; kNone32 when none is. A pred that returns false
// always visits every input.
template <typename Pred>
uint32_t FindInput(const ExecutionTrace& et, const EtNode& node, Pred&& pred) {
  for (uint32_t i = 0; i < node.args_count; ++i) {
    const EtArg& arg = et.args[node.args_begin + i];
    if (arg.kind == EtArgKind::kTensor && pred(arg.begin, i)) return arg.begin;
    if (arg.kind != EtArgKind::kList) continue;
    for (uint32_t j = arg.begin; j < arg.begin + arg.count; ++j)
      if (et.items[j] != kNone32 && pred(et.items[j], i)) return et.items[j];
  }
  return kNone32;
}

// Calls fn(tensor index, argument position) for each input tensor of
// `node`, then out(tensor index) for each of its outputs.
template <typename Fn, typename Out>
void ForEachTensor(const ExecutionTrace& et, const EtNode& node, Fn&& fn, Out&& out) {
  FindInput(et, node, [&](uint32_t index, uint32_t position) {
    fn(index, position);
    return false;
  });
  for (uint32_t i = node.outs_begin; i < node.outs_begin + node.outs_count; ++i)
    if (et.items[i] != kNone32) out(et.items[i]);
}

Expected<ExecutionTrace> ReadExecutionTrace(const std::string& path,
                                            const ReadOptions& options = {});
// Tests: an execution trace held in memory.
Expected<ExecutionTrace> ReadExecutionTraceString(std::string data, const std::string& name);

}  // namespace memtl::read

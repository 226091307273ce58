// What the inference rules (infer.cpp) read of a trace without tensors: per
// event, the scope it runs in and the op that counts as its node; the
// scopes in time order, to place an event that no scope encloses; and each
// allocation's pairing with its free.
//
// Scopes come from names, because a Kineto trace has nothing else:
//   backward   an op autograd runs as a backward function (RecordScope
//              kBackwardFunction: the reader marks the op that
//              "autograd::engine::evaluate_function: NAME" wraps) or that
//              wrapper itself, where autograd frees what the function
//              returned or consumed;
//   optimizer  "Optimizer.step#..." (the record_function every
//              torch.optim step opens) or a python frame under torch/optim/
//              (with_stack), but not torch/optim/lr_scheduler.py;
//   zero_grad  "Optimizer.zero_grad#..." or the python frame of zero_grad;
//   forward    a python tracer "nn.Module: Class_n" call (with_stack);
//   other      anything else.
// The innermost of them wins: a backward run inside an optimizer step's
// closure (LBFGS) is backward, a forward inside it forward.
#pragma once

#include <cstdint>
#include <vector>

#include "core/graph/op_tree.h"

namespace memtl::infer {

enum class Scope : uint8_t { kOther, kForward, kBackward, kOptimizer, kZeroGrad };

struct Evidence {
  // Per event, by its ancestry (the innermost scope around it, itself
  // included).
  std::vector<Scope> scope;
  // Per event, the op that counts as the data-flow node it runs in: the
  // outermost op around it that is not a user annotation (ProfilerStep#N,
  // Optimizer.step#...) nor autograd's evaluate_function wrapper; inside
  // backward, the backward function. kNone32: none (a python call or an
  // allocation outside every op).
  std::vector<uint32_t> node;
  // Per event, the outermost optimizer-step scope around it; kNone32: none.
  std::vector<uint32_t> step;
  // Per event: inside a module's construction (a torch/nn/ python frame in
  // __init__, reset_parameters or _apply, which .to() and .cuda() run).
  std::vector<bool> module_init;
  // The events that are no allocation, in start-time order: their start
  // times and scopes, to place a free that no scope encloses (at the top of
  // its thread, or in the python frames around a phase) by the last event
  // that started before it on any thread.
  std::vector<int64_t> marker_time;
  std::vector<Scope> marker_scope;
  // Whether any nn.Module call is in the trace (recorded with_stack): the
  // rules that place inputs and the loss need the forward's extent.
  bool has_modules = false;

  // The scope an event runs in: its own, or for an event in no scope the
  // scope of the last event that started at or before it.
  Scope PhaseOf(uint32_t event, int64_t time) const;
  // The start time of the first marker after `time` (strictly) whose scope
  // is `s`; INT64_MAX when none.
  int64_t NextStart(Scope s, int64_t time) const;
  // The scope of the last marker at or before `time` whose scope is not
  // kOther; kOther when none.
  Scope LastDecisiveBefore(int64_t time) const;
  // The scope of the first marker after `time` whose scope is not kOther.
  Scope NextDecisiveAfter(int64_t time) const;

  // Per scope, the start times of its markers (NextStart).
  std::vector<int64_t> starts[5];
  // The decisive markers (scope not kOther): times and scopes.
  std::vector<int64_t> decisive_time;
  std::vector<Scope> decisive_scope;
};

Evidence GatherEvidence(const OpTree& tree);

// Allocations paired with frees per (address, device), in the order the
// timeline pairs the allocations without a tensor (start-time order for a
// trace not in PyTorch's tree, else pre-order: UntrackedAllocationsLive).
struct Pairing {
  // Per allocation record: for a free, its allocation record (kNone32: a
  // free of memory from before the profile); for an allocation at an
  // address still live, the live allocation; else kNone32.
  std::vector<uint32_t> pair;
  // Per allocation record of an allocation: its free's record, kNone32
  // when never freed.
  std::vector<uint32_t> free_of;
  // Per allocation record, its event.
  std::vector<uint32_t> event_of;
};
// `alloc_ptrs`: per allocation record, its address (TensorRecords).
Pairing PairAllocations(const OpTree& tree, const std::vector<uint64_t>& alloc_ptrs);

}  // namespace memtl::infer

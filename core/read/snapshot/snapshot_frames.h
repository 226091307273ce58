// A snapshot entry's frames (innermost first, Python and, with
// stacks="all", C++) as the levels of memtl's event tree, outermost first,
// so that the inference rules that read a Kineto trace's scopes
// (core/infer/evidence.h) read a snapshot's too:
//
// - a Python frame FILE:LINE in FUNC becomes a python call "FILE(LINE):
//   FUNC" (the python tracer's naming, with the executing line where the
//   tracer has the first line of the function; Trace::py_lines holds the
//   line of the frame above it), so torch/optim/ frames are the optimizer
//   step, zero_grad its own, and torch/nn/ __init__, reset_parameters and
//   _apply module construction;
// - nn.Module.__call__'s frames (_call_impl, _wrapped_call_impl in
//   torch/nn/modules/module.py) become a module call "nn.Module: STEM.FUNC"
//   named after the function they call (the snapshot names no class: a
//   Linear's is "linear.forward");
// - with C++ frames, autograd's Engine::evaluate_function becomes the
//   backward wrapper op and the function it applies (MmBackward0, PyNode)
//   a backward function, and the outermost at::_ops::NAME::call an op
//   "aten::NAME" (the node the TEMPORARY rule needs). Without C++ frames
//   (stacks="python") an allocation of the backward pass, made on
//   autograd's device thread, has no frames at all.
//
// Frames lists are shared through the pickle's memo (PyTorch dedups
// tracebacks), so each list is turned into levels once.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/model/trace.h"
#include "core/read/snapshot/pickle.h"

namespace memtl::read {

// One level of the event tree.
struct StackLevel {
  EventKind kind = EventKind::kPy;  // kPy or kOp
  RecordScope scope = RecordScope::kFunction;
  uint32_t name = 0;         // string id
  uint32_t caller_line = 0;  // a python call's Trace::py_lines entry
  bool operator==(const StackLevel&) const = default;
};

class FrameStacks {
 public:
  FrameStacks(const pickle::Document& doc, Trace& trace) : doc_(doc), trace_(trace) {}
  // The levels of a frames list (a pickle value; kNoValue or anything but a
  // list gives none), as an id for Levels(). Frames that are no dict are
  // skipped and counted (bad_frames()).
  uint32_t Of(uint32_t frames);
  const std::vector<StackLevel>& Levels(uint32_t id) const { return stacks_[id]; }
  uint64_t bad_frames() const { return bad_frames_; }

 private:
  std::vector<StackLevel> Build(uint32_t frames);

  const pickle::Document& doc_;
  Trace& trace_;
  std::unordered_map<uint32_t, uint32_t> by_value_;
  std::vector<std::vector<StackLevel>> stacks_{{}};  // id 0: no frames
  uint64_t bad_frames_ = 0;
};

}  // namespace memtl::read

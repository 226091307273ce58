// The memory a Kineto trace holds from before the profile (the allocator's
// total at the first event, less what the events free), split by what the
// trace says of it. Kineto records no tensors, but it names every leaf that
// a backward pass accumulates a gradient into (one AccumulateGrad op per
// leaf, whose input, the gradient, is the leaf's size) and the optimizer
// every step runs (Optimizer.step#CLASS.step). So of that memory, on the
// device the backward pass runs on:
//   leaves  the bytes of one backward pass's leaves (the largest pass:
//           passes are cut at optimizer steps, zero_grad and profiler
//           steps), at most the memory there is. They are parameters when
//           the profile builds none itself; the inference (core/infer/)
//           decides.
//   state   the optimizer's state for those leaves, as torch.optim keeps
//           it: so many tensors of each leaf's size per class (SGD with
//           momentum 1, Adam and AdamW 2, with amsgrad 3, ...), at most
//           what the leaves leave. None for an optimizer whose state this
//           cannot tell, for steps of different optimizers, or when the
//           profile makes the state itself (the inference decides that).
// Known to be wrong for leaves that are not parameters (an input with
// requires_grad), for gradient accumulation over several backward passes
// with no step between them (more leaves than there are; the cap bounds
// it), for an optimizer over only some of the leaves, and for parameters
// held in another dtype than their gradients.
#pragma once

#include <cstdint>
#include <vector>

#include "core/model/trace.h"
#include "core/read/kineto/kineto_nesting.h"
#include "core/read/kineto/kineto_parse.h"

namespace memtl::read {

struct PreProfileSplit {
  // Per device: the bytes split off as leaves and as optimizer state.
  std::vector<int64_t> leaves, state;
};

// `unseen`: per device, the memory from before the profile that no event
// frees.
PreProfileSplit SplitPreProfile(const KinetoParser& p, const StringTable& strings, const Nesting& n,
                                const std::vector<int64_t>& unseen);

}  // namespace memtl::read

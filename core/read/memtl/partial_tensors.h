// The last step of reading a torch 1.13 trace: its python tracer records a
// module's parameters, their gradients and an optimizer's state by storage
// address only (Tensor::partial), where PyTorch 2.x records each tensor's
// metadata. Each such tensor takes the metadata (size, device, TensorImpl)
// of the op input with that storage pointer nearest in time to the python
// call (ties: the later record), so that the trace the reader returns reads
// as a 2.x trace would and identity (core/identity) only reads it. A
// tensor never seen as an op input stays partial: identity gives it no key.
//
// Known to differ from PyTorch 1.13: its python tracer looked the address
// up among the op inputs seen so far at the call; the nearest one in time,
// either side, is what 2.x's recorded metadata names in every fixture.
#pragma once

#include <cstddef>

#include "core/model/trace.h"

namespace memtl {

struct PartialTensorCounts {
  size_t resolved = 0;  // took an op input's metadata
  size_t dropped = 0;   // never seen as an op input (stay partial)
};

// Readers call it once every record is in, on traces without producer ids.
PartialTensorCounts ResolvePartialTensors(Trace& trace);

}  // namespace memtl

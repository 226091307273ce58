// Memory tables by op, by module and by Python call site (PyTorch's
// key_averages with profile_memory, TensorBoard's memory statistics), per
// device: the bytes
// allocated and freed in the profiled window, the number of allocations and
// the bytes alive at the timeline's peak, each as self and total.
//
// An allocation's place is the event tree around its allocation event: its
// op is the innermost op (or record_function scope) around it, its module
// the nn.Module calls around it (the path of context.h: `Sequential_0 >
// Linear_1`), its call site the innermost frame of the user's code around
// it (context.h: `train.py(42): forward`). Self counts an allocation under
// that op, that module path and that call site; total also counts it under
// every op around it (each name once, so `aten::conv2d` includes what its
// `aten::empty` allocated), under every enclosing module path (`Sequential_0`
// includes `Sequential_0 > Linear_1`) and under every user frame around it
// (each once: the training loop's line includes the model's lines it
// called).
// Frees count where the free happened. Bytes and counts are the timeline's
// (a tensor's bytes are the size map's), so every column's selves add up to
// the device's totals: allocated = the bytes of its CREATE events (and of
// re-allocations of a live untracked address), freed = those of its
// DESTROY events, at the peak = the peak's bytes.
//
// A model's parameters, gradients and optimizer state (names.h) alive at
// the peak count, in the module table's "at peak" columns, under the module
// whose parameter they are, not where they were made: that module holds
// them (a gradient is made by a backward op outside any module call). Their
// allocations and frees stay where they happened.
//
// Bytes alive at the peak with no allocation in the window go to rows of
// their own: a module's parameter (as the python tracer reports it) to that
// module (it was made when the module was), any other tensor from before the
// profile to "(before the profile)" (in the call-site table, parameters
// too: where a module was made is not in the trace); allocations with no tensor identity
// alive then, which the trace's addresses (gone by now) would have to pair
// with their frees, to "(no tensor identity)"; but in a trace without
// tensors (`in.inferred`), whose inference paired them, to the places that
// made them (memory from before the profile to "(before the profile)").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/explain/context.h"

namespace memtl {

struct MemoryUse {
  int64_t allocated = 0;  // bytes
  int64_t freed = 0;      // bytes
  int64_t count = 0;      // allocations
  int64_t at_peak = 0;    // bytes alive at the timeline's peak

  MemoryUse& operator+=(const MemoryUse& o) {
    allocated += o.allocated;
    freed += o.freed;
    count += o.count;
    at_peak += o.at_peak;
    return *this;
  }
  bool operator==(const MemoryUse&) const = default;
};

struct MemoryRow {
  std::string name;  // op name, module path, or one of the names below
  MemoryUse self, total;
};

// Module calls nested deeper than this count with the module call around
// them (each module row is named by its whole path).
inline constexpr uint8_t kMaxModuleDepth = 64;

inline constexpr std::string_view kOutsideOps = "(outside any op)";
inline constexpr std::string_view kOutsideModules = "(outside any module)";
// No frame of the user's code around it (or a trace without with_stack).
inline constexpr std::string_view kNoCallSite = "(no call site)";
inline constexpr std::string_view kBeforeProfile = "(before the profile)";
inline constexpr std::string_view kNoIdentity = "(no tensor identity)";

struct MemoryTables {
  // Largest first: by total bytes at the peak, then total bytes allocated,
  // then name.
  std::vector<MemoryRow> by_op;
  std::vector<MemoryRow> by_module;
  std::vector<MemoryRow> by_call_site;
  MemoryUse device;  // the device's totals: each table's selves add up to it
};

// The tables of every device, indexed by DeviceIndex (an empty table for a
// device with no memory events). Reads the trace's op and python-call
// records and the key slots of tensor observations (an analysis kept whole,
// or before Categorize lets it go). `in.device` is not read.
std::vector<MemoryTables> ComputeTables(const ExplainInput& in);

// Whether `rows` (a by_call_site table) names any call site, not only the
// rows of the names above (a trace recorded without with_stack has none).
bool HasCallSites(const std::vector<MemoryRow>& rows);

// For people: the `top` first rows of each table as aligned text (the
// call-site table only when it names a call site).
std::string FormatTables(const MemoryTables& tables, size_t top);

}  // namespace memtl

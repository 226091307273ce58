// The in-memory trace: a flat, producer-independent model of a profiled run.
//
// Events keep the shape of PyTorch's event tree (each names its parent) but
// live in flat arrays indexed by uint32, with side tables per event kind, so
// that a trace of millions of events costs tens of bytes per event and no
// pointer chasing. Readers fill it (a torch 1.13 trace's python-tracer
// tensors included: core/read/memtl/partial_tensors.h); later stages read it and
// return their own results beside it (identity's is the key table,
// core/model/key_table.h). Only the pipeline, its owner, changes it after
// reading: it hands the storage pointers to identity, their one reader, and
// frees records after their last reader.
//
// The records themselves are in records.h, op arguments in args.h, start
// times in start_times.h.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/model/args.h"
#include "core/model/ids.h"
#include "core/model/records.h"
#include "core/model/start_times.h"

namespace memtl {

struct DeviceInfo {
  std::string name;   // as PyTorch prints it: "cpu", "cuda:0"
  std::string type;   // "cpu", "cuda"
  int index = -1;     // -1: no index
  uint32_t rank = 0;  // position when sorted by (type, index)
  // The largest allocator totals (total_allocated, total_reserved) that an
  // allocation event on this device reported; 0 when none did.
  int64_t max_total_allocated = 0;
  int64_t max_total_reserved = 0;
  // The reserved total when the allocated total was at its largest, where
  // the trace says (a memory snapshot's segments); 0 otherwise. Less the
  // allocated peak, it is the memory free inside the allocator's segments
  // then (fragmentation).
  int64_t reserved_at_peak = 0;
  // The allocator's segments alive then, where the trace says (a memory
  // snapshot's: cudaMalloc'd regions, an expandable segment's mapped
  // ranges), each with the allocation records alive in it (the record for
  // the memory from before the trace stands for its blocks). A segment's bytes less its
  // records' are free inside it; the peak tells that fragmentation apart
  // by the category that holds each segment. Empty for other inputs.
  struct Segment {
    int64_t bytes = 0;
    // The records alive in it, each with the bytes of its blocks there.
    std::vector<std::pair<uint32_t, int64_t>> held;
  };
  std::vector<Segment> segments_at_peak;
};

// The names of a trace, each stored once. Every name in it is valid UTF-8,
// so that no output has to repair one: a name that is not (a foreign trace's
// bytes) is stored with those bytes replaced by U+FFFD, and counted.
class StringTable {
 public:
  uint32_t Intern(std::string_view s);
  // How many names were repaired, and the first of them as it came (quoted).
  size_t invalid_utf8() const { return invalid_utf8_; }
  const std::string& invalid_utf8_example() const { return invalid_utf8_example_; }
  bool Contains(std::string_view s) const { return index_.find(s) != index_.end(); }
  const std::string& Get(uint32_t id) const { return strings_[id]; }
  size_t size() const { return strings_.size(); }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>> index_;
  std::vector<std::string> strings_;
  size_t invalid_utf8_ = 0;
  std::string invalid_utf8_example_;
};

// The version of the trace format (docs/trace-format.md) that the model
// holds: the memtl reader refuses a later one; the Kineto reader and the
// pipeline's raw-timeline analysis give their traces this one.
inline constexpr int kTraceFormatVersion = 1;

struct TraceHeader {
  int version = 0;
  std::string producer;
  std::string torch_version;
  bool has_ids = false;     // tensors carry producer tensor/allocation ids
  int profile_memory = -1;  // the producer's profile_memory setting: 1, 0, or -1 unknown
  // Set by readers of traces not in PyTorch's tree (Kineto, the execution-
  // trace join): allocations pair with frees per (address, device) in
  // start-time order (OpTree::sorted), the allocator's, instead of in
  // pre-order, PyTorch's rule for its own tree, which memtl's traces keep.
  // Where roots of two threads overlap in time (a GPU backward pass on the
  // autograd engine's thread), pre-order sees an address allocated again
  // before the free that released it.
  bool pairs_in_time_order = false;
  // Set by the execution-trace join: its tensor ids number TensorImpl
  // addresses that the profiler held (PyTorch 2.x keeps a weak reference to
  // every TensorImpl it records), so an address is one tensor for the whole
  // profile, as in PyTorch's own ids, and identity keeps every allocation
  // an impl is seen with in its id instead of splitting it (torch 1.13's
  // raw, reused addresses: dealias.cpp).
  bool impls_held = false;
  // Set by the memory-snapshot reader: a python call's name
  // "FILE(LINE): FUNC" gives the line executing in that frame (a
  // snapshot's frames), not the function's first line (the python
  // tracer's), so a call site reads "FILE:LINE in FUNC()" by it.
  bool py_names_at_line = false;
  // A distributed run's rank and world size (-1: not said), and what names
  // the run (a memtl trace's "run"; empty: not said): `memtl ranks` checks
  // that the traces it is given are one run's distinct ranks.
  int64_t rank = -1;
  int64_t world_size = -1;
  std::string run;
  // Where and when the profile was recorded, as the producer says (the
  // script's name, a local time with its offset); empty: not said. The
  // report names them instead of the trace's file.
  std::string script;
  std::string recorded_at;
  // The model's parameters by name (the header's "model"): the reader gives
  // each module's and optimizer's parameter whose storage matches one its
  // name (ParamInfo::qualname), then empties this.
  struct ModelParam {
    std::string name;
    uint64_t ptr = 0;
    std::string device;
  };
  std::vector<ModelParam> model;
};

struct Trace {
  TraceHeader header;
  StringTable strings;
  std::vector<DeviceInfo> devices;

  std::vector<Event> events;  // pre-order of the event tree
  StartTimes event_t0;        // per event
  std::vector<OpInfo> ops;
  std::vector<AllocInfo> allocs;
  // Per allocation, its address (parallel to `allocs`). The pipeline takes
  // it with the tensor records (TensorRecords): only the first stages read
  // it (what the timeline needs of it is UntrackedAllocationsLive's result,
  // Analysis::untracked_live).
  std::vector<uint64_t> alloc_ptrs;
  // Python calls: the name of each (string id), and for the calls that
  // report a module or an optimizer (about one in twenty), which, by call
  // in order, with a bit per call saying whether it has one. Read them
  // through Py().
  std::vector<uint32_t> py_names;
  // Per python call, the line of its caller's code that made the call (the
  // python tracer's caller frame; 0: not said): empty when no record says,
  // and shorter than py_names when the last ones do not. Read it through
  // PyLine().
  std::vector<uint32_t> py_lines;
  std::vector<PyLink> py_links;
  std::vector<bool> py_linked;
  std::vector<uint32_t> other_names;  // string id per kOther event
  std::vector<ModuleInfo> modules;
  std::vector<OptimizerInfo> optimizers;
  std::vector<ParamInfo> params;
  std::vector<StateEntry> states;
  // Op arguments (about 1.6 per event) in 1 byte each, plus 4 for a tensor
  // or a list (about 0.5 per event): the kind of every argument, and per
  // tensor or list argument, in order, the tensor index or where the list
  // starts in list_items (its length, then its elements: tensor index or
  // kNone32). Read them through ArgsOf().
  std::vector<ArgKind> arg_kinds;
  std::vector<uint32_t> arg_refs;
  std::vector<uint32_t> list_items;
  std::vector<Tensor> tensors;
  // Per tensor, its storage data pointer. The pipeline hands it to
  // identity, its one reader, which frees it once every observation has its
  // allocation id (AssignIdentity).
  std::vector<uint64_t> tensor_ptrs;
  // Distinct TensorImpl addresses the tensors name, plus one: impl numbers
  // are 1 .. num_impls - 1.
  uint32_t num_impls = 1;
  // The producer's ids, per tensor and per allocation (parallel to `tensors`
  // and `allocs`); filled only when header.has_ids, empty otherwise.
  std::vector<ProducerIds> tensor_ids;
  std::vector<ProducerIds> alloc_ids;
  // Shapes and dtypes, only when the reader was asked for them
  // (ReadOptions::keep_shapes; `memtl events` and `memtl explain` ask):
  // per tensor (parallel to `tensors`, else empty), its shape and dtype as
  // an id into `shapes`, the distinct ones as memtl prints them
  // ("[32, 64] float32"); kNone32 for a tensor known by its pointer only.
  // A trace repeats few shapes, so this is 4 bytes per tensor. The tensor
  // ids go with the tensor records; `shapes` stays.
  std::vector<uint32_t> tensor_shapes;
  StringTable shapes;

  // Ops whose end time the producer did not record.
  uint64_t ops_without_end = 0;
  // Ops whose recorded end precedes their start.
  uint64_t ops_ending_before_start = 0;
  // Events (not allocations) that start before their parent.
  uint64_t events_before_parent = 0;

  // Operator schemas carried by the trace: op name -> schema strings.
  std::vector<std::pair<std::string, std::vector<std::string>>> schemas;

  DeviceIndex InternDevice(std::string_view name);
  void Finish();  // called by readers once every record is in: device ranks

  // The event's name: the op's or python call's, "[memory]" for allocations.
  const std::string& Name(const Event& e) const;
  uint32_t PyLine(uint32_t py) const { return py < py_lines.size() ? py_lines[py] : 0; }
  // Python call `py` (Event::payload), with its module or optimizer.
  PyInfo Py(uint32_t py) const {
    PyInfo info;
    info.name = py_names[py];
    if (py_linked[py]) {
      const auto it = std::lower_bound(py_links.begin(), py_links.end(), py,
                                       [](const PyLink& l, uint32_t p) { return l.py < p; });
      info.index = it->index;
      info.is_optimizer = it->is_optimizer;
    }
    return info;
  }
  // The arguments of op `op` (an index into `ops`, an op event's payload):
  // they end where the next op's begin.
  ArgList ArgsOf(uint32_t op) const {
    const OpInfo& info = ops[op];
    const size_t end = op + 1 < ops.size() ? ops[op + 1].args_begin : arg_kinds.size();
    return ArgList(arg_kinds.data() + info.args_begin, arg_refs.data() + info.refs_begin,
                   list_items.data(), static_cast<uint32_t>(end - info.args_begin));
  }
  TensorKey KeyOf(TensorId id, AllocationId a, DeviceIndex d) const {
    return TensorKey{id, a, devices[d].rank, d};
  }
};

// The records that only the first stages read: the tensor observations
// (identity, the size map, the shapes of keys) and the allocations'
// addresses (identity, the allocation checks, the untracked allocations'
// liveness, the inference). The pipeline takes them from the trace it
// analyzes before any stage runs (TakeTensorRecords) and holds them in a
// scope that ends with the size map, so that their memory goes before the
// op tree's facts and the graph add theirs; every later stage reads tensors
// through the key table and the size map.
struct TensorRecords {
  std::vector<Tensor> tensors;
  std::vector<ProducerIds> tensor_ids;  // Trace::tensor_ids
  std::vector<uint32_t> tensor_shapes;  // Trace::tensor_shapes
  std::vector<uint64_t> alloc_ptrs;     // Trace::alloc_ptrs
};

// Moves the tensor records and allocation addresses out of `trace`, whose
// arrays of them are then empty (Trace::tensor_ptrs stays: identity takes it).
TensorRecords TakeTensorRecords(Trace& trace);

}  // namespace memtl

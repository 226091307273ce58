// The execution-trace join's state (et_join.h), shared by its parts:
// et_join.cpp (the ops joined, storages mapped to addresses, the memory
// from before the profile), et_join_blocks.cpp, et_join_tracer.cpp (the
// python tracer's records) and et_join_trace.cpp (the joined Trace built).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/read/et/et_join.h"
#include "core/read/et/et_reader.h"
#include "core/read/et/et_schemas.h"

namespace memtl::et_join_detail {

using read::DtypeOfItemsize;
using read::EtArg;
using read::EtArgKind;
using read::EtNode;
using read::EtTensor;
using read::ExecutionTrace;

struct AddrKey {
  uint64_t addr;
  DeviceIndex device;
  bool operator==(const AddrKey&) const = default;
};
struct AddrHash {
  size_t operator()(const AddrKey& k) const {
    return std::hash<uint64_t>()(k.addr * 0x9E3779B97F4A7C15ull + k.device);
  }
};

// Storage ids never allocated in the profile get an address of their own,
// above any user-space address and below the Kineto reader's synthetic ones.
inline constexpr uint64_t kSyntheticStorage = uint64_t{1} << 62;

// A block's lifetime at one address, in positions of the events in time
// order: from the one after its allocation to its free's (from 0 for a
// block allocated before the profile, to the end for one never freed).
struct Lifetime {
  uint32_t begin, end;
};

struct TracerEvidence;  // et_join_tracer.cpp
struct TraceOut;        // et_join_trace.cpp

// A python call's module or optimizer record, rebuilt by TracerRecords
// (what PyTorch's python tracer reports on the call); tensors are the
// execution trace's (indices into ExecutionTrace::tensors).
struct TracerRecord {
  bool optimizer = false;
  // A module: its class and its parameters by argument name. The tracer's
  // `self` of a module is not known.
  std::string cls;
  std::vector<std::pair<std::string, uint32_t>> module_params;
  // An optimizer: its object (0: none), its parameters, and its state.
  uint64_t self = 0;
  std::vector<uint32_t> params, state;
};

class Join {
 public:
  Join(const KinetoRead& k, const ExecutionTrace& et) : k_(k), t_(k.trace), et_(et) {}

  // Ops by record-function id and name.
  void JoinOps(JoinedTrace& out);

  // Storage ids to addresses, from the allocations made directly inside
  // joined ops (et_join.h says how). Allocations, frees and reads are
  // taken in time order (ties in emission order), the allocator's: where
  // the roots of two threads overlap in time (the autograd engine's
  // device thread during a GPU backward pass), emission order puts one
  // thread's later events before the other's earlier ones.
  void MapStorages(JoinedTrace& out);

  // The Kineto reader's allocation of the memory from before the profile
  // (per device: the allocator's total at its first event less what the
  // profile frees) holds the storages that the execution trace shows from
  // before the profile: those no allocation of the profile maps, which
  // the memtl trace gives addresses of their own and the timeline counts
  // as pre-existing tensors. Counted in both, they were counted twice (the
  // joined total above the allocator's and above memtl's own trace by
  // their bytes). So the allocation keeps only the rest, the memory that
  // no tensor shows, and goes where nothing is left: a CPU allocator's
  // total counts only memory allocated while a profiler ran, so it can be
  // below the tensors'. A storage's bytes are those the size map gives a
  // tensor without allocations: the largest SizeOfObservation of its
  // observations (the joined ops' inputs, all the memtl trace has).
  void PreProfile(JoinedTrace& out);

  // Where the Kineto trace was recorded with the python tracer (its
  // python_function events), PyTorch's memory profiler reads each module
  // call's parameters and each optimizer step's parameters and state from
  // the tracer, which neither file records. Rebuilt from the joined ops
  // (et_join_tracer.cpp), as records on those calls (py_records_):
  // - a module call's parameters: the tensors from before the profile (no
  //   op of the profile creates them) that an op inside the call, and in no
  //   module inside it, takes at a weight or bias argument of its schema;
  // - an optimizer step's (the Optimizer.step# annotation's), on its
  //   _optimizer_step_code call: its parameters, the storages from before
  //   the profile that the step's ops touch, that ops outside every step
  //   read and none writes in place (gradients are written: AccumulateGrad,
  //   zero_grad; or allocated in the profile); its
  //   state, the storages that only steps' ops touch, alive at that call.
  // Without the tracer there are no such calls, and the join gives what
  // PyTorch gives without it.
  void TracerRecords();
  // Its steps (et_join_tracer.cpp): the scopes around each event, what
  // ops touch inside and outside optimizer steps, the records written.
  void TracerScopes(TracerEvidence& evidence) const;
  void TracerTouches(TracerEvidence& evidence) const;
  void ModuleRecords(const TracerEvidence& evidence);
  void OptimizerRecords(const TracerEvidence& evidence);

  // The joined Trace (et_join_trace.cpp): the Kineto events with the
  // joined nodes' inputs as their arguments and the tracer's records, then
  // the schemas. `keep_shapes`: ReadOptions::keep_shapes.
  Status Build(JoinedTrace& out, bool keep_shapes) const;

 private:
  // A block allocated before the profile and freed in it (CUDA reports
  // such frees; the CPU allocator does not) holds a storage from before the
  // profile: one that no allocation maps, that joined ops read only before
  // the free and never create, on the block's device, of exactly its
  // bytes. Mapped where exactly one storage fits so (else which is not
  // known), its tensor ends at the free, as in PyTorch's timeline; unmapped,
  // it outlived the free, which an untracked block carried.
  void MapFreedBefore(const std::vector<uint32_t>& frees);

  // Code that a compiler generated (inductor's kernels, a compiled
  // backward) allocates its outputs without an op, so no op's subtree
  // shows the storage that a block made there holds: a bias gradient that
  // the compiled backward returns is read first by AccumulateGrad, after
  // the region. Each such block (`allocs`, left unmapped, in time order;
  // `free_of` each allocation's free) holds the storage that no
  // allocation maps and no joined op creates, of its device, all of whose
  // reads fall inside its lifetime: of exactly its bytes if one is, else
  // the first that fits (the caching allocator rounds sizes up); among
  // several, the one read first. Returns how many it mapped.
  size_t MapCompiled(const std::vector<uint32_t>& allocs, const std::vector<uint32_t>& free_of);

  // Whether allocation event `e` was made inside a compiled region: an
  // enclosing op or annotation is one torch.compile emits around its
  // code (Torch-Compiled Region, CompiledFunction, CompiledFunctionBackward,
  // ## Call CompiledFxGraph ##).
  bool InCompiledRegion(uint32_t e) const;

  // The storage that allocation event `e`, made directly inside op event
  // `op` (joined; kNone32: none, then only exact reads count), holds:
  // among the storages that can be at its address, those of the tensors
  // that the ops after it in `op`'s subtree and before `end` (the
  // subtree's end or the allocation's free) read (at most kScan events
  // on; without `op`, the ops after it in time until `end`, its free or
  // kNone32), then `op`'s outputs unless the allocation is freed inside
  // `op`; the first whose bytes it holds exactly, else the first whose
  // bytes fit in it (an output resized smaller, an allocator that rounds
  // sizes up). 0: none. A storage id is one data pointer, so a storage
  // read before `e` can be at its address only if that address was freed
  // since (memory from before the profile, or a block the allocator hands
  // out again: its storage id is the same).
  uint64_t Candidate(uint32_t e, uint32_t op, uint32_t end, bool freed_inside) const;

  // Whether `storage` can be the data pointer of the blocks at the address
  // with `lifetimes`: a storage id is one data pointer for the whole run,
  // so every read of it is made while a block is allocated there (not
  // before the first, not between a free and the next allocation: a
  // buffer from before the profile is not the scalar that an op wraps
  // from a Python number beside it), and an op that creates it (an output
  // that is none of its inputs) starts while none is (a workspace is not
  // the tensor that an op after its allocation creates).
  bool FitsLifetimes(uint64_t storage, const std::vector<Lifetime>& lifetimes) const;

  // Whether storage `held`, mapped to the address of allocation event `e`
  // at an earlier block, may give the address up at `e` (AddressGoesTo):
  // ops read it, none creates it, and none reads it in `e`'s block (of the
  // address's `lifetimes`). Each check reads `held` alone, so most reused
  // blocks cost no scan.
  bool MayGiveUp(uint64_t held, uint32_t e, const std::vector<Lifetime>& lifetimes) const;

  // The indices of `lifetimes` in which a joined op reads `storage`, in order.
  std::vector<size_t> LifetimesRead(uint64_t storage, const std::vector<Lifetime>& lifetimes) const;

  // Whether an address whose blocks have `lifetimes`, mapped to storage
  // `held` at its first block, is `other`'s instead: a later block there
  // holds `other` by Candidate's rules while `held` may give the address
  // up (MayGiveUp), and `other` is read in every block `held` is read in
  // and in more. A storage id is one data pointer for the whole run, so an
  // address has one storage id: `held` only tied with `other` in the first
  // block (both read there, the first fitting argument won: the scalar an
  // op wraps from a Python number beside a buffer from before the
  // profile), and it is `other` that explains the blocks. `held` goes back
  // to being unmapped (from before the profile, or mapped by a later
  // allocation).
  bool AddressGoesTo(uint64_t other, uint64_t held, const std::vector<Lifetime>& lifetimes) const;

  // The lifetime of `tensor`'s storage's address that event `e` falls in
  // (an index into its lifetimes; 0 for a storage from before the profile,
  // whose address is its own; kNone32 when the address is free then).
  // `e` is an op's last event for its outputs (allocated inside it).
  uint32_t BlockAt(const EtTensor& tensor, uint32_t e) const;

  // The index of the lifetime that position `p` is in; lifetimes.size()
  // when none.
  static size_t LifetimeAt(uint32_t p, const std::vector<Lifetime>& lifetimes);

  // How many of the positions `at` (in order) are in one of `lifetimes`.
  static size_t Inside(const std::vector<uint32_t>& at, const std::vector<Lifetime>& lifetimes);

  // Fills dataless_ from every node of the execution trace.
  void FindDataless();

  // Adds to dataless_ the storages of wrapper subclasses (DTensor,
  // FakeTensor, float8 and NF4 wrappers). A joined PythonSubclass node
  // dispatches them to Python, which runs the op again on the tensors they
  // wrap: those hold the data, and the wrapper's own storage is the null
  // data pointer's, shared by every wrapper. So a storage that the node
  // takes and no op under it reads is a wrapper's (a plain tensor beside
  // the wrappers, such as a scalar, is passed down and read there).
  // Reads end_.
  void FindWrappers();

  // Whether the tensor's storage id names a data pointer that holds its
  // data: a storage id is only trusted for a tensor with data.
  bool HasData(const EtTensor& tensor) const {
    return tensor.storage_id != 0 && tensor.numel > 0 && !dataless_.contains(tensor.storage_id);
  }

  uint64_t Pointer(const EtTensor& tensor) const {
    if (tensor.storage_id == 0 || dataless_.contains(tensor.storage_id)) return 0;
    if (const auto it = addr_of_.find(tensor.storage_id); it != addr_of_.end()) return it->second;
    if (!nonempty_.contains(tensor.storage_id)) return 0;  // the null data pointer
    return kSyntheticStorage | tensor.storage_id;
  }

  // A storage from before the profile: an address of its own (Pointer).
  bool PreExisting(const EtTensor& tensor) const {
    return tensor.storage_id != 0 && !addr_of_.contains(tensor.storage_id) &&
           nonempty_.contains(tensor.storage_id);
  }

  // The Kineto reader's allocation of memory from before the profile.
  bool IsPreProfile(uint32_t e) const {
    const Event& ev = t_.events[e];
    if (ev.kind != EventKind::kAlloc || ev.parent != kNone32) return false;
    const uint64_t ptr = t_.alloc_ptrs[ev.payload];
    return ptr >= kPreProfileAddress && ptr - kPreProfileAddress < t_.devices.size();
  }

  // A tensor record of execution-trace tensor `index` (its index in the
  // Trace), and a node's inputs as an op's arguments (et_join_trace.cpp).
  uint32_t AddTensor(TraceOut& out, uint32_t index) const;
  void Args(TraceOut& out, const EtNode& node) const;
  void TracerRecordOf(TraceOut& out, const TracerRecord& record, Event& event) const;

  const KinetoRead& k_;
  const Trace& t_;
  const ExecutionTrace& et_;
  std::vector<uint32_t> node_of_op_;
  std::unordered_map<uint64_t, uint64_t> addr_of_;
  std::unordered_set<uint64_t> nonempty_;
  // The storage ids of the null data pointer. The execution trace numbers
  // data pointers, and a tensor without data has the null one: an empty
  // tensor, a meta tensor, a wrapper subclass (FSDP2's DTensor), a storage
  // resized to 0. All of them share its id, whatever their numel, so the
  // id is no storage: as one, it would be a phantom pre-existing tensor
  // that every such tensor's op writes to. Known by a tensor on the meta
  // device (which has no memory) or an empty one that an op creates (the
  // allocators give no memory for 0 bytes).
  std::unordered_set<uint64_t> dataless_;
  // MapStorages' walk in time order: the events by time (ties in index
  // order) and each event's position there.
  std::vector<uint32_t> by_time_;
  // Each event's subtree end, by index (one past its last descendant).
  std::vector<uint32_t> end_;
  std::vector<uint32_t> time_pos_;
  // Each storage's reads and creations by joined ops (positions) and each
  // address's lifetimes.
  std::unordered_map<uint64_t, std::vector<uint32_t>> reads_, creations_;
  std::unordered_map<AddrKey, std::vector<Lifetime>, AddrHash> lifetimes_;
  // The pre-profile allocations' bytes, less the pre-existing storages'
  // (0: dropped), by event.
  std::unordered_map<uint32_t, int64_t> pre_profile_bytes_;
  mutable read::EtTensorLists tensor_lists_{et_};
  // TracerRecords': by python-call event, its module or optimizer.
  std::unordered_map<uint32_t, TracerRecord> py_records_;
};

}  // namespace memtl::et_join_detail

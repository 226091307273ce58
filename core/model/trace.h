// The in-memory trace: a flat, producer-independent model of a profiled run.
//
// Events keep the shape of PyTorch's event tree (each names its parent) but
// live in flat arrays indexed by uint32, with side tables per event kind, so
// that a trace of millions of events costs tens of bytes per event and no
// pointer chasing. Readers fill it; later stages only add their own results
// (identity writes the key table, resolves torch 1.13's python-tracer
// tensors, renumbers split TensorImpls in Tensor::impl and frees the
// storage pointers it alone reads; nothing else is mutated).
#pragma once

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/model/ids.h"

namespace memtl {

inline constexpr uint32_t kNone32 = 0xffffffffu;

enum class EventKind : uint8_t { kOp, kAlloc, kPy, kOther };

// PyTorch's at::RecordScope, in its declaration order.
enum class RecordScope : uint8_t {
  kFunction,
  kBackwardFunction,
  kTorchscriptFunction,
  kKernelFunctionDtype,
  kCustomClass,
  kBuildFeature,
  kLiteInterpreter,
  kUserScope,
  kStaticRuntimeOp,
  kStaticRuntimeModel,
};
bool ParseRecordScope(std::string_view s, RecordScope* out);
std::string_view RecordScopeName(RecordScope s);

// What the profiler observed at one argument position of an op. Only the kind
// matters to the analysis (schema matching); scalar values are not kept.
enum class ArgKind : uint8_t {
  kNone,
  kTensor,
  kTensorList,
  kBool,
  kInt,
  kFloat,
  kComplex,
  kString
};

// The member types of an input iterator whose operator* returns a T by value
// (the model's views: ArgList here, EventOrder in core/graph/op_tree.h).
template <typename T>
struct ValueIterator {
  using iterator_category = std::input_iterator_tag;
  using value_type = T;
  using difference_type = std::ptrdiff_t;
  using pointer = void;
  using reference = T;
};

// One argument of an op as the stages read it (Trace::Args); the trace does
// not store it in this form (see Trace::arg_kinds).
struct Arg {
  uint32_t begin = 0;  // kTensor: tensor index; kTensorList: index into list_items
  uint32_t count = 0;  // kTensorList: number of elements
  ArgKind kind = ArgKind::kNone;
};

// Whether an argument of this kind has an entry in Trace::arg_refs.
inline bool HasArgRef(ArgKind k) { return k == ArgKind::kTensor || k == ArgKind::kTensorList; }

// An op's arguments in order, as Arg values (Trace::Args). Iterators hold
// what they read, so they outlive the ArgList they came from.
class ArgList {
 public:
  class Iterator : public ValueIterator<Arg> {
   public:
    Iterator(const ArgKind* kind, const uint32_t* ref, const uint32_t* list_items)
        : kind_(kind), ref_(ref), list_items_(list_items) {}
    Arg operator*() const {
      Arg a;
      a.kind = *kind_;
      if (a.kind == ArgKind::kTensor) {
        a.begin = *ref_;
      } else if (a.kind == ArgKind::kTensorList) {
        a.begin = *ref_ + 1;  // the list's length is stored before its elements
        a.count = list_items_[*ref_];
      }
      return a;
    }
    Iterator& operator++() {
      ref_ += HasArgRef(*kind_) ? 1 : 0;
      ++kind_;
      return *this;
    }
    bool operator==(const Iterator& o) const { return kind_ == o.kind_; }

   private:
    const ArgKind* kind_;
    const uint32_t* ref_;
    const uint32_t* list_items_;
  };
  ArgList(const ArgKind* kinds, const uint32_t* refs, const uint32_t* list_items, uint32_t count)
      : kinds_(kinds), refs_(refs), list_items_(list_items), count_(count) {}
  Iterator begin() const { return Iterator(kinds_, refs_, list_items_); }
  Iterator end() const { return Iterator(kinds_ + count_, refs_, list_items_); }
  uint32_t size() const { return count_; }
  bool empty() const { return count_ == 0; }

 private:
  const ArgKind* kinds_;
  const uint32_t* refs_;
  const uint32_t* list_items_;
  uint32_t count_;
};

enum class Layout : uint8_t {
  kStrided,
  kSparseCoo,
  kSparseCsr,
  kSparseCsc,
  kSparseBsr,
  kSparseBsc,
  kMkldnn,
  kOther
};
bool ParseLayout(std::string_view s, Layout* out);

// Element sizes by PyTorch dtype name; 0 when the name is unknown.
uint32_t ElementSize(std::string_view dtype);

// One observation of a tensor (PyTorch's TensorMetadata), in 12 bytes (about
// 0.5 per event). Its ids are not here: the producer's, when it states them,
// are in Trace::tensor_ids, and identity's result is the key table. Shapes,
// dtype and layout are not kept either: only the size they give. Nor is the
// TensorImpl address: identity only compares impls, so the reader numbers
// the distinct addresses densely (Trace::num_impls), as it interns names.
// The storage pointer is beside it (Trace::tensor_ptrs): only identity's
// first steps read it, and it is freed once they have. Every field is
// 4-byte aligned (the 47-bit size is kept in halves), so the array packs at
// 12 bytes a record with no misaligned member.
struct Tensor {
  uint32_t impl = 0;  // dense TensorImpl number from 1; 0: none
  // What PyTorch's SizeMap takes from this observation, in bytes:
  // SizeOfObservation(), or kUnsized for a layout other than strided (which
  // the size map skips); at most kMaxTensorBytes, kept in 47 bits.
  int64_t bytes() const {
    const uint64_t raw = uint64_t{bytes_hi_} << 32 | bytes_lo_;
    return static_cast<int64_t>(raw << 17) >> 17;  // sign-extends bit 46
  }
  void set_bytes(int64_t b) {
    const auto raw = static_cast<uint64_t>(b);
    bytes_lo_ = static_cast<uint32_t>(raw);
    bytes_hi_ = static_cast<uint32_t>(raw >> 32) & 0x7fff;
  }

 private:
  uint32_t bytes_lo_ = 0;
  uint32_t bytes_hi_ : 15 = 0;

 public:
  uint32_t partial : 1 = 0;  // only the pointer is known (torch 1.13 python tracer)
  uint32_t device : 16 = 0;  // a DeviceIndex
};
static_assert(sizeof(Tensor) == 12);
inline constexpr int64_t kUnsized = -1;
inline constexpr int64_t kMaxTensorBytes = (int64_t{1} << 46) - 1;  // 64 TiB

// The size map's bytes for a strided tensor: the largest size * stride over
// its dimensions (PyTorch zips sizes with strides, each [1] when empty) times
// the element size, at least 0 and at most kMaxTensorBytes (no real tensor
// comes near; the bound keeps absurd shapes in a bad trace from overflowing).
int64_t SizeOfObservation(const int64_t* sizes, size_t num_sizes, const int64_t* strides,
                          size_t num_strides, uint32_t element_size);

// The ids a producer states for one tensor observation or allocation
// (PyTorch >= 2.0); invalid where it stated none.
struct ProducerIds {
  TensorId id;
  AllocationId allocation;
};

// The per-kind records keep only what a stage reads (a trace of 10^7 events
// holds millions of each): the producer's thread ids and sequence numbers
// are checked by the reader but not kept, and the allocator's running totals
// only as a maximum per device (DeviceInfo). Names live here, not in Event:
// allocations have none.
//
// An op in 12 bytes. Its arguments are arg_kinds[args_begin, next op's
// args_begin): readers append each op's arguments after the previous op's,
// so the count is not stored (Trace::Args).
struct OpInfo {
  uint32_t args_begin = 0;  // into Trace::arg_kinds
  uint32_t refs_begin = 0;  // into Trace::arg_refs
  uint32_t name : 24 = 0;   // string id, < kMaxNames
  RecordScope scope : 8 = RecordScope::kFunction;
};
static_assert(sizeof(OpInfo) == 12);
// String ids an op can name. The reader refuses a trace with more distinct
// names (each at least a few bytes of JSON per use: gigabytes of names).
inline constexpr uint32_t kMaxNames = uint32_t{1} << 24;
// The reader refuses an op with more arguments (a line would need more than
// 80 MB of text to hold them; the reader's line limit is 64 MiB).
inline constexpr uint32_t kMaxOpArgs = (uint32_t{1} << 24) - 1;

// An allocation (bytes > 0) or free (bytes < 0) in 8 bytes. Its address is
// beside it (Trace::alloc_ptrs): only the checks, identity and the
// timeline's untracked allocations read it, and the pipeline frees it once
// they have (Trace::untracked_live).
struct AllocInfo {
  int64_t bytes : 48 = 0;  // |bytes| <= kMaxAllocBytes (the reader checks)
  DeviceIndex device : 16 = 0;
};
static_assert(sizeof(AllocInfo) == 8);
inline constexpr int64_t kMaxAllocBytes = (int64_t{1} << 47) - 1;  // 128 TiB

struct StateEntry {
  uint32_t name = 0;  // string id
  uint32_t tensor = kNone32;
};

struct ParamInfo {
  uint32_t name = kNone32;  // string id (modules only)
  uint32_t tensor = kNone32;
  uint32_t grad = kNone32;
  uint32_t state_begin = 0;  // into Trace::states
  uint32_t state_count = 0;
};

struct ModuleInfo {
  bool has_self = false;
  uint64_t self = 0;
  uint32_t cls = 0;  // string id
  uint32_t params_begin = 0;
  uint32_t params_count = 0;
};

struct OptimizerInfo {
  bool has_self = false;
  uint64_t self = 0;
  uint32_t params_begin = 0;
  uint32_t params_count = 0;
  uint32_t state_begin = 0;  // state not attributed to a parameter
  uint32_t state_count = 0;
};

// A python call: its name, and the module or the optimizer it reports
// (never both; the reader checks), as Trace::Py gives it. The trace keeps
// the name (4 bytes) per call, and the module or optimizer only for the few
// calls that report one (PyLink).
struct PyInfo {
  uint32_t name = 0;              // string id
  uint32_t index : 31 = kNone31;  // into Trace::modules or Trace::optimizers; kNone31: neither
  uint32_t is_optimizer : 1 = 0;

  static constexpr uint32_t kNone31 = 0x7fffffffu;
  uint32_t module() const { return index == kNone31 || is_optimizer ? kNone32 : index; }
  uint32_t optimizer() const { return index == kNone31 || !is_optimizer ? kNone32 : index; }
};
static_assert(sizeof(PyInfo) == 8);

// The module or optimizer of one python call (Trace::py_links).
struct PyLink {
  uint32_t py = 0;  // the call's record (Event::payload)
  uint32_t index : 31 = 0;
  uint32_t is_optimizer : 1 = 0;
};

// 8 bytes (a trace has one per record); its start time is in
// Trace::event_t0 (4 bytes more). End times are not kept: the analysis
// orders events by start and nests them by parent links; the reader checks
// end times (Trace::ops_without_end, ops_ending_before_start) and drops
// them. Names and scopes are in the kind's record (Trace::Name,
// OpInfo::scope). A stage that needs durations would keep them in OpInfo
// and PyInfo, not here.
struct Event {
  uint32_t parent = kNone32;
  // Index into ops / allocs / pys / other_names by kind (< kMaxEvents).
  uint32_t payload : 30 = 0;
  EventKind kind : 2 = EventKind::kOther;
};
static_assert(sizeof(Event) == 8);

// Every event's start time in nanoseconds (allocations: their time), in 4
// bytes an event instead of 8. Events come in pre-order, so the times of
// neighbouring events are close: each block of kBlock events stores its
// first event's time in full and every event's offset from it in 32 bits.
// An offset that does not fit (events more than 2.1 s apart within one
// block, or out of order by as much) is kept in full in a side list, which
// a real trace leaves nearly empty. operator[] is a load and an add.
class StartTimes {
 public:
  static constexpr uint32_t kBlockShift = 10;  // 1024 events per block
  static constexpr int32_t kFar = INT32_MIN;   // the time is in far_

  int64_t operator[](uint32_t i) const {
    const int32_t r = rel_[i];
    if (r == kFar) return Far(i);
    // Modulo 2^64, as push_back subtracted: exact for any int64 time.
    return static_cast<int64_t>(static_cast<uint64_t>(base_[i >> kBlockShift]) +
                                static_cast<uint64_t>(int64_t{r}));
  }
  void push_back(int64_t t0);
  size_t size() const { return rel_.size(); }
  bool empty() const { return rel_.empty(); }
  size_t capacity() const { return rel_.capacity(); }
  void reserve(size_t n) { rel_.reserve(n); }
  void Free();
  size_t num_far() const { return far_.size(); }

 private:
  int64_t Far(uint32_t i) const;
  std::vector<int32_t> rel_;
  std::vector<int64_t> base_;                      // per block
  std::vector<std::pair<uint32_t, int64_t>> far_;  // (event, time), by event
};

// The reader refuses more events (a trace that large would need 17 GiB here).
inline constexpr uint32_t kMaxEvents = uint32_t{1} << 30;

struct DeviceInfo {
  std::string name;   // as PyTorch prints it: "cpu", "cuda:0"
  std::string type;   // "cpu", "cuda"
  int index = -1;     // -1: no index
  uint32_t rank = 0;  // position when sorted by (type, index)
  // The largest allocator totals (total_allocated, total_reserved) that an
  // allocation event on this device reported; 0 when none did.
  int64_t max_total_allocated = 0;
  int64_t max_total_reserved = 0;
};

class StringTable {
 public:
  uint32_t Intern(std::string_view s);
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
};

// A dense index of the TensorKeys identity produced, so that later stages
// keep arrays indexed by key slot instead of hash maps keyed by TensorKey.
// Slots are numbered in TensorKey order (id, allocation id, device rank), so
// comparing slots compares keys. Written by identity (BuildKeyTable).
struct KeyTable {
  std::vector<TensorKey> keys;      // by slot, sorted, distinct
  std::vector<uint32_t> of_tensor;  // per trace tensor: its slot, or kNone32
  std::vector<uint32_t> of_alloc;   // per allocation event: its slot, or kNone32
  std::vector<uint32_t> id_slot;    // per slot: dense index of keys[slot].id
  uint32_t num_ids = 0;

  uint32_t size() const { return static_cast<uint32_t>(keys.size()); }
  // The slot of `key`, or kNone32 (a binary search; for tests and tools).
  uint32_t Find(const TensorKey& key) const;
};

struct TraceHeader {
  int version = 0;
  std::string producer;
  std::string torch_version;
  bool has_ids = false;     // tensors carry producer tensor/allocation ids
  int profile_memory = -1;  // the producer's profile_memory setting: 1, 0, or -1 unknown
};

struct Trace {
  TraceHeader header;
  StringTable strings;
  std::vector<DeviceInfo> devices;

  std::vector<Event> events;  // pre-order of the event tree
  StartTimes event_t0;        // per event
  std::vector<OpInfo> ops;
  std::vector<AllocInfo> allocs;
  // Per allocation, its address (parallel to `allocs`). The pipeline frees
  // it after identity, once UntrackedAllocationsLive has read it.
  std::vector<uint64_t> alloc_ptrs;
  // Python calls: the name of each (string id), and for the calls that
  // report a module or an optimizer (about one in twenty), which, by call
  // in order, with a bit per call saying whether it has one. Read them
  // through Py().
  std::vector<uint32_t> py_names;
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
  // kNone32). Read them through Args().
  std::vector<ArgKind> arg_kinds;
  std::vector<uint32_t> arg_refs;
  std::vector<uint32_t> list_items;
  std::vector<Tensor> tensors;
  // Per tensor, its storage data pointer. Identity frees it once every
  // observation has its allocation id (AssignIdentity).
  std::vector<uint64_t> tensor_ptrs;
  // Distinct TensorImpl addresses the tensors name, plus one: impl numbers
  // are 1 .. num_impls - 1.
  uint32_t num_impls = 1;
  // The producer's ids, per tensor and per allocation (parallel to `tensors`
  // and `allocs`); filled only when header.has_ids, empty otherwise.
  std::vector<ProducerIds> tensor_ids;
  std::vector<ProducerIds> alloc_ids;

  // Ops whose end time the producer did not record.
  uint64_t ops_without_end = 0;
  // Ops whose recorded end precedes their start.
  uint64_t ops_ending_before_start = 0;
  // Events (not allocations) that start before their parent.
  uint64_t events_before_parent = 0;

  // Operator schemas carried by the trace: op name -> schema strings.
  std::vector<std::pair<std::string, std::vector<std::string>>> schemas;

  // Written by identity.
  KeyTable key_table;
  // Per allocation record with no key, whether its (address, device) was
  // live among such allocations just before it, in the op tree's pre-order
  // (UntrackedAllocationsLive, core/graph/size_map.h): what the timeline needs of
  // the addresses. Written by the pipeline after identity; empty before.
  std::vector<bool> untracked_live;

  DeviceIndex InternDevice(std::string_view name);
  // Frees `tensors`, `tensor_ptrs` and `tensor_ids` (the pipeline does after the size map;
  // key_table.of_tensor still gives every observation's key).
  void ReleaseTensorRecords();
  // Frees what only the stages up to the passes read: op arguments and
  // their lists, op and python-call records with their modules, optimizers
  // and parameters, and the key slots of tensor observations. Events,
  // allocations and the keys themselves stay (the timeline reads them).
  void ReleaseOpDetails();
  // Frees every record; the header, strings and devices stay (what an
  // export of a timeline already built still reads).
  void ReleaseRecords();
  void Finish();  // called by readers once every record is in: device ranks

  // The event's name: the op's or python call's, "[memory]" for allocations.
  // Reads the kind's record: not after ReleaseOpDetails (but allocations').
  const std::string& Name(const Event& e) const;
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
  // `op` is an element of `ops`: its arguments end where the next op's begin.
  ArgList Args(const OpInfo& op) const {
    const OpInfo* next = &op + 1;
    const size_t end = next != ops.data() + ops.size() ? next->args_begin : arg_kinds.size();
    return ArgList(arg_kinds.data() + op.args_begin, arg_refs.data() + op.refs_begin,
                   list_items.data(), static_cast<uint32_t>(end - op.args_begin));
  }
  TensorKey KeyOf(TensorId id, AllocationId a, DeviceIndex d) const {
    return TensorKey{id, a, devices[d].rank, d};
  }
};

}  // namespace memtl

// The per-kind records of the Trace (trace.h): events, ops, allocations,
// tensor observations, python calls with their modules and optimizers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

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
// dtype and layout are not kept either: only the size they give (the reader
// keeps shapes and dtypes beside it when asked: Trace::tensor_shapes). Nor is the
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
// The most dimensions a tensor's sizes or strides may list (PyTorch's own
// limit is 64; the readers refuse more than this).
inline constexpr size_t kMaxDims = 4096;

// The size map's bytes for a strided tensor: the largest size * stride over
// its dimensions (PyTorch zips sizes with strides, each [1] when empty) times
// the element size, at least 0 and at most kMaxTensorBytes (no real tensor
// comes near; the bound keeps absurd shapes in a bad trace from overflowing).
int64_t SizeOfObservation(const int64_t* sizes, size_t num_sizes, const int64_t* strides,
                          size_t num_strides, uint32_t element_size);

// Whether those bytes, before the clamp, pass kMaxTensorBytes: a reader
// refuses such a tensor rather than take a silently wrong size. Exact for
// dimensions below 2^48 (the readers' bound): the product is made in 128
// bits.
bool PastMaxTensorBytes(const int64_t* sizes, size_t num_sizes, const int64_t* strides,
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
// so the count is not stored (Trace::ArgsOf).
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
// beside it (Trace::alloc_ptrs, then TensorRecords::alloc_ptrs): only the
// checks, identity, the inference and the timeline's untracked allocations
// read it, and it goes once they have (what the timeline needs of it is
// kept apart: UntrackedAllocationsLive, core/graph/size_map.h).
struct AllocInfo {
  int64_t bytes : 48 = 0;  // |bytes| <= kMaxAllocBytes (the reader checks)
  DeviceIndex device : 16 = 0;
};
static_assert(sizeof(AllocInfo) == 8);
inline constexpr int64_t kMaxAllocBytes = (int64_t{1} << 47) - 1;  // 128 TiB
// The address of the first allocation a reader adds for memory from
// before the profile (the Kineto reader: one per device, at consecutive
// addresses), above any real address and below the synthetic ones of
// traces without "Addr"; the execution-trace join and the inference
// (core/infer/) find them by it.
inline constexpr uint64_t kPreProfileAddress = (uint64_t{1} << 63) - (uint64_t{1} << 32);
// What part of that memory an allocation stands for: the Kineto reader
// splits off, on one device, the leaves a backward pass accumulates into
// and the optimizer state kept for them (core/read/kineto/kineto_pre_profile.h),
// each at its own address above the rest's; the rest is what nothing in
// the trace explains.
enum class PreProfilePart : uint8_t { kRest, kLeaves, kOptimizerState };
inline constexpr uint64_t kPreProfilePartStride = uint64_t{1} << 16;  // > any DeviceIndex
inline constexpr uint64_t PreProfileAddress(PreProfilePart part, size_t device) {
  return kPreProfileAddress + static_cast<uint64_t>(part) * kPreProfilePartStride + device;
}
// The part an address stands for; nullopt for any other address.
inline constexpr std::optional<PreProfilePart> PreProfilePartOf(uint64_t ptr, size_t num_devices) {
  if (ptr < kPreProfileAddress) return std::nullopt;
  const uint64_t part = (ptr - kPreProfileAddress) / kPreProfilePartStride;
  const uint64_t device = (ptr - kPreProfileAddress) % kPreProfilePartStride;
  if (part > static_cast<uint64_t>(PreProfilePart::kOptimizerState) || device >= num_devices)
    return std::nullopt;
  return static_cast<PreProfilePart>(part);
}

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
  // The model's own name for it (named_parameters(): "layer1.0.conv1.weight";
  // string id), where the trace's header lists the model (memtl.save's
  // model=); kNone32 otherwise.
  uint32_t qualname = kNone32;
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

// The reader refuses more events (a trace that large would need 17 GiB here).
inline constexpr uint32_t kMaxEvents = uint32_t{1} << 30;

}  // namespace memtl

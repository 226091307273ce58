// Small helpers of the trace model: string interning, scope and layout names,
// element sizes, and device ranks set once reading is done.
#include "core/model/trace.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <utility>

#include "core/model/quote.h"

namespace memtl {

namespace {
constexpr std::array<std::string_view, 10> kScopeNames = {
    "function",          "backward_function",   "torchscript_function", "kernel_function_dtype",
    "custom_class",      "build_feature",       "lite_interpreter",     "user_scope",
    "static_runtime_op", "static_runtime_model"};
}  // namespace

bool ParseRecordScope(std::string_view s, RecordScope* out) {
  for (size_t i = 0; i < kScopeNames.size(); ++i) {
    if (kScopeNames[i] == s) {
      *out = static_cast<RecordScope>(i);
      return true;
    }
  }
  return false;
}

std::string_view RecordScopeName(RecordScope s) { return kScopeNames[static_cast<size_t>(s)]; }

bool ParseLayout(std::string_view s, Layout* out) {
  static constexpr std::pair<std::string_view, Layout> kLayouts[] = {
      {"strided", Layout::kStrided},      {"sparse_coo", Layout::kSparseCoo},
      {"sparse_csr", Layout::kSparseCsr}, {"sparse_csc", Layout::kSparseCsc},
      {"sparse_bsr", Layout::kSparseBsr}, {"sparse_bsc", Layout::kSparseBsc},
      {"_mkldnn", Layout::kMkldnn},       {"mkldnn", Layout::kMkldnn},
      {"jagged", Layout::kOther}};
  for (const auto& [name, layout] : kLayouts) {
    if (name == s) {
      *out = layout;
      return true;
    }
  }
  return false;
}

uint32_t ElementSize(std::string_view dtype) {
  // PyTorch dtype names (str(torch.float32) without "torch.") and aliases.
  static constexpr std::pair<std::string_view, uint32_t> kSizes[] = {{"float32", 4},
                                                                     {"float", 4},
                                                                     {"float64", 8},
                                                                     {"double", 8},
                                                                     {"float16", 2},
                                                                     {"half", 2},
                                                                     {"bfloat16", 2},
                                                                     {"complex32", 4},
                                                                     {"chalf", 4},
                                                                     {"complex64", 8},
                                                                     {"cfloat", 8},
                                                                     {"complex128", 16},
                                                                     {"cdouble", 16},
                                                                     {"uint8", 1},
                                                                     {"int8", 1},
                                                                     {"int16", 2},
                                                                     {"short", 2},
                                                                     {"int32", 4},
                                                                     {"int", 4},
                                                                     {"int64", 8},
                                                                     {"long", 8},
                                                                     {"bool", 1},
                                                                     {"qint8", 1},
                                                                     {"quint8", 1},
                                                                     {"qint32", 4},
                                                                     {"quint4x2", 1},
                                                                     {"quint2x4", 1},
                                                                     {"float8_e5m2", 1},
                                                                     {"float8_e4m3fn", 1},
                                                                     {"float8_e5m2fnuz", 1},
                                                                     {"float8_e4m3fnuz", 1},
                                                                     {"uint16", 2},
                                                                     {"uint32", 4},
                                                                     {"uint64", 8},
                                                                     {"bits8", 1},
                                                                     {"bits16", 2}};
  for (const auto& [name, size] : kSizes) {
    if (name == dtype) return size;
  }
  return 0;
}

namespace {

// The largest size * stride times the element size, in 128 bits:
// dimensions are below 2^48 (the readers check), so no product overflows.
__int128 ObservationBytes(const int64_t* sizes, size_t num_sizes, const int64_t* strides,
                          size_t num_strides, uint32_t element_size) {
  const int64_t one = 1;
  const int64_t* s = num_sizes ? sizes : &one;
  const int64_t* st = num_strides ? strides : &one;
  const size_t n = std::min<size_t>(num_sizes ? num_sizes : 1, num_strides ? num_strides : 1);
  __int128 extent = 0;
  for (size_t i = 0; i < n; ++i) {
    const __int128 v = static_cast<__int128>(s[i]) * st[i];
    if (i == 0 || v > extent) extent = v;
  }
  return extent * element_size;
}

}  // namespace

int64_t SizeOfObservation(const int64_t* sizes, size_t num_sizes, const int64_t* strides,
                          size_t num_strides, uint32_t element_size) {
  const __int128 bytes = ObservationBytes(sizes, num_sizes, strides, num_strides, element_size);
  if (bytes <= 0) return 0;
  return bytes > kMaxTensorBytes ? kMaxTensorBytes : static_cast<int64_t>(bytes);
}

bool PastMaxTensorBytes(const int64_t* sizes, size_t num_sizes, const int64_t* strides,
                        size_t num_strides, uint32_t element_size) {
  return ObservationBytes(sizes, num_sizes, strides, num_strides, element_size) > kMaxTensorBytes;
}

uint32_t StringTable::Intern(std::string_view s) {
  auto it = index_.find(s);
  if (it != index_.end()) return it->second;
  if (InvalidUtf8Bytes(s) > 0) {
    if (invalid_utf8_++ == 0) invalid_utf8_example_ = Quote(s);
    return Intern(ReplaceInvalidUtf8(s));  // valid now: no further recursion
  }
  const auto id = static_cast<uint32_t>(strings_.size());
  strings_.emplace_back(s);
  index_.emplace(strings_.back(), id);
  return id;
}

const std::string& Trace::Name(const Event& e) const {
  static const std::string kMemory = "[memory]";
  switch (e.kind) {
    case EventKind::kOp:
      return strings.Get(ops[e.payload].name);
    case EventKind::kPy:
      return strings.Get(py_names[e.payload]);
    case EventKind::kOther:
      return strings.Get(other_names[e.payload]);
    case EventKind::kAlloc:
      break;
  }
  return kMemory;
}

DeviceIndex Trace::InternDevice(std::string_view name) {
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i].name == name) return static_cast<DeviceIndex>(i);
  }
  DeviceInfo d;
  d.name = std::string(name);
  const auto colon = name.find(':');
  d.type = std::string(name.substr(0, colon));
  if (colon != std::string_view::npos) {
    int idx = -1;
    const auto rest = name.substr(colon + 1);
    std::from_chars(rest.data(), rest.data() + rest.size(), idx);
    d.index = idx;
  }
  devices.push_back(std::move(d));
  return static_cast<DeviceIndex>(devices.size() - 1);
}

void StartTimes::push_back(int64_t t0) {
  const size_t i = rel_.size();
  if ((i & ((size_t{1} << kBlockShift) - 1)) == 0) base_.push_back(t0);
  // In unsigned arithmetic: times anywhere in int64 subtract without
  // overflow, and the difference fits when it is within int32's range.
  const uint64_t d = static_cast<uint64_t>(t0) - static_cast<uint64_t>(base_.back());
  const int64_t diff = static_cast<int64_t>(d);
  if (diff > kFar && diff <= INT32_MAX) {
    rel_.push_back(static_cast<int32_t>(diff));
  } else {
    rel_.push_back(kFar);
    far_.emplace_back(static_cast<uint32_t>(i), t0);
  }
}

int64_t StartTimes::Far(uint32_t i) const {
  const auto it = std::lower_bound(far_.begin(), far_.end(), std::make_pair(i, INT64_MIN));
  return it->second;
}

TensorRecords TakeTensorRecords(Trace& trace) {
  return {std::exchange(trace.tensors, {}), std::exchange(trace.tensor_ids, {}),
          std::exchange(trace.tensor_shapes, {}), std::exchange(trace.alloc_ptrs, {})};
}

void Trace::Finish() {
  std::vector<uint32_t> order(devices.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    if (devices[a].type != devices[b].type) return devices[a].type < devices[b].type;
    return devices[a].index < devices[b].index;
  });
  for (uint32_t r = 0; r < order.size(); ++r) devices[order[r]].rank = r;
}

}  // namespace memtl

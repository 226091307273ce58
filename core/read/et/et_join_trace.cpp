// The joined Trace built (et_join_impl.h, Join::Build): the Kineto events,
// with the joined nodes' inputs as their ops' arguments and the python
// tracer's rebuilt records on their calls, then the schemas the nodes ran.
//
// It is the Trace that the memtl reader gives for the same records written
// as a memtl trace (docs/trace-format.md), which is how the join made it
// before: records, names, devices and TensorImpls are numbered in the order
// the reader numbers them (a name, a device, an impl when first met, in
// file order), and a tensor gets what the reader keeps of it. No text is
// written and parsed again, and nothing is patched in afterwards: what the
// text could not say (impls held, pairs in time order, the allocators'
// largest totals) is set here. What the reader refuses in a tensor, the
// execution-trace reader refused first; a tensor that gets past it anyway
// is the join's bug (StatusCode::kInternal), as a refused text was.
#include <string>
#include <string_view>
#include <vector>

#include "core/model/flat_map.h"
#include "core/model/quote.h"
#include "core/read/common/shape_name.h"
#include "core/read/et/et_join_impl.h"
#include "core/read/memtl/trace_reader.h"

namespace memtl::et_join_detail {

// What Build keeps while it appends records to the Trace.
struct TraceOut {
  TraceOut(Trace& trace, bool shapes) : t(trace), keep_shapes(shapes) {}
  Trace& t;
  bool keep_shapes;
  DenseNumbering impls;   // TensorImpl address (the tensor id) -> Tensor::impl
  std::vector<Arg> args;  // an op's arguments, before their kinds are appended
  std::string shape;      // ShapeName's
  std::string error;      // the first record the reader would have refused
};

namespace {

constexpr std::string_view kProducer = "memtl: Kineto trace + execution trace";

// Tensor records are numbered in 32 bits, as the reader numbers them.
constexpr size_t kMaxTensorRecords = size_t{1} << 31;
// The reader's bound on a tensor's dimensions and strides.
constexpr int64_t kMaxDim = int64_t{1} << 48;

// What the memtl reader refuses in a tensor's sizes and strides, or "".
std::string DimsProblem(const int64_t* sizes, size_t num_sizes, const int64_t* strides,
                        size_t num_strides, uint32_t element_size) {
  if (num_sizes > kMaxDims || num_strides > kMaxDims) return "too many dimensions";
  for (size_t d = 0; d < num_sizes; ++d) {
    if (sizes[d] < 0) return "a negative size";
    if (sizes[d] > kMaxDim) return "a size out of range";
  }
  for (size_t d = 0; d < num_strides; ++d)
    if (strides[d] > kMaxDim || strides[d] < -kMaxDim) return "a stride out of range";
  if (PastMaxTensorBytes(sizes, num_sizes, strides, num_strides, element_size))
    return "more than 2^46-1 bytes";
  return "";
}

}  // namespace

uint32_t Join::AddTensor(TraceOut& out, uint32_t index) const {
  const EtTensor& tensor = et_.tensors[index];
  Trace& t = out.t;
  const std::string& named = et_.strings.Get(tensor.device);
  const std::string_view device = named.empty() ? std::string_view("cpu") : named;
  const std::string_view dtype = DtypeOfItemsize(tensor.itemsize);
  const uint32_t element_size = ElementSize(dtype);
  const int64_t* sizes = et_.dims.data() + tensor.dims_begin;
  const int64_t* strides = sizes + tensor.num_sizes;
  if (out.error.empty()) {
    if (!IsDeviceName(device)) {
      out.error = "a tensor's device " + Quote(device) + " is no device";
    } else if (std::string problem =
                   DimsProblem(sizes, tensor.num_sizes, strides, tensor.num_strides, element_size);
               !problem.empty()) {
      out.error = "a tensor with " + problem;
    } else if (t.tensors.size() >= kMaxTensorRecords) {
      out.error = "more than 2^31 tensor observations";
    }
  }
  memtl::Tensor record;
  record.device = t.InternDevice(device);
  record.set_bytes(
      SizeOfObservation(sizes, tensor.num_sizes, strides, tensor.num_strides, element_size));
  if (tensor.tensor_id != 0) record.impl = out.impls.Number(tensor.tensor_id);
  t.tensors.push_back(record);
  t.tensor_ptrs.push_back(Pointer(tensor));
  if (out.keep_shapes) {
    read::ShapeName(out.shape, sizes, tensor.num_sizes, dtype);
    t.tensor_shapes.push_back(t.shapes.Intern(out.shape));
  }
  return static_cast<uint32_t>(t.tensors.size() - 1);
}

void Join::Args(TraceOut& out, const EtNode& node) const {
  Trace& t = out.t;
  std::vector<Arg>& args = out.args;
  args.clear();
  for (uint32_t i = 0; i < node.args_count; ++i) {
    const EtArg& a = et_.args[node.args_begin + i];
    Arg arg;
    switch (a.kind) {
      case EtArgKind::kNone:
      // PyTorch's profiler does not capture strings (an IValue neither
      // tensor nor scalar is None), and its schema matcher takes a `str`
      // argument only when it is None: a string here failed the match of
      // every op with one (gelu's `approximate`, div's `rounding_mode`),
      // which then was no node of the data-flow graph.
      case EtArgKind::kString:
        break;
      case EtArgKind::kTensor:
        arg.kind = ArgKind::kTensor;
        arg.begin = AddTensor(out, a.begin);
        break;
      case EtArgKind::kList: {
        // An empty int list, Tensor?[]: not captured.
        if (const int list = tensor_lists_.At(node, i); list == 0 || (list < 0 && a.count == 0))
          break;
        // Stored as its length, then its elements (Trace::arg_refs).
        arg.kind = ArgKind::kTensorList;
        arg.begin = static_cast<uint32_t>(t.list_items.size());
        t.list_items.push_back(a.count);
        for (uint32_t j = 0; j < a.count; ++j) {
          const uint32_t item = et_.items[a.begin + j];
          t.list_items.push_back(item == kNone32 ? kNone32 : AddTensor(out, item));
        }
        break;
      }
      case EtArgKind::kBool:
        arg.kind = ArgKind::kBool;
        break;
      case EtArgKind::kInt:
        arg.kind = ArgKind::kInt;
        break;
      case EtArgKind::kFloat:
        arg.kind = ArgKind::kFloat;
        break;
    }
    args.push_back(arg);
  }
  for (const Arg& arg : args) {
    t.arg_kinds.push_back(arg.kind);
    if (HasArgRef(arg.kind)) t.arg_refs.push_back(arg.begin);
  }
}

void Join::TracerRecordOf(TraceOut& out, const TracerRecord& record, Event& event) const {
  Trace& t = out.t;
  uint32_t index = 0;
  if (!record.optimizer) {
    ModuleInfo module;
    module.cls = t.strings.Intern(record.cls);
    module.params_begin = static_cast<uint32_t>(t.params.size());
    module.params_count = static_cast<uint32_t>(record.module_params.size());
    for (const auto& [name, tensor] : record.module_params) {
      ParamInfo param;
      param.name = t.strings.Intern(name);
      param.tensor = AddTensor(out, tensor);
      t.params.push_back(param);
    }
    index = static_cast<uint32_t>(t.modules.size());
    t.modules.push_back(module);
  } else {
    OptimizerInfo optimizer;
    optimizer.has_self = record.self != 0;
    optimizer.self = record.self;
    optimizer.params_begin = static_cast<uint32_t>(t.params.size());
    optimizer.params_count = static_cast<uint32_t>(record.params.size());
    for (const uint32_t tensor : record.params) {
      ParamInfo param;
      param.tensor = AddTensor(out, tensor);
      param.state_begin = static_cast<uint32_t>(t.states.size());  // a state of none
      t.params.push_back(param);
    }
    optimizer.state_begin = static_cast<uint32_t>(t.states.size());
    optimizer.state_count = static_cast<uint32_t>(record.state.size());
    for (const uint32_t tensor : record.state) {
      StateEntry state;
      state.name = t.strings.Intern("state");
      state.tensor = AddTensor(out, tensor);
      t.states.push_back(state);
    }
    index = static_cast<uint32_t>(t.optimizers.size());
    t.optimizers.push_back(optimizer);
  }
  t.py_linked.back() = true;
  t.py_links.push_back({event.payload, index & PyInfo::kNone31, record.optimizer ? 1u : 0u});
}

Status Join::Build(JoinedTrace& joined, bool keep_shapes) const {
  Trace& t = joined.trace;
  t.header.version = kTraceFormatVersion;
  t.header.producer = kProducer;
  t.header.has_ids = false;
  t.header.profile_memory = 1;
  // The Kineto reader's events, in its order (TraceHeader says why), and
  // TensorImpls the profiler held: the execution trace numbers them.
  t.header.pairs_in_time_order = true;
  t.header.impls_held = true;
  TraceOut out(t, keep_shapes);
  // Events renumbered past the pre-profile allocations dropped (roots
  // without children).
  std::vector<uint32_t> index(t_.events.size());
  uint32_t next = 0;
  for (uint32_t e = 0; e < t_.events.size(); ++e) {
    const auto pre = pre_profile_bytes_.find(e);
    index[e] = pre != pre_profile_bytes_.end() && pre->second == 0 ? kNone32 : next++;
  }
  t.events.reserve(next);
  for (uint32_t e = 0; e < t_.events.size(); ++e) {
    if (index[e] == kNone32) continue;
    const Event& ev = t_.events[e];
    const int64_t t0 = t_.event_t0[e];
    Event event;
    event.kind = ev.kind;
    event.parent = ev.parent == kNone32 ? kNone32 : index[ev.parent];
    switch (ev.kind) {
      case EventKind::kAlloc: {
        const AllocInfo& a = t_.allocs[ev.payload];
        const auto pre = pre_profile_bytes_.find(e);
        AllocInfo alloc;
        alloc.bytes = pre != pre_profile_bytes_.end() ? pre->second : a.bytes;
        const std::string& device = t_.devices[a.device].name;
        if (!IsDeviceName(device) && out.error.empty())
          out.error = "an allocation's device " + Quote(device) + " is no device";
        alloc.device = t.InternDevice(device);
        event.payload = static_cast<uint32_t>(t.allocs.size());
        t.allocs.push_back(alloc);
        t.alloc_ptrs.push_back(t_.alloc_ptrs[ev.payload]);
        break;
      }
      case EventKind::kOp: {
        OpInfo op;
        const uint32_t name = t.strings.Intern(t_.Name(ev));
        if (name >= kMaxNames && out.error.empty()) out.error = "more than 2^24 distinct names";
        op.name = name & (kMaxNames - 1);
        op.scope = t_.ops[ev.payload].scope;
        // End times are checked as the reader checks them (-1: none), not
        // kept.
        const int64_t t1 = ev.payload < k_.op_end.size() ? k_.op_end[ev.payload] : -1;
        if (t1 == -1) {
          ++t.ops_without_end;
        } else if (t1 < t0) {
          ++t.ops_ending_before_start;
        }
        op.args_begin = static_cast<uint32_t>(t.arg_kinds.size());
        op.refs_begin = static_cast<uint32_t>(t.arg_refs.size());
        if (const uint32_t node = node_of_op_[ev.payload]; node != kNone32) {
          if (et_.nodes[node].args_count > kMaxOpArgs && out.error.empty())
            out.error = "more than 2^24-1 arguments";
          Args(out, et_.nodes[node]);
        }
        event.payload = static_cast<uint32_t>(t.ops.size());
        t.ops.push_back(op);
        break;
      }
      case EventKind::kPy:
        event.payload = static_cast<uint32_t>(t.py_names.size());
        t.py_names.push_back(t.strings.Intern(t_.Name(ev)));
        t.py_linked.push_back(false);
        if (const auto record = py_records_.find(e); record != py_records_.end())
          TracerRecordOf(out, record->second, event);
        break;
      case EventKind::kOther:
        event.payload = static_cast<uint32_t>(t.other_names.size());
        t.other_names.push_back(t.strings.Intern(t_.Name(ev)));
        break;
    }
    // PyTorch's tree builder nests events inside their parent's span; a
    // child that starts first is suspect, but the tree is still usable.
    if (event.parent != kNone32 && event.kind != EventKind::kAlloc && t0 < t.event_t0[event.parent])
      ++t.events_before_parent;
    t.events.push_back(event);
    t.event_t0.push_back(t0);
  }
  t.schemas = read::EtSchemaRecords(et_, node_of_op_, joined.diagnostics);
  t.num_impls = static_cast<uint32_t>(out.impls.size());
  // The allocators' largest totals, which the Kineto reader took from its
  // events, by device name (the join's devices are numbered in its order).
  for (DeviceInfo& d : t.devices) {
    for (const DeviceInfo& k : t_.devices) {
      if (k.name != d.name) continue;
      d.max_total_allocated = k.max_total_allocated;
      d.max_total_reserved = k.max_total_reserved;
    }
  }
  t.Finish();
  if (!out.error.empty())  // a bug of the join's, not of the files
    return Status::Error(StatusCode::kInternal,
                         "the join of the execution trace made a bad trace: " + out.error);
  return {};
}

}  // namespace memtl::et_join_detail

// The recorder's native walk for PyTorch 1.13 (Debian's torch): writes the
// body of a memtl trace (docs/trace-format.md) from the profiler's event tree
// by reading torch::profiler::impl::Result in C++, instead of through about
// twenty Python binding calls per op. Its output is byte-identical to the
// Python walk of collect/torch/memtl_torch.py (`_walk` with PyTorch 1.13
// events), which stays the reference and the fallback; tests/python compares
// the two on real profiles.
//
// The module shares pybind11's internals with torch._C (the same pybind11
// internals version, compiler and C++ ABI), so the profiler's Python objects
// cast to the C++ objects behind them. Import fails (and memtl_torch falls
// back to Python) when torch._C did not register those types under the same
// internals, e.g. with a torch built by another compiler.
//
// Python interface (used by memtl_torch.write_events only):
//   walk_v1(roots, write) -> (events, allocations, devices, aten_ops,
//                             ops_with_inputs, op_names)
// roots: the list experimental_event_tree() returned; write: a callable that
// takes bytes (chunks of whole records). devices and op_names are sorted.

#include <pybind11/pybind11.h>
#include <torch/csrc/profiler/collection.h>
#include <torch/version.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "json_sink.h"

namespace py = pybind11;
namespace tpi = torch::profiler::impl;

namespace {

using memtl_native::AppendJsonString;
using memtl_native::Sink;

// Name tables indexed by the enum's value, in the enum's order (c10/core/
// ScalarType.h, c10/core/Layout.h, ATen/record_function.h of torch 1.13).
// Dtypes and layouts: str(torch.<x>) less its "torch." prefix, as the Python
// walk writes them; scopes: RecordScope's member names in lower case.
constexpr const char* kDtypeNames[] = {
    "uint8",   "int8",    "int16",     "int32",     "int64",      "float16",
    "float32", "float64", "complex32", "complex64", "complex128", "bool",
    "qint8",   "quint8",  "qint32",    "bfloat16",  "quint4x2",   "quint2x4"};
constexpr const char* kLayoutNames[] = {"strided",    "sparse_coo", "sparse_csr", "_mkldnn",
                                        "sparse_csc", "sparse_bsr", "sparse_bsc"};
constexpr const char* kScopeNames[] = {
    "function",          "backward_function",   "torchscript_function", "kernel_function_dtype",
    "custom_class",      "build_feature",       "lite_interpreter",     "user_scope",
    "static_runtime_op", "static_runtime_model"};
static_assert(std::size(kDtypeNames) == static_cast<size_t>(c10::ScalarType::QUInt2x4) + 1);
static_assert(std::size(kLayoutNames) == static_cast<size_t>(c10::Layout::NumOptions));
static_assert(std::size(kScopeNames) == static_cast<size_t>(at::RecordScope::NUM_SCOPES));

template <size_t N, typename Enum>
const char* NameOf(const char* const (&names)[N], Enum value, const char* otherwise) {
  const auto i = static_cast<size_t>(value);
  return i < N ? names[i] : otherwise;
}

struct Facts {
  int64_t events = 0;
  int64_t allocations = 0;
  std::set<std::string> devices;
  int64_t aten_ops = 0;
  int64_t ops_with_inputs = 0;
  std::set<std::string> op_names;
};

class Walker {
 public:
  explicit Walker(py::object write) : out_(std::move(write)) {}

  Facts Run(const std::vector<std::shared_ptr<tpi::Result>>& roots) {
    // Pre-order, iteratively (trees can be deep): each frame is a children
    // list, the next child to visit and the index of their parent.
    struct Frame {
      const std::vector<std::shared_ptr<tpi::Result>>* list;
      size_t next;
      int64_t parent;
    };
    std::vector<Frame> stack;
    stack.push_back({&roots, 0, -1});
    while (!stack.empty()) {
      Frame& top = stack.back();
      if (top.next == top.list->size()) {
        stack.pop_back();
        continue;
      }
      const tpi::Result& e = *(*top.list)[top.next++];
      const int64_t index = facts_.events++;
      Record(e, index, top.parent);
      out_.EndRecord();
      if (!e.children_.empty()) stack.push_back({&e.children_, 0, index});
    }
    out_.Flush();
    return std::move(facts_);
  }

 private:
  void Record(const tpi::Result& e, int64_t index, int64_t parent) {
    c10::visit(
        [&](const auto& f) {
          using F = std::decay_t<decltype(f)>;
          if constexpr (std::is_same_v<F, tpi::ExtraFields<tpi::EventType::TorchOp>>) {
            Op(e, f, index, parent);
          } else if constexpr (std::is_same_v<F, tpi::ExtraFields<tpi::EventType::Allocation>>) {
            Alloc(e, f, index, parent);
          } else if constexpr (std::is_same_v<F, tpi::ExtraFields<tpi::EventType::PyCall>>) {
            Py(e, index, parent, &f, f.caller_.line_no_);
          } else if constexpr (std::is_same_v<F, tpi::ExtraFields<tpi::EventType::PyCCall>>) {
            Py(e, index, parent, nullptr, f.caller_.line_no_);
          } else if constexpr (std::is_same_v<F, tpi::ExtraFields<tpi::EventType::Backend>>) {
            Other(e, index, parent, "backend");
          } else if constexpr (std::is_same_v<F, tpi::ExtraFields<tpi::EventType::OutOfMemory>>) {
            Other(e, index, parent, "outofmemory");
          } else {
            Other(e, index, parent, "kineto");
          }
        },
        e.extra_fields_);
  }

  // Writes each item of `items` with `write_one`, commas between.
  template <typename Items, typename Fn>
  void Each(const Items& items, Fn&& write_one) {
    bool first = true;
    for (const auto& item : items) {
      if (!first) out_.Put(',');
      first = false;
      write_one(item);
    }
  }

  void Head(const char* kind, int64_t index, int64_t parent) {
    out_.Put("{\"k\":\"");
    out_.Put(kind);
    out_.Put("\",\"i\":");
    out_.Int(index);
    out_.Put(",\"p\":");
    out_.Int(parent);
  }

  // ,"name":..,"t0":..,"t1":.. of an event that has a span.
  void NameAndTimes(std::string_view name, const tpi::Result& e) {
    out_.Put(",\"name\":");
    out_.JsonString(name);
    out_.Put(",\"t0\":");
    out_.Int(e.start_time_ns_);
    out_.Put(",\"t1\":");
    out_.Int(e.endTimeNS());
  }

  void Op(const tpi::Result& e, const tpi::ExtraFields<tpi::EventType::TorchOp>& f, int64_t index,
          int64_t parent) {
    const std::string& name = f.name_;
    const tpi::Inputs& in = f.inputs_;
    const size_t n = in.dtypes_.size();
    if (name.find("::") != std::string::npos) {
      facts_.op_names.insert(name);
      ++facts_.aten_ops;
      if (n != 0) ++facts_.ops_with_inputs;
    }
    Head("op", index, parent);
    NameAndTimes(name, e);
    out_.Put(",\"tid\":");
    out_.UInt(e.start_tid_);
    out_.Put(",\"scope\":\"");
    out_.Put(NameOf(kScopeNames, f.scope_, "num_scopes"));
    out_.Put("\",\"seq\":");
    out_.Int(f.sequence_number_);
    out_.Put(",\"args\":[");
    for (size_t k = 0; k < n; ++k) {
      if (k != 0) out_.Put(',');
      Arg(in, k);
    }
    out_.Put("]}\n");
  }

  // Argument k of a 1.13 op, as memtl_torch's _Writer.args_v1 writes it
  // (lists shorter than the dtypes are padded: no shape is "[]", no value
  // "null").
  void Arg(const tpi::Inputs& in, size_t k) {
    if (k < in.tensor_metadata_.size() && in.tensor_metadata_[k].has_value()) {
      const tpi::TensorMetadata& md = *in.tensor_metadata_[k];
      out_.Put("{\"impl\":");
      out_.Addr(md.impl_.value_of());
      out_.Put(",\"ptr\":");
      out_.Addr(md.data_.value_of());
      out_.Put(",\"id\":null,\"aid\":null,");
      Meta(md);
      out_.Put(",\"sizes\":");
      Ints(k < in.shapes_.size() ? &in.shapes_[k] : nullptr);
      out_.Put(",\"strides\":");
      Ints(k < in.strides_.size() ? &in.strides_[k] : nullptr);
      out_.Put('}');
      return;
    }
    const std::string& dtype = in.dtypes_[k];
    if (dtype == "Scalar") {
      if (k < in.ivalues_.size()) {
        Scalar(in.ivalues_[k]);
      } else {
        out_.Put("null");
      }
    } else if (dtype == "TensorList") {
      out_.Put("{\"list\":[]}");  // 1.13 does not capture the elements
    } else {
      out_.Put("null");  // None, or a value 1.13 did not capture
    }
  }

  // '"dev":..,"dtype":..,"layout":..', formatted once per combination.
  void Meta(const tpi::TensorMetadata& md) {
    const auto key =
        std::make_tuple(static_cast<int>(md.device_type_), static_cast<int>(md.device_index_),
                        static_cast<int>(md.dtype_), static_cast<int>(md.layout_));
    auto it = meta_.find(key);
    if (it == meta_.end()) {
      std::string s = "\"dev\":" + Quoted(md.device().str()) + ",\"dtype\":\"" +
                      NameOf(kDtypeNames, md.dtype_, "undefined") + "\",\"layout\":\"" +
                      NameOf(kLayoutNames, md.layout_, "unknown") + "\"";
      it = meta_.emplace(key, std::move(s)).first;
    }
    out_.Put(it->second);
  }

  static std::string Quoted(std::string_view s) {
    std::string q;
    AppendJsonString(&q, s);
    return q;
  }

  void Ints(const std::vector<int64_t>* v) {
    out_.Put('[');
    if (v != nullptr) Each(*v, [&](int64_t x) { out_.Int(x); });
    out_.Put(']');
  }

  // memtl_torch._scalar of the Python value PyTorch's bindings make of it.
  void Scalar(const c10::IValue& v) {
    if (v.isBool()) {
      out_.Put(v.toBool() ? "{\"bool\":true}" : "{\"bool\":false}");
    } else if (v.isInt()) {
      out_.Put("{\"int\":");
      out_.Int(v.toInt());
      out_.Put('}');
    } else if (v.isDouble()) {
      out_.Put("{\"float\":");
      out_.Float(v.toDouble());
      out_.Put('}');
    } else if (v.isComplexDouble()) {
      const c10::complex<double> c = v.toComplexDouble();
      out_.Put("{\"complex\":[");
      out_.Float(c.real());
      out_.Put(',');
      out_.Float(c.imag());
      out_.Put("]}");
    } else if (v.isString()) {
      out_.Put("{\"str\":");
      out_.JsonString(v.toStringRef());
      out_.Put('}');
    } else {
      out_.Put("null");  // None, or a type the format does not carry
    }
  }

  void Alloc(const tpi::Result& e, const tpi::ExtraFields<tpi::EventType::Allocation>& f,
             int64_t index, int64_t parent) {
    ++facts_.allocations;
    const auto key =
        std::make_pair(static_cast<int>(f.device_type_), static_cast<int>(f.device_index_));
    auto it = devices_.find(key);
    if (it == devices_.end()) {
      const std::string dev = f.device().str();
      facts_.devices.insert(dev);
      it = devices_.emplace(key, Quoted(dev)).first;
    }
    Head("alloc", index, parent);
    out_.Put(",\"t\":");
    out_.Int(e.start_time_ns_);
    out_.Put(",\"tid\":");
    out_.UInt(e.start_tid_);
    out_.Put(",\"ptr\":");
    out_.Addr(f.ptr_);
    out_.Put(",\"bytes\":");
    out_.Int(f.alloc_size_);
    out_.Put(",\"dev\":");
    out_.Put(it->second);
    out_.Put(",\"total_allocated\":");
    out_.Int(f.total_allocated_);
    out_.Put(",\"total_reserved\":");
    out_.Int(f.total_reserved_);
    out_.Put(",\"id\":null,\"aid\":null}\n");
  }

  void Py(const tpi::Result& e, int64_t index, int64_t parent,
          const tpi::ExtraFields<tpi::EventType::PyCall>* call, int caller_line) {
    Head("py", index, parent);
    NameAndTimes(e.name(), e);
    out_.Put(",\"tid\":");
    out_.UInt(e.start_tid_);
    // The line of the caller's code that made the call (the call site's line).
    if (caller_line > 0 && caller_line < (1 << 30)) {
      out_.Put(",\"line\":");
      out_.Int(caller_line);
    }
    if (call != nullptr && call->module_.has_value()) {
      // 1.13's module record: the class name and (name, storage address)
      // per parameter; no module address, no gradients.
      const tpi::NNModuleInfo& m = *call->module_;
      out_.Put(",\"module\":{\"self\":null,\"cls\":");
      out_.JsonString(m.cls_name_.str());
      out_.Put(",\"params\":[");
      Each(m.params_, [&](const auto& param) {
        out_.Put("{\"name\":");
        out_.JsonString(param.first);
        out_.Put(",\"t\":{\"ptr\":");
        out_.Addr(param.second);
        out_.Put("},\"grad\":null}");
      });
      out_.Put("]}");
    } else if (call != nullptr && call->opt_.has_value()) {
      // 1.13's optimizer record: parameter addresses, and the state flat
      // (not attributed to parameters), which goes to the optimizer level.
      const tpi::OptimizerInfo& o = *call->opt_;
      out_.Put(",\"optimizer\":{\"self\":");
      out_.Addr(static_cast<PyObject*>(o.self_));
      out_.Put(",\"params\":[");
      Each(o.params_addr_, [&](const void* addr) {
        out_.Put("{\"t\":{\"ptr\":");
        out_.Addr(addr);
        out_.Put("},\"grad\":null,\"state\":[]}");
      });
      out_.Put("],\"state\":[");
      Each(o.opt_state_, [&](const auto& state) {
        out_.Put('[');
        out_.JsonString(state.first);
        out_.Put(",{\"ptr\":");
        out_.Addr(state.second);
        out_.Put("}]");
      });
      out_.Put("]}");
    }
    out_.Put("}\n");
  }

  void Other(const tpi::Result& e, int64_t index, int64_t parent, const char* type) {
    Head("other", index, parent);
    NameAndTimes(e.name(), e);
    out_.Put(",\"type\":\"");
    out_.Put(type);
    out_.Put("\"}\n");
  }

  Sink out_;
  Facts facts_;
  std::map<std::tuple<int, int, int, int>, std::string> meta_;
  std::map<std::pair<int, int>, std::string> devices_;
};

py::tuple WalkV1(const py::iterable& roots_obj, const py::object& write) {
  std::vector<std::shared_ptr<tpi::Result>> roots;
  for (py::handle h : roots_obj) {
    // Raises TypeError for anything but a profiler event (a test's
    // stand-in): memtl_torch then walks in Python.
    if (!py::isinstance<tpi::Result>(h)) {
      throw py::type_error("walk_v1: a root is not a PyTorch profiler event");
    }
    roots.push_back(h.cast<std::shared_ptr<tpi::Result>>());
  }
  Facts facts = Walker(write).Run(roots);
  py::list devices;
  for (const std::string& d : facts.devices) devices.append(py::str(d));
  py::list op_names;
  for (const std::string& n : facts.op_names) {
    // Names the Python bindings could not decode are left out of the
    // schema records, as the Python walk could not have read them.
    PyObject* s = PyUnicode_DecodeUTF8(n.data(), static_cast<Py_ssize_t>(n.size()), nullptr);
    if (s == nullptr) {
      PyErr_Clear();
      continue;
    }
    op_names.append(py::reinterpret_steal<py::str>(s));
  }
  return py::make_tuple(facts.events, facts.allocations, devices, facts.aten_ops,
                        facts.ops_with_inputs, op_names);
}

}  // namespace

PYBIND11_MODULE(_memtl_torch_native, m) {
  m.doc() = "memtl's native walk of a PyTorch 1.13 profile (see memtl_torch.py)";
  py::module_::import("torch");
  const py::detail::type_info* event_type = py::detail::get_type_info(typeid(tpi::Result));
  if (event_type == nullptr) {
    throw py::import_error(
        "torch._C's profiler events are not visible to this module (torch built with another "
        "pybind11 or compiler, or not torch 1.13)");
  }
  // torch._C registered the record with its own sizeof: a different size
  // means headers that do not describe the library's records.
  if (event_type->type_size != sizeof(tpi::Result)) {
    throw py::import_error("torch's profiler records are " + std::to_string(event_type->type_size) +
                           " bytes, this module was built for " +
                           std::to_string(sizeof(tpi::Result)));
  }
  m.attr("TORCH_VERSION") =
      py::str(std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR));
  m.def("walk_v1", &WalkV1, py::arg("roots"), py::arg("write"));
}

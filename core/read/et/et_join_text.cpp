// The joined trace written out (et_join_impl.h): the Kineto events with
// the execution trace's arguments, as one memtl trace for the memtl reader.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/model/quote.h"
#include "core/read/et/et_join_impl.h"

namespace memtl::et_join_detail {

std::string Join::Text(JoinText& out) const {
  std::string s;
  s.reserve(t_.events.size() * 160);
  s +=
      R"({"format":"memtl-trace","version":1,"producer":"memtl: Kineto trace + execution trace","ids":false,"devices":[)";
  for (size_t d = 0; d < t_.devices.size(); ++d) {
    if (d > 0) s += ',';
    AppendJsonString(s, t_.devices[d].name);
  }
  s += R"(],"record_shapes":true,"profile_memory":true})";
  s += '\n';
  // Events renumbered past the pre-profile allocations dropped (roots
  // without children).
  std::vector<uint32_t> index(t_.events.size());
  uint32_t next = 0;
  for (uint32_t e = 0; e < t_.events.size(); ++e) {
    const auto pre = pre_profile_bytes_.find(e);
    index[e] = pre != pre_profile_bytes_.end() && pre->second == 0 ? kNone32 : next++;
  }
  for (uint32_t e = 0; e < t_.events.size(); ++e) {
    if (index[e] == kNone32) continue;
    const Event& ev = t_.events[e];
    const int64_t t0 = t_.event_t0[e];
    s += R"({"k":")";
    switch (ev.kind) {
      case EventKind::kOp:
        s += "op";
        break;
      case EventKind::kAlloc:
        s += "alloc";
        break;
      case EventKind::kPy:
        s += "py";
        break;
      case EventKind::kOther:
        s += "other";
        break;
    }
    s += R"(","i":)" + std::to_string(index[e]) + R"(,"p":)" +
         (ev.parent == kNone32 ? std::string("-1") : std::to_string(index[ev.parent]));
    if (ev.kind == EventKind::kAlloc) {
      const AllocInfo& a = t_.allocs[ev.payload];
      const auto pre = pre_profile_bytes_.find(e);
      const int64_t bytes = pre != pre_profile_bytes_.end() ? pre->second : a.bytes;
      s += R"(,"t":)" + std::to_string(t0) + R"(,"ptr":)" +
           std::to_string(t_.alloc_ptrs[ev.payload]) + R"(,"bytes":)" + std::to_string(bytes) +
           R"(,"dev":)";
      AppendJsonString(s, t_.devices[a.device].name);
      s += "}\n";
      continue;
    }
    s += R"(,"name":)";
    AppendJsonString(s, t_.Name(ev));
    s += R"(,"t0":)" + std::to_string(t0);
    if (ev.kind == EventKind::kOp) {
      const OpInfo& op = t_.ops[ev.payload];
      if (ev.payload < k_.op_end.size()) s += R"(,"t1":)" + std::to_string(k_.op_end[ev.payload]);
      s += R"(,"tid":0,"scope":")";
      s += RecordScopeName(op.scope);
      s += R"(","seq":-1,"args":[)";
      const uint32_t node = node_of_op_[ev.payload];
      if (node != kNone32) Args(s, et_.nodes[node]);
      s += ']';
    } else {
      s += R"(,"tid":0)";
      if (const auto record = py_records_.find(e); record != py_records_.end()) s += record->second;
    }
    s += "}\n";
  }
  s += read::EtSchemaRecords(et_, node_of_op_, out.diagnostics);
  return s;
}

void Join::Tensor(std::string& s, uint32_t index) const {
  const EtTensor& tensor = et_.tensors[index];
  s += R"({"impl":)" + std::to_string(tensor.tensor_id) + R"(,"ptr":)" +
       std::to_string(Pointer(tensor)) + R"(,"id":null,"aid":null,"dev":)";
  AppendJsonString(s,
                   et_.strings.Get(tensor.device).empty() ? "cpu" : et_.strings.Get(tensor.device));
  s += R"(,"dtype":")";
  s += DtypeOfItemsize(tensor.itemsize);
  s += R"(","layout":"strided","sizes":[)";
  for (uint32_t d = 0; d < tensor.num_sizes; ++d) {
    if (d > 0) s += ',';
    s += std::to_string(et_.dims[tensor.dims_begin + d]);
  }
  s += R"(],"strides":[)";
  for (uint32_t d = 0; d < tensor.num_strides; ++d) {
    if (d > 0) s += ',';
    s += std::to_string(et_.dims[tensor.dims_begin + tensor.num_sizes + d]);
  }
  s += "]}";
}

void Join::Args(std::string& s, const EtNode& node) const {
  for (uint32_t i = 0; i < node.args_count; ++i) {
    if (i > 0) s += ',';
    const EtArg& a = et_.args[node.args_begin + i];
    switch (a.kind) {
      case EtArgKind::kNone:
        s += "null";
        break;
      case EtArgKind::kTensor:
        Tensor(s, a.begin);
        break;
      case EtArgKind::kList:
        if (const int list = tensor_lists_.At(node, i); list == 0 || (list < 0 && a.count == 0)) {
          s += "null";  // an empty int list, Tensor?[]: not captured
          break;
        }
        s += R"({"list":[)";
        for (uint32_t j = 0; j < a.count; ++j) {
          if (j > 0) s += ',';
          const uint32_t item = et_.items[a.begin + j];
          if (item == kNone32) {
            s += "null";
          } else {
            Tensor(s, item);
          }
        }
        s += "]}";
        break;
      case EtArgKind::kBool:
        s += a.i != 0 ? R"({"bool":true})" : R"({"bool":false})";
        break;
      case EtArgKind::kInt:
        s += R"({"int":)" + std::to_string(a.i) + "}";
        break;
      case EtArgKind::kFloat: {
        s += R"({"float":)";
        if (std::isnan(a.f)) {
          s += R"("nan")";
        } else if (std::isinf(a.f)) {
          s += a.f > 0 ? R"("inf")" : R"("-inf")";
        } else {
          char buf[32];
          std::snprintf(buf, sizeof buf, "%.17g", a.f);
          s += buf;
        }
        s += '}';
        break;
      }
      case EtArgKind::kString:
        // PyTorch's profiler does not capture strings (an IValue neither
        // tensor nor scalar is None), and its schema matcher takes a
        // `str` argument only when it is None: a string here failed the
        // match of every op with one (gelu's `approximate`, div's
        // `rounding_mode`), which then was no node of the data-flow graph.
        s += "null";
        break;
    }
  }
}

}  // namespace memtl::et_join_detail

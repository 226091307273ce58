// The execution-trace join builds its Trace directly (core/read/et/
// et_join_trace.cpp): it must be the Trace that the memtl reader reads from
// the same records written as a memtl trace, which is how the join made it
// before (every array, every numbering: names, devices, TensorImpls,
// shapes), less what that text could not say and the join sets.
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "core/read/et/et_join.h"
#include "core/read/memtl/trace_reader.h"

using namespace memtl;

namespace {

// aten::empty (rf 7) allocates 64 bytes at 4096; myops::scale (rf 8), an
// overload the built-in schemas lack, takes two tensors from before the
// profile, the second at a weight argument inside a python call
// (nn.Module: Linear_0), and a bool, an int and a string.
const char* const kKineto = R"({"traceEvents": [
{"ph": "X", "cat": "python_function", "name": "nn.Module: Linear_0", "pid": 1, "tid": 1, "ts": 5, "dur": 22},
{"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": {"Record function id": 7}},
{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 11, "args": {"Bytes": 64, "Addr": 4096, "Device Type": 0, "Device Id": -1, "Total Allocated": 64}},
{"ph": "X", "cat": "cpu_op", "name": "myops::scale", "pid": 1, "tid": 1, "ts": 20, "dur": 5, "args": {"Record function id": 8}},
{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 30, "args": {"Bytes": -64, "Addr": 4096, "Device Type": 0, "Device Id": -1, "Total Allocated": 0}}
]}
)";

const char* const kEt = R"J({"schema": "1.1.1-chakra.0.0.4", "nodes": [
{"id": 2, "name": "aten::empty", "ctrl_deps": 1, "inputs": {"values": [[16]], "shapes": [[[]]], "types": ["GenericList[Int]"], "strides": []}, "outputs": {"values": [[5, 6, 0, 16, 4, "cpu"]], "shapes": [[16]], "types": ["Tensor(float)"], "strides": [[1]]}, "attrs": [{"name": "rf_id", "type": "uint64", "value": 7}]},
{"id": 3, "name": "myops::scale", "ctrl_deps": 1, "inputs": {"values": [[9, 10, 0, 4, 8, "cpu"], [13, 20, 0, 16, 4, "cpu"], true, 3, "none"], "shapes": [[4], [4, 4], [], [], []], "types": ["Tensor(long int)", "Tensor(float)", "Bool", "Int", "String"], "strides": [[1], [4, 1], [], [], []]}, "outputs": {"values": [[11, 12, 0, 4, 4, "cpu"]], "shapes": [[4]], "types": ["Tensor(float)"], "strides": [[1]]}, "attrs": [{"name": "rf_id", "type": "uint64", "value": 8}, {"name": "op_schema", "type": "string", "value": "myops::scale(Tensor input, Tensor weight, bool flag, int n, str mode) -> Tensor"}]}
]}
)J";

// The same records as a memtl trace (docs/trace-format.md), as the join
// wrote them for the memtl reader.
const char* const kText =
    R"({"format":"memtl-trace","version":1,"producer":"memtl: Kineto trace + execution trace","ids":false,"devices":["cpu"],"record_shapes":true,"profile_memory":true}
{"k":"py","i":0,"p":-1,"name":"nn.Module: Linear_0","t0":5000,"tid":0,"module":{"self":null,"cls":"Linear","params":[{"name":"weight","t":{"impl":13,"ptr":4611686018427387924,"id":null,"aid":null,"dev":"cpu","dtype":"float32","layout":"strided","sizes":[4,4],"strides":[4,1]},"grad":null}]}}
{"k":"op","i":1,"p":0,"name":"aten::empty","t0":10000,"t1":15000,"tid":0,"scope":"function","seq":-1,"args":[null]}
{"k":"alloc","i":2,"p":1,"t":11000,"ptr":4096,"bytes":64,"dev":"cpu","total_allocated":64}
{"k":"op","i":3,"p":0,"name":"myops::scale","t0":20000,"t1":25000,"tid":0,"scope":"function","seq":-1,"args":[{"impl":9,"ptr":4611686018427387914,"id":null,"aid":null,"dev":"cpu","dtype":"int64","layout":"strided","sizes":[4],"strides":[1]},{"impl":13,"ptr":4611686018427387924,"id":null,"aid":null,"dev":"cpu","dtype":"float32","layout":"strided","sizes":[4,4],"strides":[4,1]},{"bool":true},{"int":3},null]}
{"k":"alloc","i":4,"p":-1,"t":30000,"ptr":4096,"bytes":-64,"dev":"cpu","total_allocated":0}
{"k":"schema","op":"myops::scale","schemas":["myops::scale(Tensor input, Tensor weight, bool flag, int n, str mode) -> Tensor"]}
)";

template <typename V>
std::string Join(const V& values) {
  std::string s;
  for (const auto& v : values) s += std::to_string(v) + ",";
  return s;
}

// Every field of the Trace that a stage reads, as text (a difference shows
// where).
std::string Dump(const Trace& t) {
  std::string s = "version " + std::to_string(t.header.version) + " producer " + t.header.producer +
                  " ids " + std::to_string(t.header.has_ids) + " profile_memory " +
                  std::to_string(t.header.profile_memory) + " pairs " +
                  std::to_string(t.header.pairs_in_time_order) + " impls_held " +
                  std::to_string(t.header.impls_held) + " torch " + t.header.torch_version + "\n";
  s += "strings";
  for (uint32_t i = 0; i < t.strings.size(); ++i) s += " " + t.strings.Get(i);
  s += "\ndevices";
  for (const DeviceInfo& d : t.devices)
    s += " " + d.name + "/" + d.type + "/" + std::to_string(d.index) + "/" +
         std::to_string(d.rank) + "/" + std::to_string(d.max_total_allocated) + "/" +
         std::to_string(d.max_total_reserved);
  s += "\nevents";
  for (uint32_t e = 0; e < t.events.size(); ++e)
    s += " " + std::to_string(static_cast<int>(t.events[e].kind)) + ":" +
         std::to_string(t.events[e].payload) + "<" + std::to_string(t.events[e].parent) + "@" +
         std::to_string(t.event_t0[e]);
  s += "\nops";
  for (const OpInfo& op : t.ops)
    s += " " + std::to_string(op.name) + "/" + std::to_string(static_cast<int>(op.scope)) + "/" +
         std::to_string(op.args_begin) + "/" + std::to_string(op.refs_begin);
  s += "\nallocs";
  for (size_t a = 0; a < t.allocs.size(); ++a)
    s += " " + std::to_string(t.allocs[a].bytes) + "@" + std::to_string(t.allocs[a].device) + "/" +
         std::to_string(t.alloc_ptrs[a]);
  s += "\npy " + Join(t.py_names) + " lines " + Join(t.py_lines) + " linked ";
  for (const bool b : t.py_linked) s += b ? "1" : "0";
  s += " links";
  for (const PyLink& l : t.py_links)
    s += " " + std::to_string(l.py) + "/" + std::to_string(l.index) + "/" +
         std::to_string(l.is_optimizer);
  s += "\nother " + Join(t.other_names) + "\nmodules";
  for (const ModuleInfo& m : t.modules)
    s += " " + std::to_string(m.has_self) + "/" + std::to_string(m.self) + "/" +
         std::to_string(m.cls) + "/" + std::to_string(m.params_begin) + "/" +
         std::to_string(m.params_count);
  s += "\noptimizers";
  for (const OptimizerInfo& o : t.optimizers)
    s += " " + std::to_string(o.has_self) + "/" + std::to_string(o.self) + "/" +
         std::to_string(o.params_begin) + "/" + std::to_string(o.params_count) + "/" +
         std::to_string(o.state_begin) + "/" + std::to_string(o.state_count);
  s += "\nparams";
  for (const ParamInfo& p : t.params)
    s += " " + std::to_string(p.name) + "/" + std::to_string(p.tensor) + "/" +
         std::to_string(p.grad) + "/" + std::to_string(p.state_begin) + "/" +
         std::to_string(p.state_count) + "/" + std::to_string(p.qualname);
  s += "\nstates";
  for (const StateEntry& st : t.states)
    s += " " + std::to_string(st.name) + "/" + std::to_string(st.tensor);
  s += "\nargs";
  for (const ArgKind k : t.arg_kinds) s += " " + std::to_string(static_cast<int>(k));
  s += "\nrefs " + Join(t.arg_refs) + " items " + Join(t.list_items) + "\ntensors";
  for (size_t i = 0; i < t.tensors.size(); ++i)
    s += " " + std::to_string(t.tensors[i].impl) + "/" + std::to_string(t.tensors[i].bytes()) +
         "/" + std::to_string(t.tensors[i].device) + "/" + std::to_string(t.tensors[i].partial) +
         "/" + std::to_string(t.tensor_ptrs[i]);
  s += "\nimpls " + std::to_string(t.num_impls) + " ids " + std::to_string(t.tensor_ids.size()) +
       "/" + std::to_string(t.alloc_ids.size()) + "\nshapes " + Join(t.tensor_shapes);
  for (uint32_t i = 0; i < t.shapes.size(); ++i) s += " " + t.shapes.Get(i);
  s += "\ncounts " + std::to_string(t.ops_without_end) + "/" +
       std::to_string(t.ops_ending_before_start) + "/" + std::to_string(t.events_before_parent);
  s += "\nschemas";
  for (const auto& [name, schemas] : t.schemas) {
    s += " " + name + ":";
    for (const std::string& schema : schemas) s += " " + schema;
  }
  return s + "\n";
}

}  // namespace

TEST_CASE("et join: the joined Trace is what the memtl reader reads from the same records") {
  char name[] = "/tmp/memtl_et_XXXXXX";
  const int fd = mkstemp(name);
  REQUIRE(fd >= 0);
  std::FILE* f = fdopen(fd, "w");
  std::fputs(kEt, f);
  std::fclose(f);
  for (const bool keep_shapes : {false, true}) {
    CAPTURE(keep_shapes);
    ReadOptions options;
    options.et_path = name;
    options.keep_shapes = keep_shapes;
    auto joined = ReadKinetoJoinedString(kKineto, "k.json", options);
    REQUIRE_MESSAGE(joined.ok(), (joined.ok() ? "" : joined.status().message()));
    CHECK(joined.value().diagnostics.empty());
    // What the case is about: a module record, arguments, a schema record.
    const Trace& t = joined.value().trace;
    CHECK(t.modules.size() == 1);
    CHECK(t.tensors.size() == 3);
    CHECK(t.arg_kinds.size() == 6);
    CHECK(t.schemas.size() == 1);
    CHECK(t.shapes.size() == (keep_shapes ? 2 : 0));
    ReadOptions text_options;
    text_options.keep_shapes = keep_shapes;
    auto read = ReadTraceString(kText, "joined", text_options);
    REQUIRE_MESSAGE(read.ok(), (read.ok() ? "" : read.status().message()));
    // What the text could not say, which the join set after reading it.
    read.value().header.pairs_in_time_order = true;
    read.value().header.impls_held = true;
    CHECK(Dump(joined.value().trace) == Dump(read.value()));
  }
  std::remove(name);
}

// The execution-trace join (core/read/et/et_join.h): ops joined by record
// function id, a storage id mapped to the address that allocated it, and
// bad execution traces (not JSON, no nodes, a join that covers nothing).
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/read/et/et_join.h"
#include "core/read/et/et_reader.h"
#include "core/read/kineto/kineto_reader.h"

using namespace memtl;

namespace {

// A Kineto trace: aten::empty (rf 7) allocating 64 bytes at 4096 and
// aten::fill_ (rf 8) writing it; the tensor freed at the end.
const char* const kKineto = R"({"traceEvents": [
{"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": {"Record function id": 7}},
{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 11, "args": {"Bytes": 64, "Addr": 4096, "Device Type": 0, "Device Id": -1, "Total Allocated": 64}},
{"ph": "X", "cat": "cpu_op", "name": "aten::fill_", "pid": 1, "tid": 1, "ts": 20, "dur": 5, "args": {"Record function id": 8}},
{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 30, "args": {"Bytes": -64, "Addr": 4096, "Device Type": 0, "Device Id": -1, "Total Allocated": 0}}
]}
)";

std::string EtNode(int id, uint64_t rf, const char* name, const char* in_values,
                   const char* in_types, const char* in_shapes, const char* out_values) {
  return std::string(R"J({"id": )J") + std::to_string(id) + R"J(, "name": ")J" + name +
         R"J(", "ctrl_deps": 1, "inputs": {"values": )J" + in_values + R"J(, "shapes": )J" +
         in_shapes + R"J(, "types": )J" + in_types +
         R"J(, "strides": []}, "outputs": {"values": )J" + out_values +
         R"J(, "shapes": [[16]], "types": ["Tensor(float)"], "strides": [[1]]}, )J" +
         R"J("attrs": [{"name": "rf_id", "type": "uint64", "value": )J" + std::to_string(rf) +
         "}]}";
}

std::string Et(uint64_t rf_empty, uint64_t rf_fill) {
  return R"J({"schema": "1.1.1-chakra.0.0.4", "nodes": [)J" +
         EtNode(2, rf_empty, "aten::empty", "[[16]]", R"J(["GenericList[Int]"])J", "[[[]]]",
                R"J([[5, 6, 0, 16, 4, "cpu"]])J") +
         ",\n" +
         EtNode(3, rf_fill, "aten::fill_", R"J([[5, 6, 0, 16, 4, "cpu"], 1.5])J",
                R"J(["Tensor(float)", "Double"])J", "[[16], []]",
                R"J([[5, 6, 0, 16, 4, "cpu"]])J") +
         "]}\n";
}

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& text) {
    char name[] = "/tmp/memtl_et_XXXXXX";
    const int fd = mkstemp(name);
    REQUIRE(fd >= 0);
    path = name;
    std::FILE* f = fdopen(fd, "w");
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  ~TempFile() { std::remove(path.c_str()); }
};

Expected<KinetoRead> Joined(const std::string& et_text, const std::string& kineto = kKineto) {
  const TempFile et(et_text);
  ReadOptions options;
  options.et_path = et.path;
  return ReadKinetoJoinedString(kineto, "k.json", options);
}

}  // namespace

TEST_CASE("et join: ops by record function id, the storage mapped to its allocation") {
  auto r = Joined(Et(7, 8));
  REQUIRE(r.ok());
  const Trace& t = r.value().trace;
  CHECK(t.ops.size() == 2);
  CHECK(t.tensors.size() == 1);  // fill_'s self; empty's int list is not captured
  REQUIRE(t.tensor_ptrs.size() == 1);
  CHECK(t.tensor_ptrs[0] == 4096);  // storage 6 is what aten::empty allocated
  CHECK(r.value().info.note.find("joined 2 of 2 ops (100.0%)") != std::string::npos);
  CHECK(r.value().info.note.find("1 of 1 allocations (100.0%)") != std::string::npos);
  CHECK(r.value().diagnostics.empty());
}

TEST_CASE("et join: record function ids are 64-bit (PyTorch's RecordFunctionHandle)") {
  std::string kineto = kKineto;
  kineto.replace(kineto.find("\"Record function id\": 7"), 23,
                 "\"Record function id\": 4294967303");  // 2^32 + 7
  kineto.replace(kineto.find("\"Record function id\": 8"), 23,
                 "\"Record function id\": 18446744073709551614");
  auto r = Joined(Et(4294967303u, 18446744073709551614u), kineto);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.status().message()));
  CHECK(r.value().info.note.find("joined 2 of 2 ops (100.0%)") != std::string::npos);
  // The low 32 bits alone join nothing.
  auto low = Joined(Et(7, 8), kineto);
  REQUIRE(!low.ok());
}

TEST_CASE("et join: an op whose rf_id is missing or names another node is left out, counted") {
  auto r = Joined(Et(7, 9));  // fill_ has rf 8 in Kineto
  REQUIRE(r.ok());
  CHECK(r.value().trace.tensors.empty());
  CHECK(r.value().info.note.find("joined 1 of 2 ops (50.0%)") != std::string::npos);
  REQUIRE(r.value().diagnostics.entries().size() == 1);
  CHECK(r.value().diagnostics.entries().begin()->first.find("joins no execution-trace node") !=
        std::string::npos);
}

TEST_CASE("et join: bad execution traces") {
  SUBCASE("a join that covers nothing") {
    auto r = Joined(Et(70, 80));
    REQUIRE(!r.ok());
    CHECK(r.status().message().find("joins none of the Kineto trace's 2 ops") != std::string::npos);
  }
  SUBCASE("not JSON") {
    auto r = Joined("not json at all\n");
    REQUIRE(!r.ok());
    CHECK(r.status().message().find("not an execution trace") != std::string::npos);
  }
  SUBCASE("no nodes") {
    auto r = Joined("{\"schema\": \"1.1.1\", \"nodes\": []}\n");
    REQUIRE(!r.ok());
    CHECK(r.status().message().find("has no nodes") != std::string::npos);
  }
  SUBCASE("cut off") {
    const std::string et = Et(7, 8);
    auto r = Joined(et.substr(0, et.size() / 2));
    REQUIRE(!r.ok());
    CHECK(r.status().message().find("cut off") != std::string::npos);
  }
  SUBCASE("a node that is not JSON") {
    auto r = Joined("{\"nodes\": [{\"id\": 1, \"name\": nope}]}\n");
    REQUIRE(!r.ok());
    CHECK(r.status().message().find("not valid JSON") != std::string::npos);
  }
  SUBCASE("a missing file") {
    ReadOptions options;
    options.et_path = "/nonexistent/et.json";
    auto r = ReadKinetoJoinedString(kKineto, "k.json", options);
    REQUIRE(!r.ok());
  }
}

namespace {

// A storage id is one data pointer for the run, so a storage maps to an
// address only if every read of it is made while a block is allocated
// there and every op that creates it starts while none is.
// - At 8192, outside any op, the 8-byte scalar that add_ wraps from a
//   Python number; the 8-byte buffer beside it (storage 20, allocated
//   before the profile) is read again after that free.
// - At 12288, a 64-byte workspace of backward_op (rf 3) freed inside it;
//   aten::empty (rf 4) creates storage 30 at 16384 after it, fill_ reads it.
const char* const kLifetimes = R"({"traceEvents": [
{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 10, "args": {"Bytes": 8, "Addr": 8192, "Device Type": 0, "Device Id": -1}},
{"ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": 1, "tid": 1, "ts": 12, "dur": 3, "args": {"Record function id": 1}},
{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 16, "args": {"Bytes": -8, "Addr": 8192, "Device Type": 0, "Device Id": -1}},
{"ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": 1, "tid": 1, "ts": 30, "dur": 3, "args": {"Record function id": 2}},
{"ph": "X", "cat": "cpu_op", "name": "backward_op", "pid": 1, "tid": 1, "ts": 40, "dur": 20, "args": {"Record function id": 3}},
{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 41, "args": {"Bytes": 64, "Addr": 12288, "Device Type": 0, "Device Id": -1}},
{"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 43, "dur": 2, "args": {"Record function id": 4}},
{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 44, "args": {"Bytes": 64, "Addr": 16384, "Device Type": 0, "Device Id": -1}},
{"ph": "X", "cat": "cpu_op", "name": "aten::fill_", "pid": 1, "tid": 1, "ts": 50, "dur": 2, "args": {"Record function id": 5}},
{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 58, "args": {"Bytes": -64, "Addr": 12288, "Device Type": 0, "Device Id": -1}},
{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 70, "args": {"Bytes": -64, "Addr": 16384, "Device Type": 0, "Device Id": -1}}
]}
)";

std::string Node(int id, int rf, const char* name, const char* inputs, const char* outputs) {
  return std::string(R"J({"id": )J") + std::to_string(id) + R"J(, "name": ")J" + name +
         R"J(", "ctrl_deps": 1, "inputs": )J" + inputs + R"J(, "outputs": )J" + outputs +
         R"J(, "attrs": [{"name": "rf_id", "type": "uint64", "value": )J" + std::to_string(rf) +
         "}]}";
}

const char* const kNone = R"J({"values": [], "shapes": [], "types": [], "strides": []})J";

std::string LifetimesEt() {
  const char* add1 =
      R"J({"values": [[10, 20, 0, 1, 8, "cpu"], [11, 21, 0, 1, 8, "cpu"]], "shapes": [[], []], "types": ["Tensor(long int)", "Tensor(long int)"], "strides": [[], []]})J";
  const char* add2 =
      R"J({"values": [[10, 20, 0, 1, 8, "cpu"], [12, 22, 0, 1, 8, "cpu"]], "shapes": [[], []], "types": ["Tensor(long int)", "Tensor(long int)"], "strides": [[], []]})J";
  const char* self =
      R"J({"values": [[10, 20, 0, 1, 8, "cpu"]], "shapes": [[]], "types": ["Tensor(long int)"], "strides": [[]]})J";
  const char* created =
      R"J({"values": [[13, 30, 0, 16, 4, "cpu"]], "shapes": [[16]], "types": ["Tensor(float)"], "strides": [[1]]})J";
  return R"J({"schema": "1.1.1-chakra.0.0.4", "nodes": [)J" + Node(2, 1, "aten::add_", add1, self) +
         ",\n" + Node(3, 2, "aten::add_", add2, self) + ",\n" +
         Node(4, 3, "backward_op", kNone, created) + ",\n" +
         Node(5, 4, "aten::empty", kNone, created) + ",\n" +
         Node(6, 5, "aten::fill_", created, created) + "]}\n";
}

}  // namespace

TEST_CASE("et join: a storage maps only to an address live at its reads, free at its creation") {
  const TempFile et(LifetimesEt());
  ReadOptions options;
  options.et_path = et.path;
  auto r = ReadKinetoJoinedString(kLifetimes, "k.json", options);
  REQUIRE(r.ok());
  const Trace& t = r.value().trace;
  // add_ #1: the buffer, the scalar; add_ #2: the buffer, another scalar;
  // fill_: storage 30.
  REQUIRE(t.tensor_ptrs.size() == 5);
  CHECK(t.tensor_ptrs[1] == 8192);  // the scalar, not the buffer read after the free
  CHECK(t.tensor_ptrs[0] != 8192);
  CHECK(t.tensor_ptrs[0] == t.tensor_ptrs[2]);
  CHECK(t.tensor_ptrs[4] == 16384);  // what aten::empty created, not the workspace
  // The workspace holds no tensor: 2 of 3 allocations mapped.
  CHECK(r.value().info.note.find("2 of 3 allocations") != std::string::npos);
}

namespace {

// A parameter of 64 bytes from before the profile (storage 9), read by
// add_ (rf 1); then aten::empty (rf 2) allocates 64 bytes. The allocator's
// total at that allocation is 64 plus what was allocated before the
// profile: `before`.
std::string PreProfileKineto(int before) {
  return R"({"traceEvents": [
{"ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": {"Record function id": 1}},
{"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 20, "dur": 5, "args": {"Record function id": 2}},
{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 21, "args": {"Bytes": 64, "Addr": 4096, "Device Type": 0, "Device Id": -1, "Total Allocated": )" +
         std::to_string(64 + before) + R"(}}
]}
)";
}

std::string PreProfileEt() {
  const char* add =
      R"J({"values": [[5, 9, 0, 16, 4, "cpu"], [5, 9, 0, 16, 4, "cpu"]], "shapes": [[16], [16]], "types": ["Tensor(float)", "Tensor(float)"], "strides": [[1], [1]]})J";
  const char* self =
      R"J({"values": [[5, 9, 0, 16, 4, "cpu"]], "shapes": [[16]], "types": ["Tensor(float)"], "strides": [[1]]})J";
  const char* created =
      R"J({"values": [[6, 10, 0, 16, 4, "cpu"]], "shapes": [[16]], "types": ["Tensor(float)"], "strides": [[1]]})J";
  return R"J({"schema": "1.1.1-chakra.0.0.4", "nodes": [)J" + Node(2, 1, "aten::add_", add, self) +
         ",\n" + Node(3, 2, "aten::empty", kNone, created) + "]}\n";
}

}  // namespace

// The Kineto reader adds the allocator's memory from before the profile as
// one allocation; the parameter the execution trace shows from before the
// profile is part of it, and the timeline counts it as a pre-existing
// tensor: the allocation keeps only the rest (it counted the parameter
// twice, the total 64 bytes above the allocator's).
TEST_CASE("et join: memory from before the profile is not counted again for its tensors") {
  const TempFile et(PreProfileEt());
  ReadOptions options;
  options.et_path = et.path;
  auto allocs = [&](int before) {
    auto r = ReadKinetoJoinedString(PreProfileKineto(before), "k.json", options);
    REQUIRE(r.ok());
    std::vector<int64_t> bytes;
    for (const AllocInfo& a : r.value().trace.allocs) bytes.push_back(a.bytes);
    CHECK(r.value().info.note.find("1 of 1 allocations (100.0%)") != std::string::npos);
    return bytes;
  };
  // Without the join: one allocation of everything from before.
  auto kineto = ReadKinetoString(PreProfileKineto(1064), "k.json");
  REQUIRE(kineto.ok());
  CHECK(int64_t{kineto.value().trace.allocs[0].bytes} == 1064);
  // Joined: the parameter's 64 bytes are its tensor's, 1000 no tensor's.
  CHECK(allocs(1064) == std::vector<int64_t>{1000, 64});
  // All of it the parameter: no allocation (the events renumbered).
  CHECK(allocs(64) == std::vector<int64_t>{64});
  // An allocator that counted less than the tensors (the CPU's counts only
  // what was allocated while a profiler ran): the tensors stay.
  CHECK(allocs(16) == std::vector<int64_t>{64});
}

namespace {

// aten::_fused_sgd_ (rf 1), an op PyTorch 1.13's schema table lacks, with
// its tensor lists, an empty list where its schema takes a tensor list and
// a string; then aten::sum (rf 2) with an empty int list.
const char* const kSchemas = R"({"traceEvents": [
{"ph": "X", "cat": "cpu_op", "name": "aten::_fused_sgd_", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": {"Record function id": 1}},
{"ph": "X", "cat": "cpu_op", "name": "aten::sum", "pid": 1, "tid": 1, "ts": 20, "dur": 5, "args": {"Record function id": 2}},
{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 21, "args": {"Bytes": 4, "Addr": 4096, "Device Type": 0, "Device Id": -1}}
]}
)";

std::string SchemaNode(int id, int rf, const char* name, const char* inputs, const char* schema) {
  return std::string(R"J({"id": )J") + std::to_string(id) + R"J(, "name": ")J" + name +
         R"J(", "ctrl_deps": 1, "inputs": )J" + inputs + R"J(, "outputs": )J" + kNone +
         R"J(, "attrs": [{"name": "rf_id", "type": "uint64", "value": )J" + std::to_string(rf) +
         R"J(}, {"name": "op_schema", "type": "string", "value": ")J" + schema + "\"}]}";
}

std::string SchemasEt() {
  const char* fused =
      R"J({"values": [[[5, 9, 0, 16, 4, "cpu"]], [[6, 10, 0, 16, 4, "cpu"]], [], "floor"], "shapes": [[[16]], [[16]], [], []], "types": ["GenericList[Tensor(float)]", "GenericList[Tensor(float)]", "GenericList[]", "String"], "strides": [[[1]], [[1]], [], []]})J";
  const char* sum =
      R"J({"values": [[5, 9, 0, 16, 4, "cpu"], []], "shapes": [[16], []], "types": ["Tensor(float)", "GenericList[]"], "strides": [[1], []]})J";
  return R"J({"schema": "1.1.1-chakra.0.0.4", "nodes": [)J" +
         SchemaNode(2, 1, "aten::_fused_sgd_", fused,
                    "aten::_fused_sgd_(Tensor(a!)[] self, Tensor(b!)[] grads, Tensor(c!)[] "
                    "momentum_buffer_list, str mode) -> ()") +
         ",\n" +
         SchemaNode(3, 2, "aten::sum", sum,
                    "aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, "
                    "ScalarType? dtype=None) -> Tensor") +
         "]}\n";
}

}  // namespace

// As PyTorch's profiler records arguments: a string not at all, an empty
// list as a tensor list only where the schema takes one; and the schema of
// an op PyTorch 1.13's table lacks from the execution trace (with neither,
// _fused_sgd_ matched no schema and was no node of the data-flow graph).
TEST_CASE("et join: arguments as PyTorch's profiler records them, schemas the table lacks") {
  const TempFile et(SchemasEt());
  ReadOptions options;
  options.et_path = et.path;
  auto r = ReadKinetoJoinedString(kSchemas, "k.json", options);
  REQUIRE(r.ok());
  const Trace& t = r.value().trace;
  REQUIRE(t.ops.size() == 2);
  std::vector<ArgKind> fused, sum;
  for (const Arg& a : t.ArgsOf(0)) fused.push_back(a.kind);
  for (const Arg& a : t.ArgsOf(1)) sum.push_back(a.kind);
  CHECK(fused == std::vector<ArgKind>{ArgKind::kTensorList, ArgKind::kTensorList,
                                      ArgKind::kTensorList, ArgKind::kNone});
  CHECK(sum == std::vector<ArgKind>{ArgKind::kTensor, ArgKind::kNone});
  REQUIRE(t.schemas.size() == 1);  // aten::sum is in the table
  CHECK(t.schemas[0].first == "aten::_fused_sgd_");
  CHECK(t.schemas[0].second.size() == 1);
  CHECK(r.value().diagnostics.empty());
}

namespace {

// On a GPU: a 64-byte tensor from before the profile (storage 9) read by
// add_ (rf 1), then its block at 8192 freed (CUDA reports frees of blocks
// allocated before the profile); aten::empty (rf 2) allocates 64 bytes.
const char* const kFreedBefore = R"({"traceEvents": [
{"ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": {"Record function id": 1}},
{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 30, "args": {"Bytes": -64, "Addr": 8192, "Device Type": 1, "Device Id": 0, "Total Allocated": 1000}},
{"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 40, "dur": 5, "args": {"Record function id": 2}},
{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 41, "args": {"Bytes": 64, "Addr": 16384, "Device Type": 1, "Device Id": 0, "Total Allocated": 1064}}
]}
)";

std::string FreedBeforeEt() {
  const char* add =
      R"J({"values": [[5, 9, 0, 16, 4, "cuda:0"], [5, 9, 0, 16, 4, "cuda:0"]], "shapes": [[16], [16]], "types": ["Tensor(float)", "Tensor(float)"], "strides": [[1], [1]]})J";
  const char* self =
      R"J({"values": [[5, 9, 0, 16, 4, "cuda:0"]], "shapes": [[16]], "types": ["Tensor(float)"], "strides": [[1]]})J";
  const char* created =
      R"J({"values": [[6, 10, 0, 16, 4, "cuda:0"]], "shapes": [[16]], "types": ["Tensor(float)"], "strides": [[1]]})J";
  return R"J({"schema": "1.1.1-chakra.0.0.4", "nodes": [)J" + Node(2, 1, "aten::add_", add, self) +
         ",\n" + Node(3, 2, "aten::empty", kNone, created) + "]}\n";
}

}  // namespace

// The storage from before the profile is the block the profile frees (it
// kept an address of its own and outlived the free), and so it is not
// part of the memory from before the profile that no event frees (1000
// bytes: that allocation keeps them all).
TEST_CASE("et join: a storage from before the profile ends where its block is freed") {
  const TempFile et(FreedBeforeEt());
  ReadOptions options;
  options.et_path = et.path;
  auto r = ReadKinetoJoinedString(kFreedBefore, "k.json", options);
  REQUIRE(r.ok());
  const Trace& t = r.value().trace;
  REQUIRE(t.tensor_ptrs.size() == 2);
  CHECK(t.tensor_ptrs[0] == 8192);
  CHECK(t.tensor_ptrs[1] == 8192);
  std::vector<int64_t> bytes;
  for (const AllocInfo& a : t.allocs) bytes.push_back(a.bytes);
  CHECK(bytes == std::vector<int64_t>{1000, -64, 64});
}

// Issue #34: a tensor's numbers are checked where the reader takes them
// (core/model/checked.h); a product or sum past 64 bits was undefined
// behaviour, a wrapped size in a Release build.
TEST_CASE("et join: a tensor whose sizes overflow is refused, naming its line") {
  auto tensor_et = [](const char* value, const char* shape, const char* strides) {
    return std::string(R"J({"schema": "1.0.1", "nodes": [
{"id": 2, "name": "aten::fill_", "rf_id": 8, "inputs": [)J") +
           value + R"J(], "input_shapes": [)J" + shape +
           R"J(], "input_types": ["Tensor(float)"])J" +
           (strides != nullptr ? std::string(R"J(, "input_strides": [)J") + strides + "]" : "") +
           R"J(, "outputs": []}
]}
)J";
  };
  SUBCASE("(offset + numel) * itemsize past 2^63-1") {
    auto r = Joined(tensor_et(R"J([5, 6, 9223372036854775000, 1000, 4, "cpu"])J", "[16]", nullptr));
    REQUIRE(!r.ok());
    CHECK(r.status().message().find(
              ": line 2: a tensor's (offset + numel) * itemsize is past "
              "2^63-1 (offset 9223372036854775000, numel 1000, itemsize 4)") != std::string::npos);
  }
  SUBCASE("a contiguous shape of more than 2^63-1 elements") {
    auto r = Joined(tensor_et(R"J([5, 6, 0, 16, 4, "cpu"])J",
                              "[281474976710656, 281474976710656, 281474976710656, 1]", nullptr));
    REQUIRE(!r.ok());
    CHECK(r.status().message().find(": line 2: a tensor's shape has more than 2^63-1 elements") !=
          std::string::npos);
  }
  SUBCASE("a dimension past 2^48, as the memtl trace reader refuses it") {
    auto r = Joined(tensor_et(R"J([5, 6, 0, 16, 4, "cpu"])J", "[16]", "[1125899906842624]"));
    REQUIRE(!r.ok());
    CHECK(r.status().message().find(": line 2: a tensor's shape or strides hold "
                                    "1125899906842624, out of range (at most 2^48)") !=
          std::string::npos);
  }
  SUBCASE("an itemsize that does not fit 32 bits") {
    auto r = Joined(tensor_et(R"J([5, 6, 0, 16, 4294967297, "cpu"])J", "[16]", nullptr));
    REQUIRE(!r.ok());
    CHECK(r.status().message().find(": line 2: a tensor's itemsize 4294967297 is out of range") !=
          std::string::npos);
  }
  SUBCASE("an itemsize that is no dtype's") {
    // The join writes a dtype of the itemsize: with 3 bytes checked and 4
    // written, 2^44 elements passed here and were refused in the joined trace.
    // (0, an undefined tensor's, is checked as the float32 the join writes.)
    for (const char* itemsize : {"3", "12", "32"}) {
      CAPTURE(itemsize);
      auto r =
          Joined(tensor_et((std::string("[5, 6, 0, 16, ") + itemsize + R"J(, "cpu"])J").c_str(),
                           "[17592186044416]", nullptr));
      REQUIRE(!r.ok());
      CHECK(r.status().code() == StatusCode::kBadInput);
      CHECK(r.status().message().find(std::string(": line 2: a tensor's itemsize ") + itemsize +
                                      " is no dtype's (1, 2, 4, 8 or 16 bytes)") !=
            std::string::npos);
    }
  }
  // What the memtl trace reader refuses in its own tensors, the execution
  // trace's reader refuses too (the join wrote them into the trace it makes,
  // which then failed as "the join ... made a bad trace": found by
  // fuzz_et; its inputs are in tests/fuzz/regressions/et-join-*.json).
  SUBCASE("a negative size") {
    auto r = Joined(tensor_et(R"J([5, 6, 0, 16, 4, "cpu"])J", "[-16]", "[1]"));
    REQUIRE(!r.ok());
    CHECK(r.status().message().find(": line 2: a tensor's shape holds a negative size, -16") !=
          std::string::npos);
  }
  SUBCASE("more than 2^46-1 bytes") {
    auto r = Joined(tensor_et(R"J([5, 6, 0, 16, 4, "cpu"])J", "[35184372088832]", "[1]"));
    REQUIRE(!r.ok());
    CHECK(r.status().message().find(": line 2: a tensor of more than 2^46-1 bytes") !=
          std::string::npos);
  }
  SUBCASE("contiguous strides past 2^48") {
    auto r = Joined(tensor_et(R"J([5, 6, 0, 16, 1, "cpu"])J", "[2, 281474976710656, 16]", nullptr));
    REQUIRE(!r.ok());
    CHECK(r.status().message().find(": line 2: a tensor's contiguous strides pass 2^48") !=
          std::string::npos);
  }
  SUBCASE("a device that is none") {
    auto r = Joined(tensor_et(R"J([5, 6, 0, 16, 4, "GenericList[]"])J", "[16]", "[1]"));
    REQUIRE(!r.ok());
    CHECK(r.status().message().find(
              ": line 2: a tensor's device \"GenericList[]\" is not a device") !=
          std::string::npos);
  }
}

namespace {

// Issue #38: a block that no tensor of the execution trace owns (the
// random-number-generator state that torch.utils.checkpoint saves, 5056
// bytes on the CPU) is allocated at 8192 inside the "## forward ##"
// annotation (rf 1); aten::add_ (rf 2) in it then reads a 64-byte
// parameter from before the profile (storage 9), which no op creates.
const char* const kUnowned = R"({"traceEvents": [
{"ph": "X", "cat": "user_annotation", "name": "## forward ##", "pid": 1, "tid": 1, "ts": 10, "dur": 40, "args": {"Record function id": 1}},
{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 11, "args": {"Bytes": 5056, "Addr": 8192, "Device Type": 0, "Device Id": -1}},
{"ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": 1, "tid": 1, "ts": 20, "dur": 5, "args": {"Record function id": 2}},
{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 60, "args": {"Bytes": -5056, "Addr": 8192, "Device Type": 0, "Device Id": -1}}
]}
)";

std::string UnownedEt() {
  const char* add =
      R"J({"values": [[5, 9, 0, 16, 4, "cpu"], [5, 9, 0, 16, 4, "cpu"]], "shapes": [[16], [16]], "types": ["Tensor(float)", "Tensor(float)"], "strides": [[1], [1]]})J";
  const char* self =
      R"J({"values": [[5, 9, 0, 16, 4, "cpu"]], "shapes": [[16]], "types": ["Tensor(float)"], "strides": [[1]]})J";
  return R"J({"schema": "1.1.1-chakra.0.0.4", "nodes": [)J" +
         Node(2, 1, "## forward ##", kNone, kNone) + ",\n" + Node(3, 2, "aten::add_", add, self) +
         "]}\n";
}

}  // namespace

// The parameter fits in the block, and that is all the two share: the
// block stays unmapped, the parameter keeps an address of its own (a
// pre-existing tensor, as PyTorch's memory profiler has it).
TEST_CASE("et join: a block no tensor owns does not take a parameter from before the profile") {
  const TempFile et(UnownedEt());
  ReadOptions options;
  options.et_path = et.path;
  auto r = ReadKinetoJoinedString(kUnowned, "k.json", options);
  REQUIRE(r.ok());
  const Trace& t = r.value().trace;
  REQUIRE(t.tensor_ptrs.size() == 2);
  CHECK(t.tensor_ptrs[0] != 8192);
  CHECK(t.tensor_ptrs[0] == t.tensor_ptrs[1]);
  CHECK(r.value().info.note.find("0 of 1 allocations") != std::string::npos);
}

namespace {

// Issue #38: tensors without data (FSDP2's DTensor wrappers, meta tensors,
// empty tensors) all have the null data pointer's storage id (7). aten::empty
// (rf 1) creates an empty tensor there; aten::add_ (rf 2) reads two wrappers
// of 16 and 4 elements with it; aten::mul_ (rf 3), a meta tensor with
// another (11, the only sighting of the null pointer in its trace), and a
// 64-byte block inside it, with 64 bytes from before the profile beside it.
const char* const kDataless = R"({"traceEvents": [
{"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": {"Record function id": 1}},
{"ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": 1, "tid": 1, "ts": 20, "dur": 5, "args": {"Record function id": 2}},
{"ph": "X", "cat": "cpu_op", "name": "aten::mul_", "pid": 1, "tid": 1, "ts": 30, "dur": 5, "args": {"Record function id": 3}},
{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 31, "args": {"Bytes": 64, "Addr": 4096, "Device Type": 0, "Device Id": -1, "Total Allocated": 128}}
]}
)";

std::string DatalessEt() {
  const char* empty =
      R"J({"values": [[5, 7, 0, 0, 4, "cpu"]], "shapes": [[0]], "types": ["Tensor(float)"], "strides": [[1]]})J";
  const char* add =
      R"J({"values": [[6, 7, 0, 16, 4, "cpu"], [8, 7, 0, 4, 4, "cpu"]], "shapes": [[16], [4]], "types": ["Tensor(float)", "Tensor(float)"], "strides": [[1], [1]]})J";
  const char* add_self =
      R"J({"values": [[6, 7, 0, 16, 4, "cpu"]], "shapes": [[16]], "types": ["Tensor(float)"], "strides": [[1]]})J";
  const char* mul =
      R"J({"values": [[9, 11, 0, 16, 4, "meta"], [9, 11, 0, 16, 4, "meta"]], "shapes": [[16], [16]], "types": ["Tensor(float)", "Tensor(float)"], "strides": [[1], [1]]})J";
  const char* mul_self =
      R"J({"values": [[9, 11, 0, 16, 4, "meta"]], "shapes": [[16]], "types": ["Tensor(float)"], "strides": [[1]]})J";
  return R"J({"schema": "1.1.1-chakra.0.0.4", "nodes": [)J" +
         Node(2, 1, "aten::empty", kNone, empty) + ",\n" + Node(3, 2, "aten::add_", add, add_self) +
         ",\n" + Node(4, 3, "aten::mul_", mul, mul_self) + "]}\n";
}

}  // namespace

// The null data pointer's id is no storage: as one, it was a phantom
// pre-existing tensor of 64 bytes that add_ and mul_ wrote to (a version
// bump of one tensor for every data-less tensor's op), counted in the
// memory from before the profile. Its tensors have no data pointer, as
// PyTorch's profiler has them.
TEST_CASE("et join: storage ids are only trusted for tensors with data") {
  const TempFile et(DatalessEt());
  ReadOptions options;
  options.et_path = et.path;
  auto r = ReadKinetoJoinedString(kDataless, "k.json", options);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.status().message()));
  const Trace& t = r.value().trace;
  REQUIRE(t.tensor_ptrs.size() == 4);
  for (const uint64_t ptr : t.tensor_ptrs) CHECK(ptr == 0);
  CHECK(r.value().info.note.find("0 of 1 allocations") != std::string::npos);
  CHECK(r.value().info.note.find("before the profile are its tensors") == std::string::npos);
}

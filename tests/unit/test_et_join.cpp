// The execution-trace join (core/read/et_join.h): ops joined by record
// function id, a storage id mapped to the address that allocated it, and
// bad execution traces (not JSON, no nodes, a join that covers nothing).
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "core/read/et_join.h"
#include "core/read/et_reader.h"
#include "core/read/kineto_reader.h"

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

std::string EtNode(int id, int rf, const char* name, const char* in_values, const char* in_types,
                   const char* in_shapes, const char* out_values) {
  return std::string(R"J({"id": )J") + std::to_string(id) + R"J(, "name": ")J" + name +
         R"J(", "ctrl_deps": 1, "inputs": {"values": )J" + in_values + R"J(, "shapes": )J" +
         in_shapes + R"J(, "types": )J" + in_types +
         R"J(, "strides": []}, "outputs": {"values": )J" + out_values +
         R"J(, "shapes": [[16]], "types": ["Tensor(float)"], "strides": [[1]]}, )J" +
         R"J("attrs": [{"name": "rf_id", "type": "uint64", "value": )J" + std::to_string(rf) +
         "}]}";
}

std::string Et(int rf_empty, int rf_fill) {
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

Expected<KinetoRead> Joined(const std::string& et_text) {
  const TempFile et(et_text);
  ReadOptions options;
  options.et_path = et.path;
  return ReadKinetoString(kKineto, "k.json", options);
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
    auto r = ReadKinetoString(kKineto, "k.json", options);
    REQUIRE(!r.ok());
  }
}

// Inputs other than memtl traces: format detection, the Kineto reader
// (nesting, devices, the totals check, bad input) and raw timelines through
// the pipeline.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <variant>
#include <vector>

#include "core/pipeline/analysis.h"
#include "core/read/common/format.h"
#include "core/read/kineto/kineto_reader.h"
#include "core/read/raw/raw_timeline.h"
#include "tests/unit/gzip_text.h"

using namespace memtl;

namespace {

std::string Op(const char* cat, const char* name, const char* ts, const char* dur, int tid = 1) {
  return std::string("{\"ph\": \"X\", \"cat\": \"") + cat + "\", \"name\": \"" + name +
         "\", \"pid\": 7, \"tid\": " + std::to_string(tid) + ", \"ts\": " + ts +
         ", \"dur\": " + dur + "}";
}

std::string Mem(const char* ts, long bytes, long addr, long total, int type = 0, int id = -1,
                int tid = 1) {
  return std::string(
             "{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"name\": \"[memory]\", "
             "\"pid\": 7, \"tid\": ") +
         std::to_string(tid) + ", \"ts\": " + ts +
         ", \"args\": {\"Total Reserved\": 0, \"Total Allocated\": " + std::to_string(total) +
         ", \"Bytes\": " + std::to_string(bytes) + ", \"Device Id\": " + std::to_string(id) +
         ", \"Device Type\": " + std::to_string(type) + ", \"Addr\": " + std::to_string(addr) +
         "}}";
}

std::string Doc(const std::vector<std::string>& events, const char* base = "1000000") {
  std::string s = "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [],\n  \"traceEvents\": [\n";
  for (size_t i = 0; i < events.size(); ++i) s += (i ? ",\n  " : "  ") + events[i];
  return s + "\n  ],\n  \"baseTimeNanoseconds\": " + base + "\n}\n";
}

const std::string& NameOf(const Trace& t, uint32_t event) { return t.Name(t.events[event]); }

}  // namespace

TEST_CASE("format: decided by content") {
  CHECK(SniffFormat("{\"format\":\"memtl-trace\",\"version\":1}\n", false) ==
        InputFormat::kMemtlTrace);
  CHECK(SniffFormat("{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [{\"a\": \"]}\"}],\n"
                    "  \"traceEvents\": [",
                    false) == InputFormat::kKineto);
  CHECK(SniffFormat("{\"metadata\": {\"x\": [1, {\"y\": \"\\\"\"}]}, \"traceEvents\": []}", true) ==
        InputFormat::kKineto);
  CHECK(SniffFormat("[{\"ph\": \"X\"}]", true) == InputFormat::kKineto);
  CHECK(SniffFormat("[[-1, 1, 512, 0], [10, 2, 64, 4]]", true) == InputFormat::kRawTimeline);
  CHECK(SniffFormat("[]", true) == InputFormat::kRawTimeline);
  CHECK(SniffFormat("[[1000, 2000], [[0, 1, 2, 3, 4, 5, 6, 7, 8]]]", true) ==
        InputFormat::kSizesTimeline);
  CHECK(SniffFormat("{\n  \"schema\": \"1.0.1\", \"pid\": 5, \"nodes\": [", false) ==
        InputFormat::kExecutionTrace);
  // Too short to tell: more is asked for, or at the end the memtl reader says.
  CHECK(SniffFormat("{\n  \"schemaVersion\": 1,\n  \"devicePro", false) == InputFormat::kNeedMore);
  CHECK(SniffFormat("{\n  \"schemaVersion\": 1,\n  \"devicePro", true) == InputFormat::kMemtlTrace);
  CHECK(SniffFormat("hello", true) == InputFormat::kMemtlTrace);
  CHECK(SniffFormat("", true) == InputFormat::kMemtlTrace);
  // Valid JSON of none of the formats, pretty-printed or the whole input:
  // named as JSON (the memtl reader called a pretty-printed document's
  // first line "not valid JSON").
  CHECK(SniffFormat("{\n  \"a\": 1\n}\n", false) == InputFormat::kOtherJson);
  CHECK(SniffFormat("[\n  1,\n  2\n]\n", false) == InputFormat::kOtherJson);
  CHECK(SniffFormat("{\n  \"a\": [[1, 2], {\"b\": \"}\"}]\n}", true) == InputFormat::kOtherJson);
  CHECK(SniffFormat("[[1, 2],\n  3]", true) == InputFormat::kOtherJson);
  CHECK(SniffFormat("{\"a\": 1}\n", true) == InputFormat::kOtherJson);
  CHECK(SniffFormat("\"x\"\n", true) == InputFormat::kOtherJson);
  CHECK(SniffFormat("{\"a\": 1}\n", false) == InputFormat::kNeedMore);  // more may follow
  // Not JSON, or JSON Lines whose first line is no header: the memtl
  // reader says what is wrong.
  CHECK(SniffFormat("{\n  \"a\": [1,\n}\n", true) == InputFormat::kMemtlTrace);
  CHECK(SniffFormat("{\n  \"a\": 01\n}\n", true) == InputFormat::kMemtlTrace);
  CHECK(SniffFormat("{\"a\": 1}\n{\"b\": 2}\n", true) == InputFormat::kMemtlTrace);
  CHECK(SniffFormat("[1, 2]\n[3]\n", true) == InputFormat::kMemtlTrace);
}

TEST_CASE("kineto: ops, python calls and allocations nested by time per thread") {
  // Out of time order in the file, two threads, a CUDA device.
  const std::string text = Doc({
      Mem("12.5", -64, 4096, 0), Op("cpu_op", "aten::add", "10.000", "5.000"),
      Op("python_function", "nn.Module: Linear_0", "9.000", "7.000"), Mem("11.25", 64, 4096, 64),
      Op("cpu_op", "aten::mm", "10.000", "2.000", 2), Mem("10.5", 256, 8192, 256, 1, 1, 2),
      Op("kernel", "gemm", "10.000", "1.000"),  // a GPU kernel: skipped
  });
  auto r = ReadKinetoString(text, "t.json");
  REQUIRE(r.ok());
  const Trace& t = r.value().trace;
  CHECK(r.value().diagnostics.empty());
  REQUIRE(t.events.size() == 6);
  // Roots by start time: the module (9 us) on thread 1, then aten::mm (10 us, thread 2).
  CHECK(NameOf(t, 0) == "nn.Module: Linear_0");
  CHECK(NameOf(t, 1) == "aten::add");
  CHECK(t.events[1].parent == 0);
  CHECK(t.events[2].kind == EventKind::kAlloc);
  CHECK(t.events[2].parent == 1);
  CHECK(t.event_t0[2] == 1000000 + 11250);  // the base plus exact nanoseconds
  CHECK(t.events[3].kind == EventKind::kAlloc);
  CHECK(t.allocs[t.events[3].payload].bytes == -64);
  CHECK(NameOf(t, 4) == "aten::mm");
  CHECK(t.events[5].parent == 4);
  CHECK(t.devices[t.allocs[t.events[5].payload].device].name == "cuda:1");
}

TEST_CASE("kineto: a thread named by a string and by a number is one thread") {
  // Kineto of 2021 wrote an op's tid as a string and a memory event's as a
  // number (the ResNet-50 peer trace): the allocation is still the op's.
  std::string op = Op("cpu_op", "aten::empty", "10.000", "5.000");
  op.replace(op.find("\"tid\": 1"), 8, "\"tid\": \"1\"");
  auto r = ReadKinetoString(Doc({op, Mem("11", 64, 4096, 64)}), "t.json");
  REQUIRE(r.ok());
  const Trace& t = r.value().trace;
  REQUIRE(t.events.size() == 2);
  CHECK(NameOf(t, 0) == "aten::empty");
  CHECK(t.events[1].kind == EventKind::kAlloc);
  CHECK(t.events[1].parent == 0);
}

TEST_CASE("kineto: 64-bit ids: thread ids and addresses up to 2^64-1") {
  // A thread id of 2^64-1 (torch 2.x's python tracer) names a thread like
  // any other; an address printed unsigned above 2^63 is kept whole, and so
  // is the same address printed signed.
  std::string op = Op("cpu_op", "aten::empty", "10.000", "5.000");
  op.replace(op.find("\"tid\": 1"), 8, "\"tid\": 18446744073709551615");
  std::string alloc = Mem("11", 64, 0, 64);
  alloc.replace(alloc.find("\"tid\": 1"), 8, "\"tid\": 18446744073709551615");
  alloc.replace(alloc.find("\"Addr\": 0"), 9, "\"Addr\": 18446744073709547520");
  std::string free = Mem("16", -64, -4096, 0);
  free.replace(free.find("\"tid\": 1"), 8, "\"tid\": 18446744073709551615");
  auto r = ReadKinetoString(Doc({op, alloc, free}), "t.json");
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.status().message()));
  const Trace& t = r.value().trace;
  REQUIRE(t.events.size() == 3);
  CHECK(t.events[1].parent == 0);
  CHECK(t.events[2].parent == kNone32);
  CHECK(t.alloc_ptrs[0] == t.alloc_ptrs[1]);
  CHECK(r.value().diagnostics.empty());
}

TEST_CASE("kineto: the allocated total is checked against Total Allocated") {
  SUBCASE("memory from before the profile becomes one allocation") {
    auto r = ReadKinetoString(Doc({Mem("1", 64, 10, 1064), Mem("2", 32, 20, 1096)}), "t.json");
    REQUIRE(r.ok());
    const Trace& t = r.value().trace;
    CHECK(r.value().diagnostics.empty());
    REQUIRE(t.allocs.size() == 3);
    CHECK(t.allocs[0].bytes == 1000);
    CHECK(t.event_t0[0] == 1000000 + 1000);
  }
  SUBCASE("a change that differs is counted") {
    auto r = ReadKinetoString(
        Doc({Mem("1", 64, 10, 64), Mem("2", 32, 20, 500), Mem("3", -32, 20, 468)}), "t.json");
    REQUIRE(r.ok());
    const auto& d = r.value().diagnostics.entries();
    REQUIRE(d.size() == 1);
    CHECK(d.begin()->second.count == 1);
    CHECK(d.begin()->second.example.find("cpu at t=1002000 ns: memtl 96 B, the trace 500 B") !=
          std::string::npos);
  }
  SUBCASE("without addresses a free pairs with the latest live allocation of its size") {
    const std::string text = Doc(
        {R"({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1, "args": {"Bytes": 8}})",
         R"({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 2, "args": {"Bytes": -8}})"});
    auto r = ReadKinetoString(text, "t.json");
    REQUIRE(r.ok());
    CHECK(r.value().trace.alloc_ptrs[0] == r.value().trace.alloc_ptrs[1]);
    CHECK(r.value().diagnostics.entries().size() == 1);
  }
}

TEST_CASE("kineto: eight GPUs in one file come out per device") {
  // One process's trace of eight devices (Device Id per event), each with
  // its own running Total Allocated, on one thread; the same addresses on
  // every device (each allocator has its own).
  std::vector<std::string> events;
  for (int d = 0; d < 8; ++d) {
    const long bytes = 1024L * (d + 1);
    events.push_back(Mem("1", bytes, 4096, bytes, 1, d));
    events.push_back(Mem("2", 512, 8192, bytes + 512, 1, d));
    events.push_back(Mem("3", -bytes, 4096, 512, 1, d));
  }
  auto r = ReadKinetoString(Doc(events), "t.json");
  REQUIRE(r.ok());
  CHECK(r.value().diagnostics.empty());  // every device's totals equal the trace's
  for (int d = 0; d < 8; ++d) {
    PipelineOptions options;
    options.device = "cuda:" + std::to_string(d);
    auto again = ReadKinetoString(Doc(events), "t.json");
    REQUIRE(again.ok());
    auto an = Analyze(std::move(again.value().trace), "t.json", false, true);
    REQUIRE(an.ok());
    auto c = Categorize(std::move(an.value()), options);
    REQUIRE(c.ok());
    const Trace& t = c.value()->analysis->trace;
    REQUIRE(t.devices.size() == 8);
    CHECK(t.devices[c.value()->device].name == options.device);
    CHECK(t.devices[c.value()->device].max_total_allocated == 1024L * (d + 1) + 512);
    const CoalescedTimeline rows =
        Coalesce(c.value()->timeline, c.value()->categories, c.value()->device);
    int64_t peak = 0;
    for (const auto& row : rows.sizes) {
      int64_t sum = 0;
      for (size_t i = 1; i < row.size(); ++i) sum += row[i];
      peak = std::max(peak, sum);
    }
    CHECK(peak == 1024L * (d + 1) + 512);
  }
  // Without --device: the accelerator whose memory peaks highest (cuda:7
  // here, the last), as PeakPerDevice measures it.
  auto again = ReadKinetoString(Doc(events), "t.json");
  REQUIRE(again.ok());
  auto an = Analyze(std::move(again.value().trace), "t.json", false, true);
  REQUIRE(an.ok());
  auto c = Categorize(std::move(an.value()), PipelineOptions());
  REQUIRE(c.ok());
  const Trace& t = c.value()->analysis->trace;
  CHECK(t.devices[c.value()->device].name == "cuda:7");
  const std::vector<int64_t> peaks = PeakPerDevice(c.value()->timeline, t.devices.size());
  REQUIRE(peaks.size() == 8);
  for (int d = 0; d < 8; ++d) CHECK(peaks[d] == 1024L * (d + 1) + 512);
}

TEST_CASE("default device: the accelerator that peaks highest, the first on a tie, else cpu") {
  Trace t;
  for (const char* name : {"cpu", "cuda:0", "hip:1", "cuda:1"}) t.InternDevice(name);
  CHECK(ResolveDevice(t, "", {100, 5, 7, 7}).value() == 2);     // hip:1, the first of two 7s
  CHECK(ResolveDevice(t, "", {100, -1, -1, -1}).value() == 0);  // no accelerator events: cpu
  CHECK(ResolveDevice(t, "", {-1, 0, -1, -1}).value() == 1);    // an accelerator with events
  CHECK(ResolveDevice(t, "cpu", {100, 5, 7, 7}).value() == 0);  // asked for
  CHECK(!ResolveDevice(t, "cuda:3", {100, 5, 7, 7}).ok());
}

TEST_CASE("kineto: bad input") {
  SUBCASE("no memory events") {
    auto r = ReadKinetoString(Doc({Op("cpu_op", "aten::add", "1", "1")}), "t.json");
    REQUIRE(!r.ok());
    CHECK(r.status().message().find("no [memory] events (profile_memory was off)") !=
          std::string::npos);
  }
  SUBCASE("a cut array: an error, or with partial the complete events") {
    const std::string full =
        Doc({Mem("1", 64, 10, 64), Op("cpu_op", "aten::add", "2", "1"), Mem("3", 8, 20, 72)});
    const std::string cut = full.substr(0, full.find("aten::add"));
    auto r = ReadKinetoString(cut, "t.json");
    REQUIRE(!r.ok());
    CHECK(r.status().message().find("cut off after 1 event (the run was killed?)") !=
          std::string::npos);
    ReadOptions partial;
    partial.partial = true;
    auto p = ReadKinetoString(cut, "t.json", partial);
    REQUIRE(p.ok());
    CHECK(p.value().info.stopped_early);
    CHECK(p.value().trace.allocs.size() == 1);
  }
  SUBCASE("NaN, strings and missing fields are diagnostics") {
    const std::string text = Doc({
        Mem("1", 64, 10, 64),
        R"({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 2, "args": {"Bytes": NaN}})",
        R"({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": "3", "args": {"Bytes": "8"}})",
        R"({"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": null, "dur": 1})",
        R"([1, 2])",
    });
    auto r = ReadKinetoString(text, "t.json");
    REQUIRE(r.ok());
    CHECK(r.value().trace.allocs.size() == 2);
    const auto& d = r.value().diagnostics.entries();
    CHECK(d.count("NaN or Infinity in a trace event (not JSON: read as not a number)") == 1);
    CHECK(d.at("number written as a string (read as the number)").count == 2);
    CHECK(d.count("trace event without a numeric \"ts\" (skipped)") == 1);
    CHECK(d.count("trace event that is not a JSON object (skipped)") == 1);
  }
  SUBCASE("a broken structure names its line") {
    auto r = ReadKinetoString("{\"traceEvents\": [{}\n {}]}", "t.json");
    REQUIRE(!r.ok());
    CHECK(r.status().message() ==
          "t.json: line 2: expected ',' or ']' after an element of \"traceEvents\"");
  }
}

namespace {

// The raw timeline at `path` categorized for an export.
Expected<std::unique_ptr<Exportable>> RawExportable(const std::string& path,
                                                    const PipelineOptions& options = {}) {
  auto file = AnalyzeAnyFile(path);
  if (!file.ok()) return file.status();
  REQUIRE(std::holds_alternative<std::unique_ptr<RawTimelineRead>>(file.value()));
  return CategorizeForExport(std::move(file.value()), options);
}

}  // namespace

TEST_CASE("raw timeline: the pipeline's timeline is its rows") {
  const std::string path = "/tmp/memtl_test_kineto.raw.json";
  {
    std::ofstream f(path);
    f << "[[-1, 1, 512, 0], [2000, 2, 64, 4], [3000, 3, -64, 4], [3000, 3, 64, 5], "
         "[4000, 4, -64, 5], [5000, 2, 8, 7]]";
  }
  auto c = RawExportable(path);
  // It has no stages: what reads them refuses it, naming the file.
  auto a = AnalyzeFile(path);
  auto p = RunPipeline(path);
  std::remove(path.c_str());
  REQUIRE(c.ok());
  const Exportable& cz = *c.value();
  CHECK(cz.view.trace.events.empty());
  // A bump that changes the category is a destroy and a create; the keys
  // are the categories (T4 ACTIVATION, T5 GRADIENT); 7 (unknown) has none.
  std::string got;
  for (const TimelineEvent& e : cz.timeline) {
    got += std::to_string(static_cast<int>(e.action)) + " " +
           (e.has_key() ? std::to_string(e.slot) : std::string("-")) + " " +
           std::to_string(e.bytes) + " " +
           std::to_string(CategoryIndexOf(cz.categories, e, e.version())) + "\n";
  }
  CHECK(got == "1 0 512 0\n2 4 64 4\n4 4 64 4\n2 5 64 5\n4 5 64 5\n2 - 8 7\n");
  const PeakReport peak = FindPeak(cz.timeline, cz.categories, cz.device);
  CHECK(peak.bytes == 576);
  for (const Status& s : {a.status(), p.status()}) {
    CHECK(s.message() == path +
                             ": a PyTorch raw memory timeline holds sizes by category only, no "
                             "op or tensor: memtl export, peak, summary, diff and ranks read it");
  }
}

TEST_CASE("raw timeline: --device names its device by the rule every trace's devices follow") {
  const std::string path = "/tmp/memtl_test_raw_device.raw.json";
  {
    std::ofstream f(path);
    f << "[[2000, 2, 64, 4], [3000, 3, -64, 4]]";
  }
  PipelineOptions options;
  options.device = "hip:1";
  auto ok = RawExportable(path, options);
  REQUIRE(ok.ok());
  CHECK(ok.value()->view.trace.devices[0].name == "hip:1");
  options.device = "not a device at all";
  auto bad = RawExportable(path, options);
  std::remove(path.c_str());
  REQUIRE(!bad.ok());
  CHECK(bad.status().message().find("\"not a device at all\" is not a device") !=
        std::string::npos);
}

// Issue #34: every sum and product a reader makes of the input's numbers
// is checked (core/model/checked.h); none wraps into a wrong value.
TEST_CASE("kineto: times and byte sums that would overflow are refused, never wrapped") {
  SUBCASE("baseTimeNanoseconds + ts + dur past 2^63-1 ns") {
    // Each below 2^62 as read; their sum is not.
    auto r =
        ReadKinetoString(Doc({Op("cpu_op", "aten::add", "4000000000000000", "2000000000000000"),
                              Mem("4000000000000001", 64, 10, 64)},
                             "4000000000000000000"),
                         "t.json");
    REQUIRE(!r.ok());
    CHECK(r.status().message() ==
          "t.json: \"baseTimeNanoseconds\" 4000000000000000000 plus an event's \"ts\" "
          "(4000000000000000000 ns) and \"dur\" (2000000000000000000 ns) is past 2^63-1 ns");
  }
  SUBCASE("a number of more digits than 64 bits hold is not a number") {
    // 2 * 10^19 wrapped to 1.55 * 10^18 in the digit loop, and was read so.
    auto r = ReadKinetoString(Doc({Mem("1", 64, 10, 64), Mem("20000000000000000000", 8, 20, 72)}),
                              "t.json");
    REQUIRE(r.ok());
    CHECK(r.value().trace.allocs.size() == 1);
    CHECK(r.value().diagnostics.entries().count("trace event without a numeric \"ts\" (skipped)") ==
          1);
  }
  // The document is built as one string of short events: many small
  // strings would leave the heap grown for the tests after this one.
  auto many = [](long n, long bytes, const char* last_total) {
    std::string s = "{\"traceEvents\": [";
    for (long i = 0; i < n; ++i) {
      s += i > 0 ? ",\n" : "\n";
      s += R"({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": )" + std::to_string(i + 1) +
           R"(, "args": {"Bytes": )" + std::to_string(bytes) + R"(, "Addr": )" +
           std::to_string(4096 * (i + 1)) +
           (i + 1 == n && last_total != nullptr
                ? std::string(R"(, "Total Allocated": )") + last_total
                : std::string()) +
           "}}";
    }
    return s + "\n]}\n";
  };
  const long big = (long{1} << 47) - 1;
  SUBCASE("frees of memory from before the profile that add up past 2^63-1 bytes") {
    auto r = ReadKinetoString(many(65537, -big, nullptr), "t.json");
    REQUIRE(!r.ok());
    CHECK(r.status().message() ==
          "t.json: the allocated bytes on cpu pass 2^63-1 at t=65537000 ns (the trace's \"Bytes\" "
          "add up past any memory)");
  }
  SUBCASE("allocations that add up past 2^63-1 bytes") {
    auto r = ReadKinetoString(many(65537, big, nullptr), "t.json");
    REQUIRE(!r.ok());
    CHECK(r.status().message().starts_with(
        "t.json: the allocated bytes on cpu pass 2^63-1 at t=65537000 ns"));
  }
  SUBCASE("a \"Total Allocated\" that differs from memtl's by more than 2^63-1 bytes") {
    // 2^15 + 1 allocations of 2^47 - 1 bytes pass 2^62; the trace's total
    // is below -(2^62 - 2): their difference is below -2^63.
    auto r = ReadKinetoString(many(32769, big, "-4611686018427387000"), "t.json");
    REQUIRE(!r.ok());
    CHECK(r.status().message().starts_with(
        "t.json: the allocated bytes on cpu pass 2^63-1 at t=32769000 ns"));
  }
}

TEST_CASE("raw timeline: microseconds past 2^63-1 ns are refused, not wrapped") {
  OpenedInput in = OpenInputFromMemory(
      "[[1000000000000000, 2, 64, 4], [50000000000000000, 4, -64, 4]]", "t.raw.json");
  REQUIRE(in.format == InputFormat::kRawTimeline);
  auto r = ReadRawTimelineInput(std::move(in));
  REQUIRE(!r.ok());
  CHECK(r.status().message() ==
        "t.raw.json: row 2: time 50000000000000000 in microseconds is past 2^63-1 nanoseconds "
        "(the year 2262)");
}

// One gzip policy for every format (core/read/common/line_source.cpp): a Kineto
// trace whose document ends before its gzip member does was accepted.
TEST_CASE("kineto: its gzip is checked to the end, as a memtl trace's") {
  const std::string doc = Doc({Mem("1", 64, 10, 64)});
  const std::string gz = memtl::test::Gzip(doc);
  REQUIRE(ReadKinetoString(gz, "t.json.gz").ok());
  auto no_trailer = ReadKinetoString(gz.substr(0, gz.size() - 8), "t.json.gz");
  REQUIRE(!no_trailer.ok());
  CHECK(no_trailer.status().message() ==
        "t.json.gz: truncated gzip stream (the file ends inside a gzip member)");
  auto after = ReadKinetoString(gz + "garbage", "t.json.gz");
  REQUIRE(!after.ok());
  CHECK(after.status().message() == "t.json.gz: unexpected bytes after the end of the gzip stream");
  // Concatenated members (cat a.gz b.gz) are one input, for every format.
  const std::string two = memtl::test::Gzip(doc.substr(0, 20)) + memtl::test::Gzip(doc.substr(20));
  CHECK(ReadKinetoString(two, "t.json.gz").ok());
}

TEST_CASE("format: a UTF-8 byte-order mark is skipped, UTF-16 and UTF-32 are named") {
  const std::string doc = Doc({Mem("1", 64, 10, 64)});
  auto bom = ReadKinetoString("\xef\xbb\xbf" + doc, "t.json");
  REQUIRE(bom.ok());
  CHECK(bom.value().trace.allocs.size() == 1);
  // The memtl trace reader and the raw timeline's get the text without it.
  auto trace =
      OpenMemoryInput("\xef\xbb\xbf{\"format\":\"memtl-trace\",\"version\":1}\n", "t.trace");
  REQUIRE(trace.ok());
  CHECK(trace.value().head == "{\"format\":\"memtl-trace\",\"version\":1}\n");
  auto raw = OpenMemoryInput(memtl::test::Gzip("\xef\xbb\xbf[[1, 2, 64, 4]]"), "t.raw.json.gz");
  REQUIRE(raw.ok());
  CHECK(raw.value().format == InputFormat::kRawTimeline);
  REQUIRE(ReadRawTimelineInput(std::move(raw.value())).ok());

  auto utf16 = [](const std::string& s, bool big_endian, bool bom16) {
    std::string out = bom16 ? (big_endian ? "\xfe\xff" : "\xff\xfe") : "";
    for (const char c : s) {
      out += big_endian ? std::string(1, '\0') + c : std::string(1, c) + '\0';
    }
    return out;
  };
  const std::string want = "t.json: is UTF-16 (or UTF-32); memtl reads UTF-8";
  for (const bool be : {false, true}) {
    for (const bool with_bom : {false, true}) {
      CAPTURE(be);
      CAPTURE(with_bom);
      auto r = ReadKinetoString(utf16(doc, be, with_bom), "t.json");
      REQUIRE(!r.ok());
      CHECK(r.status().message().starts_with(want));
      // Gzip is undone first: the encoding is the decoded text's.
      auto g = OpenMemoryInput(memtl::test::Gzip(utf16(doc, be, with_bom)), "t.json");
      REQUIRE(!g.ok());
      CHECK(g.status().message().starts_with(want));
    }
  }
  std::string utf32le;
  for (const char c : doc) utf32le += std::string(1, c) + std::string(3, '\0');
  auto r32 = OpenMemoryInput(utf32le, "t.json");
  REQUIRE(!r32.ok());
  CHECK(r32.status().message().starts_with(want));
  // A binary file is not called UTF-16 for its zero bytes.
  CHECK(OpenMemoryInput(std::string("\x01\0\x02\0", 4), "t.json").ok());
}

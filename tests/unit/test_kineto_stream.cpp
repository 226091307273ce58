// The Kineto stream (core/read/common/kineto_stream.h) reads bytes, not lines: a
// trace saved on one line, longer than the line limit, is cut into the same
// elements as the pretty-printed trace, across read blocks (strings with
// escapes and brackets included), and only an element longer than the
// limit is refused.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/read/common/format.h"
#include "core/read/common/kineto_stream.h"
#include "core/read/kineto/kineto_reader.h"

using namespace memtl;

namespace {

// An event whose name is full of escapes and brackets, so that read
// blocks end inside strings, after backslashes and between brackets.
std::string OpEvent(int i) {
  std::string name;
  for (int k = 0; k < 1 + i % 7; ++k) name += R"(\"]}\\[{\")";
  return R"({"ph": "X", "cat": "cpu_op", "name": "op)" + std::to_string(i) + name +
         R"(", "pid": 1, "tid": 1, "ts": )" + std::to_string(10 * i) +
         R"(, "dur": 5, "args": {"Record function id": )" + std::to_string(i) + "}}";
}

std::string Memory(int i) {
  return R"({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": )" +
         std::to_string(10 * i + 1) + R"(, "args": {"Total Allocated": )" +
         (i % 2 == 0 ? "64" : "0") + R"(, "Bytes": )" + (i % 2 == 0 ? "64" : "-64") +
         R"(, "Addr": 4096, "Device Type": 0, "Device Id": -1}})";
}

// The same events, on one line or over many.
std::string TraceText(int n, bool one_line, size_t padding = 0) {
  const char* nl = one_line ? "" : "\n  ";
  std::string s = R"({"schemaVersion": 1, "padding": ")" + std::string(padding, 'x') +
                  R"(", "deviceProperties": [{"name": "]\"["}], "traceEvents": [)";
  for (int i = 0; i < n; ++i) {
    s += i > 0 ? "," : "";
    s += nl + OpEvent(i) + "," + nl + Memory(i);
  }
  return s + nl + R"(], "baseTimeNanoseconds": 1000})" + (one_line ? "" : "\n");
}

// The elements of "traceEvents" as the stream cuts them.
std::vector<std::string> Elements(const std::string& text, size_t max_line) {
  OpenedInput in = OpenInputFromMemory(text, "t.json");
  REQUIRE(in.format == InputFormat::kKineto);
  in.src->set_max_line(max_line);
  read::KinetoStream stream(*in.src, std::move(in.head), nullptr);
  std::vector<std::string> out;
  for (;;) {
    const read::KinetoStream::Part part = stream.Next();
    if (part == read::KinetoStream::Part::kEnd) break;
    REQUIRE(part != read::KinetoStream::Part::kCut);
    if (part == read::KinetoStream::Part::kEvent) out.emplace_back(stream.value());
  }
  return out;
}

}  // namespace

TEST_CASE("kineto stream: a trace on one line longer than the line limit") {
  // About 2 MiB on one line, with a line limit of 4 KiB: elements cross the
  // 1 MiB read blocks and the 64 KiB decode steps.
  constexpr int kEvents = 6000;
  std::vector<std::string> expected;
  for (int i = 0; i < kEvents; ++i) {
    expected.push_back(OpEvent(i));
    expected.push_back(Memory(i));
  }
  // Paddings move the block boundaries over different bytes of the
  // elements (a backslash, a quote, a bracket).
  for (const size_t padding : {0, 1, 2, 3, 5, 8}) {
    CAPTURE(padding);
    const std::string one_line = TraceText(kEvents, true, padding);
    REQUIRE(one_line.size() > (size_t{2} << 20));
    REQUIRE(one_line.find('\n') == std::string::npos);
    CHECK(Elements(one_line, 4096) == expected);
  }
  CHECK(Elements(TraceText(kEvents, false), 4096) == expected);
}

TEST_CASE("kineto stream: the reader reads a one-line trace as the pretty-printed one") {
  auto read = [](const std::string& text) {
    OpenedInput in = OpenInputFromMemory(text, "t.json");
    in.src->set_max_line(4096);
    auto r = ReadKinetoInput(std::move(in));
    REQUIRE(r.ok());
    return std::move(r.value());
  };
  const KinetoRead a = read(TraceText(3000, true));
  const KinetoRead b = read(TraceText(3000, false));
  CHECK(a.trace.events.size() == b.trace.events.size());
  CHECK(a.trace.ops.size() == 3000);
  CHECK(a.trace.allocs.size() == b.trace.allocs.size());
  CHECK(a.trace.alloc_ptrs == b.trace.alloc_ptrs);
  for (size_t e = 0; e < a.trace.events.size(); ++e) {
    CHECK(a.trace.event_t0[e] == b.trace.event_t0[e]);
    CHECK(a.trace.Name(a.trace.events[e]) == b.trace.Name(b.trace.events[e]));
  }
  CHECK(a.info.lines == 1);
  CHECK(a.diagnostics.empty());
}

TEST_CASE("kineto stream: an element longer than the limit is an error naming it") {
  const std::string text =
      R"({"traceEvents": [)" + Memory(0) + R"(, {"name": ")" + std::string(10000, 'a') + R"("}]})";
  OpenedInput in = OpenInputFromMemory(text, "t.json");
  in.src->set_max_line(4096);
  auto r = ReadKinetoInput(std::move(in));
  REQUIRE(!r.ok());
  CHECK(r.status().message() ==
        "t.json: line 1: element 2 of \"traceEvents\" is longer than 4096 bytes (memtl holds one "
        "element at a time)");
  // The limit is the line reader's: 64 MiB.
  CHECK(Elements(text, kMaxLineBytes).size() == 2);
}

// The reader's parse workers (core/read/memtl/parse_pool.h): whatever the number
// of workers and the size of the blocks, the trace, the error and its line
// are those of reading every line in order on one thread.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/read/memtl/trace_reader.h"
#include "tests/unit/gzip_text.h"
#include "trace_text.h"

using namespace memtl;
using namespace memtl::test;
namespace fs = std::filesystem;

namespace {

std::string Inflate(const fs::path& path) { return test::GunzipFile(path.string()); }

template <typename T, typename F>
void SameBy(const std::vector<T>& a, const std::vector<T>& b, F key, const char* what) {
  INFO(std::string(what));
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (key(a[i]) != key(b[i])) {
      INFO("at " << i);
      CHECK(key(a[i]) == key(b[i]));
      return;
    }
  }
}

template <typename T>
void Same(const std::vector<T>& a, const std::vector<T>& b, const char* what) {
  SameBy(
      a, b, [](const T& v) { return v; }, what);
}

// Every member of the Trace the reader fills.
void ExpectSameTrace(const Trace& a, const Trace& b) {
  CHECK(a.header.has_ids == b.header.has_ids);
  CHECK(a.header.producer == b.header.producer);
  REQUIRE(a.strings.size() == b.strings.size());
  for (uint32_t i = 0; i < a.strings.size(); ++i) REQUIRE(a.strings.Get(i) == b.strings.Get(i));
  REQUIRE(a.devices.size() == b.devices.size());
  for (size_t i = 0; i < a.devices.size(); ++i) {
    const DeviceInfo &x = a.devices[i], &y = b.devices[i];
    CHECK(x.name == y.name);
    CHECK(x.rank == y.rank);
    CHECK(x.max_total_allocated == y.max_total_allocated);
    CHECK(x.max_total_reserved == y.max_total_reserved);
  }
  SameBy(
      a.events, b.events,
      [](const Event& e) {
        return std::tuple(e.parent, uint32_t{e.payload}, static_cast<int>(e.kind));
      },
      "events");
  REQUIRE(a.event_t0.size() == b.event_t0.size());
  for (uint32_t i = 0; i < a.event_t0.size(); ++i) REQUIRE(a.event_t0[i] == b.event_t0[i]);
  SameBy(
      a.ops, b.ops,
      [](const OpInfo& o) {
        return std::tuple(o.args_begin, o.refs_begin, uint32_t{o.name}, static_cast<int>(o.scope));
      },
      "ops");
  SameBy(
      a.allocs, b.allocs,
      [](const AllocInfo& x) { return std::pair(int64_t{x.bytes}, DeviceIndex{x.device}); },
      "allocs");
  Same(a.alloc_ptrs, b.alloc_ptrs, "alloc_ptrs");
  Same(a.py_names, b.py_names, "py_names");
  Same(a.py_linked, b.py_linked, "py_linked");
  SameBy(
      a.py_links, b.py_links,
      [](const PyLink& l) { return std::tuple(l.py, uint32_t{l.index}, uint32_t{l.is_optimizer}); },
      "py_links");
  Same(a.other_names, b.other_names, "other_names");
  SameBy(
      a.modules, b.modules,
      [](const ModuleInfo& m) {
        return std::tuple(m.has_self, m.self, m.cls, m.params_begin, m.params_count);
      },
      "modules");
  SameBy(
      a.optimizers, b.optimizers,
      [](const OptimizerInfo& o) {
        return std::tuple(o.has_self, o.self, o.params_begin, o.params_count, o.state_begin,
                          o.state_count);
      },
      "optimizers");
  SameBy(
      a.params, b.params,
      [](const ParamInfo& p) {
        return std::tuple(p.name, p.tensor, p.grad, p.state_begin, p.state_count);
      },
      "params");
  SameBy(
      a.states, b.states, [](const StateEntry& s) { return std::pair(s.name, s.tensor); },
      "states");
  Same(a.arg_kinds, b.arg_kinds, "arg_kinds");
  Same(a.arg_refs, b.arg_refs, "arg_refs");
  Same(a.list_items, b.list_items, "list_items");
  SameBy(
      a.tensors, b.tensors,
      [](const Tensor& t) {
        return std::tuple(t.impl, t.bytes(), uint32_t{t.partial}, uint32_t{t.device});
      },
      "tensors");
  Same(a.tensor_ptrs, b.tensor_ptrs, "tensor_ptrs");
  CHECK(a.num_impls == b.num_impls);
  SameBy(
      a.tensor_ids, b.tensor_ids,
      [](const ProducerIds& p) { return std::pair(p.id.value(), p.allocation.value()); },
      "tensor_ids");
  SameBy(
      a.alloc_ids, b.alloc_ids,
      [](const ProducerIds& p) { return std::pair(p.id.value(), p.allocation.value()); },
      "alloc_ids");
  Same(a.tensor_shapes, b.tensor_shapes, "tensor_shapes");
  CHECK(a.ops_without_end == b.ops_without_end);
  CHECK(a.ops_ending_before_start == b.ops_ending_before_start);
  CHECK(a.events_before_parent == b.events_before_parent);
  REQUIRE(a.schemas.size() == b.schemas.size());
  for (size_t i = 0; i < a.schemas.size(); ++i) CHECK(a.schemas[i] == b.schemas[i]);
}

// Reads `text` in order on one thread and on `workers` parse workers with
// blocks of about `block` bytes; both must give the same trace or error.
void ExpectSameRead(const std::string& text, size_t workers, size_t block, bool partial = false) {
  ReadOptions serial;
  serial.partial = partial;
  ReadOptions parallel = serial;
  parallel.parse_threads = workers;
  parallel.block_bytes = block;
  ReadInfo si, pi;
  auto a = ReadTraceString(text, "t.trace", serial, &si);
  auto b = ReadTraceString(text, "t.trace", parallel, &pi);
  INFO("workers " << workers << ", blocks of " << block);
  REQUIRE(a.ok() == b.ok());
  if (!a.ok()) {
    CHECK(a.status().message() == b.status().message());
    return;
  }
  CHECK(si.lines == pi.lines);
  CHECK(si.stopped_early == pi.stopped_early);
  CHECK(si.stopped_at_line == pi.stopped_at_line);
  CHECK(si.python_tensors_resolved == pi.python_tensors_resolved);
  CHECK(si.python_tensors_dropped == pi.python_tensors_dropped);
  ExpectSameTrace(a.value(), b.value());
}

std::vector<fs::path> Fixtures() {
  std::vector<fs::path> out;
  const fs::path root = fs::path(MEMTL_SOURCE_DIR) / "fixtures";
  for (const char* dir : {"", "torch2", "cuda"}) {
    if (!fs::is_directory(root / dir)) continue;
    for (const auto& e : fs::directory_iterator(root / dir)) {
      const std::string name = e.path().filename().string();
      if (name.size() > 15 && name.ends_with(".trace.jsonl.gz")) out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The lines of `text`, each with its '\n'.
std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t nl = std::min(text.find('\n', pos), text.size() - 1);
    lines.push_back(text.substr(pos, nl + 1 - pos));
    pos = nl + 1;
  }
  return lines;
}

std::string Join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l;
  return out;
}

// `line` with the first occurrence of `from` replaced by `to` (unchanged
// when there is none).
std::string Replace(std::string line, const std::string& from, const std::string& to) {
  const size_t at = line.find(from);
  if (at != std::string::npos) line.replace(at, from.size(), to);
  return line;
}

}  // namespace

TEST_CASE("parallel read: every fixture reads as in order, for any workers and blocks") {
  const auto fixtures = Fixtures();
  REQUIRE(fixtures.size() > 10);
  for (const auto& path : fixtures) {
    INFO(path.string());
    const std::string text = Inflate(path);
    ExpectSameRead(text, 2, 0);
    ExpectSameRead(text, 1, 3000);
    ExpectSameRead(text, 3, 20000);
  }
}

TEST_CASE("parallel read: the first error in the file wins, at its line") {
  const fs::path source = fs::path(MEMTL_SOURCE_DIR) / "fixtures/resnet18_sgd_step.trace.jsonl.gz";
  const std::vector<std::string> lines = Lines(Inflate(source));
  REQUIRE(lines.size() > 2000);
  // Each mutation of one line, at lines that fall in later blocks.
  const std::vector<std::pair<std::string, std::string>> edits = {
      {"{", "["},                                 // a syntax error
      {"\"k\":\"", "\"k\":\"x"},                  // an unknown kind
      {"\"i\":", "\"i\":1"},                      // an index out of order
      {"\"p\":", "\"p\":9"},                      // a parent that does not precede
      {"\"dev\":\"cpu\"", "\"dev\":\"gpu\""},     // an invalid device
      {"\"dev\":\"cpu\"", "\"dev\":\"cuda:1\""},  // a device first named late
      {"\"impl\":", "\"impl\":1,\"impl\":"},      // a repeated impl
      {"\"name\":\"", "\"name\":\"new "},         // a name first seen late
      {"\"t0\":", "\"t0\":-"},                    // a child before its parent
      {"\"bytes\":", "\"bytes\":1e99,\"x\":"},    // not an integer
  };
  for (const size_t at : {size_t{1}, size_t{700}, size_t{1501}, lines.size() - 2}) {
    for (const auto& edit : edits) {
      const std::string& from = edit.first;
      const std::string& to = edit.second;
      std::vector<std::string> edited = lines;
      edited[at] = Replace(edited[at], from, to);
      // A second error later: the first must win.
      edited[at + 1] = Replace(edited[at + 1], "{", "[");
      INFO("line " << at + 1 << ": " << from << " -> " << to);
      ExpectSameRead(Join(edited), 2, 4000);
    }
  }
  // A schema registered twice, far apart.
  std::vector<std::string> twice = lines;
  const std::string schema =
      R"({"k":"schema","op":"my::op","schemas":["my::op(Tensor a) -> Tensor"]})"
      "\n";
  twice.insert(twice.begin() + 300, schema);
  ExpectSameRead(Join(twice), 2, 4000);
  twice.insert(twice.begin() + 1800, schema);
  ExpectSameRead(Join(twice), 2, 4000);
}

TEST_CASE("parallel read: truncated input, with and without --partial") {
  const fs::path source = fs::path(MEMTL_SOURCE_DIR) / "fixtures/resnet18_sgd_step.trace.jsonl.gz";
  const std::string text = Inflate(source);
  for (const size_t cut : {text.size() / 2, text.size() - 7, text.size() - 1}) {
    for (const bool partial : {false, true}) {
      INFO("cut at " << cut << (partial ? ", partial" : ""));
      ExpectSameRead(text.substr(0, cut), 2, 5000, partial);
    }
  }
  ExpectSameRead(Header(), 2, 100);
  ExpectSameRead(Header() + Alloc(0, -1, 1, 16, 4), 2, 10);
}

TEST_CASE("parallel read: names with escapes, first seen in later blocks") {
  // Escaped names are unescaped into a scratch buffer the next one reuses:
  // each must keep its own text, and equal names one id.
  std::string text = Header();
  const char* names[] = {R"(a\u0041)", "aA", R"(x\"y)", R"(\u00e9t\u00e9)", "plain"};
  for (int i = 0; i < 400; ++i) {
    const std::string name = names[(i * 7 + i / 50) % 5];
    text += Op(i, -1, name + std::to_string(i % 13), 10 * i, 10 * i + 5, T(i % 17 + 1, 64 * i));
  }
  for (const size_t block : {size_t{100}, size_t{700}, size_t{5000}})
    ExpectSameRead(text, 3, block);
  ReadOptions options;
  options.parse_threads = 2;
  options.block_bytes = 300;
  auto r = ReadTraceString(text, "t.trace", options);
  REQUIRE(r.ok());
  CHECK(r.value().strings.Contains("aA0"));
  CHECK(r.value().strings.Contains("x\"y1"));
}

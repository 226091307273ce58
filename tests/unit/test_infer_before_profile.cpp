// The memory a Kineto trace holds from before the profile, split by what
// the trace says of it (core/read/kineto/kineto_pre_profile.h) and
// categorized by rule 1 of core/infer/infer.cpp: the leaves a backward
// pass accumulates into, the optimizer state kept for them, the rest.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "core/pipeline/analysis.h"
#include "core/read/kineto/kineto_reader.h"

using namespace memtl;

namespace {

std::string Ev(const std::string& cat, const std::string& name, const char* ts, const char* dur,
               const std::string& args = "") {
  return "{\"ph\": \"X\", \"cat\": \"" + cat + "\", \"name\": \"" + name +
         "\", \"pid\": 7, \"tid\": 1, \"ts\": " + ts + ", \"dur\": " + dur +
         (args.empty() ? "" : ", \"args\": " + args) + "}";
}

// A memory event on cuda:0 with the allocator's total after it.
std::string Mem(const char* ts, long bytes, long addr, long total) {
  return std::string(
             "{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"name\": \"[memory]\", \"pid\": 7, "
             "\"tid\": 1, \"ts\": ") +
         ts + ", \"args\": {\"Bytes\": " + std::to_string(bytes) +
         ", \"Total Allocated\": " + std::to_string(total) +
         ", \"Device Id\": 0, \"Device Type\": 1, \"Addr\": " + std::to_string(addr) + "}}";
}

// The AccumulateGrad of a float leaf of `dims`, under its evaluate_function.
std::vector<std::string> Accumulate(const char* ts, const char* inner, const std::string& dims) {
  return {
      Ev("cpu_op", "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", ts, "3"),
      Ev("cpu_op", "torch::autograd::AccumulateGrad", inner, "1",
         "{\"Input Dims\": [" + dims + "], \"Input type\": [\"float\"]}")};
}

std::string Doc(const std::vector<std::string>& events) {
  std::string s = "{\n  \"schemaVersion\": 1,\n  \"traceEvents\": [\n";
  for (size_t i = 0; i < events.size(); ++i) s += (i ? ",\n  " : "  ") + events[i];
  return s + "\n  ],\n  \"baseTimeNanoseconds\": 1000000\n}\n";
}

// One warm step on a GPU holding 100,000 bytes from before the profile:
// a backward pass over two leaves (400 and 40 bytes: 440), with a
// gradient made in it, then an optimizer step of class `cls` whose ops
// are `step_ops`.
std::vector<std::string> WarmStep(const std::string& cls,
                                  const std::vector<std::string>& step_ops) {
  std::vector<std::string> ev = {
      Ev("cpu_op", "autograd::engine::evaluate_function: MmBackward0", "10", "10"),
      Ev("cpu_op", "MmBackward0", "11", "8"), Mem("12", 512, 0x100, 100512),
      Mem("18", -512, 0x100, 100000)};
  for (const auto& e : Accumulate("20", "21", "[10, 10]")) ev.push_back(e);
  for (const auto& e : Accumulate("30", "31", "[10]")) ev.push_back(e);
  ev.push_back(Ev("user_annotation", "Optimizer.step#" + cls + ".step", "40", "20"));
  int ts = 41;
  for (const std::string& op : step_ops) {
    ev.push_back(Ev("cpu_op", op, std::to_string(ts).c_str(), "1"));
    ts += 2;
  }
  return ev;
}

// Per allocation of memory from before the profile: its bytes and rule.
std::map<int64_t, InferRule> BeforeProfile(const std::vector<std::string>& events) {
  auto k = ReadKinetoString(Doc(events), "step.json");
  REQUIRE(k.ok());
  auto a = Analyze(std::move(k.value().trace), "step.json", false, true);
  REQUIRE(a.ok());
  auto c = Categorize(std::move(a.value()));
  REQUIRE(c.ok());
  std::map<int64_t, InferRule> out;
  const Analysis& an = *c.value()->analysis;
  for (uint32_t i = 0; i < an.trace.allocs.size(); ++i)
    if (FromBeforeProfile(an.inferred.rule[i])) out[an.trace.allocs[i].bytes] = an.inferred.rule[i];
  return out;
}

}  // namespace

TEST_CASE("infer before the profile: the leaves and Adam's two tensors per leaf") {
  const auto r = BeforeProfile(WarmStep("Adam", {"aten::_foreach_lerp_", "aten::_foreach_mul_"}));
  CHECK(r == std::map<int64_t, InferRule>{{440, InferRule::kLeavesBefore},
                                          {880, InferRule::kStateBefore},
                                          {100000 - 1320, InferRule::kBeforeProfile}});
}

TEST_CASE("infer before the profile: what the step's ops say of its state") {
  // amsgrad keeps a third tensor per leaf (its maximum).
  CHECK(BeforeProfile(WarmStep("AdamW", {"aten::_foreach_maximum_"})).count(1320) == 1);
  // SGD keeps a momentum buffer only where a step scales one.
  const auto momentum = BeforeProfile(WarmStep("SGD", {"aten::mul_", "aten::add_"}));
  CHECK(momentum.size() == 2);  // leaves and state, 440 each (one key), and the rest
  CHECK(momentum.count(100000 - 880) == 1);
  const auto plain = BeforeProfile(WarmStep("SGD", {"aten::add_"}));
  CHECK(plain.size() == 2);
  CHECK(plain.at(440) == InferRule::kLeavesBefore);
  // A class whose state this cannot tell: the leaves only.
  CHECK(BeforeProfile(WarmStep("LBFGS", {"aten::add_"})).size() == 2);
}

TEST_CASE("infer before the profile: one backward pass's leaves, at most the memory there is") {
  // A second pass after the step counts the same leaves again: the larger
  // pass, not the sum.
  std::vector<std::string> ev = WarmStep("SGD", {"aten::add_"});
  for (const auto& e : Accumulate("70", "71", "[10, 10]")) ev.push_back(e);
  CHECK(BeforeProfile(ev).count(440) == 1);
  // Leaves larger than the memory from before the profile take all of it.
  std::vector<std::string> big = WarmStep("SGD", {"aten::add_"});
  for (const auto& e : Accumulate("33", "34", "[1000, 1000]")) big.push_back(e);
  const auto r = BeforeProfile(big);
  CHECK(r == std::map<int64_t, InferRule>{{100000, InferRule::kLeavesBefore}});
}

TEST_CASE("infer before the profile: what the profile makes itself is not counted again") {
  // Parameters built under the profile: the leaves are those, and the
  // memory from before the profile stays unknown.
  std::vector<std::string> ev = {
      Ev("python_function", "torch/nn/modules/linear.py(99): __init__", "1", "5"),
      Ev("cpu_op", "aten::empty", "2", "1"), Mem("2.5", 440, 0x10, 100440)};
  for (const auto& e : WarmStep("Adam", {"aten::_foreach_lerp_"})) {
    ev.push_back(e);
  }
  // The totals after the first allocation are 440 higher.
  for (std::string& e : ev) {
    for (const auto& [from, to] :
         {std::pair<std::string, std::string>{"100512", "100952"},
          {"\"Total Allocated\": 100000", "\"Total Allocated\": 100440"}}) {
      if (const size_t at = e.find(from); at != std::string::npos) e.replace(at, from.size(), to);
    }
  }
  const auto r = BeforeProfile(ev);
  CHECK(r.at(440) == InferRule::kBeforeProfile);
  CHECK(r.at(880) == InferRule::kStateBefore);
  // A first step makes the state: the state from before the profile is not.
  std::vector<std::string> cold = WarmStep("Adam", {"aten::_foreach_lerp_"});
  cold.push_back(Ev("cpu_op", "aten::zeros_like", "55", "1"));
  cold.push_back(Mem("55.5", 880, 0x900, 100880));
  const auto c = BeforeProfile(cold);
  CHECK(c.at(880) == InferRule::kBeforeProfile);
  CHECK(c.at(440) == InferRule::kLeavesBefore);
}

TEST_CASE("infer before the profile: an execution-trace join keeps it whole") {
  ReadOptions options;
  options.et_path = "et.json";
  auto k = ReadKinetoString(Doc(WarmStep("Adam", {"aten::_foreach_lerp_"})), "step.json", options);
  REQUIRE(k.ok());
  int blocks = 0;
  for (const uint64_t ptr : k.value().trace.alloc_ptrs)
    blocks += PreProfilePartOf(ptr, k.value().trace.devices.size()).has_value();
  CHECK(blocks == 1);
}

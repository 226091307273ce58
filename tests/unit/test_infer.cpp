// The inference rules (core/infer/infer.cpp) on a small Kineto trace of one
// training step built here, an allocation per rule (each of its own size,
// so that a check names it), and what the outputs make of them.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "core/explain/explain.h"
#include "core/explain/peak.h"
#include "core/explain/summary.h"
#include "core/explain/tables.h"
#include "core/pipeline/analysis.h"
#include "core/read/kineto/kineto_reader.h"

using namespace memtl;

namespace {

std::string Ev(const char* cat, const char* name, const char* ts, const char* dur) {
  return std::string("{\"ph\": \"X\", \"cat\": \"") + cat + "\", \"name\": \"" + name +
         "\", \"pid\": 7, \"tid\": 1, \"ts\": " + ts + ", \"dur\": " + dur + "}";
}

// A memory event; `reserved` > 0 adds "Total Reserved" (a CUDA trace's).
std::string Mem(const char* ts, long bytes, long addr, long reserved = 0) {
  return std::string(
             "{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"name\": \"[memory]\", \"pid\": 7, "
             "\"tid\": 1, \"ts\": ") +
         ts + ", \"args\": {\"Bytes\": " + std::to_string(bytes) +
         (reserved > 0 ? ", \"Total Reserved\": " + std::to_string(reserved) : "") +
         ", \"Device Id\": -1, \"Device Type\": 0, \"Addr\": " + std::to_string(addr) + "}}";
}

std::string Doc(const std::vector<std::string>& events) {
  std::string s = "{\n  \"schemaVersion\": 1,\n  \"traceEvents\": [\n";
  for (size_t i = 0; i < events.size(); ++i) s += (i ? ",\n  " : "  ") + events[i];
  return s + "\n  ],\n  \"baseTimeNanoseconds\": 1000000\n}\n";
}

// One step with every rule's case; sizes name the cases.
std::vector<std::string> StepEvents() {
  return {// The batch, before the forward, alive at its start: INPUT.
          Ev("cpu_op", "aten::ones", "1", "2"), Mem("1.5", 16, 0x300),
          // A tensor made before the forward and freed before it starts: unknown.
          Ev("cpu_op", "aten::empty", "4", "1"), Mem("4.5", 24, 0x310), Mem("6", -24, 0x310),
          // The forward: a module's output (freed in backward) and a temporary.
          Ev("python_function", "nn.Module: Linear_0", "10", "20"),
          Ev("cpu_op", "aten::linear", "11", "10"), Mem("12", 1000, 0x100), Mem("13", 32, 0x200),
          Mem("14", -32, 0x200),
          // A module output freed in the forward: still an activation.
          Ev("cpu_op", "aten::relu", "22", "5"), Mem("23", 1100, 0x110), Mem("29", -1100, 0x110),
          // The loss, between the forward and the backward.
          Ev("cpu_op", "aten::mse_loss", "40", "5"), Mem("41", 40, 0x400),
          // The backward: a gradient (kept), an autograd detail (freed within the
          // backward pass, in the evaluate_function wrapper), the forward's output
          // and the loss freed.
          Ev("cpu_op", "autograd::engine::evaluate_function: MmBackward0", "50", "20"),
          Ev("cpu_op", "MmBackward0", "51", "18"), Ev("cpu_op", "aten::mm", "52", "5"),
          Mem("53", 2000, 0x500), Mem("54", 3000, 0x600), Mem("60", -1000, 0x100),
          Mem("69.5", -3000, 0x600), Mem("71", -40, 0x400),
          // The optimizer step: its state (kept) and a value made and freed in it.
          Ev("user_annotation", "Optimizer.step#SGD.step", "80", "10"),
          Ev("cpu_op", "aten::clone", "81", "2"), Mem("82", 4000, 0x700),
          Ev("cpu_op", "aten::add", "84", "2"), Mem("85", 5000, 0x800), Mem("88", -5000, 0x800),
          // zero_grad frees the gradient and one from before the profile.
          Ev("user_annotation", "Optimizer.zero_grad#SGD.zero_grad", "95", "3"),
          Mem("96", -2000, 0x500), Mem("97", -6000, 0x900)};
}

struct Inferred {
  std::unique_ptr<Categorized> c;
  std::map<int64_t, InferRule> rule;  // by the allocation's size
  std::map<int64_t, uint32_t> record;
};

Inferred Run(const std::vector<std::string>& events, PipelineOptions options = {}) {
  auto k = ReadKinetoString(Doc(events), "step.json");
  REQUIRE(k.ok());
  auto a = Analyze(std::move(k.value().trace), "step.json", false, true);
  REQUIRE(a.ok());
  auto c = Categorize(std::move(a.value()), options);
  REQUIRE(c.ok());
  Inferred r;
  const Analysis& an = *c.value()->analysis;
  for (uint32_t i = 0; i < an.trace.allocs.size(); ++i) {
    const int64_t b = an.trace.allocs[i].bytes;
    if (an.inferred.pair[i] != kNone32) continue;
    r.rule[b > 0 ? b : -b] = an.inferred.rule[i];
    r.record[b > 0 ? b : -b] = i;
  }
  r.c = std::move(c.value());
  return r;
}

}  // namespace

TEST_CASE("infer: each rule on one training step") {
  const Inferred r = Run(StepEvents());
  CHECK(r.rule.at(16) == InferRule::kInput);
  CHECK(r.rule.at(24) == InferRule::kNone);  // gone before the forward
  CHECK(r.rule.at(32) == InferRule::kTemporary);
  CHECK(r.rule.at(1000) == InferRule::kActivationSaved);
  CHECK(r.rule.at(1100) == InferRule::kActivationModule);
  CHECK(r.rule.at(40) == InferRule::kActivationSaved);  // the loss, freed by backward
  CHECK(r.rule.at(2000) == InferRule::kGradient);
  CHECK(r.rule.at(3000) == InferRule::kAutogradDetail);
  CHECK(r.rule.at(4000) == InferRule::kOptimizerState);
  CHECK(r.rule.at(5000) == InferRule::kNone);  // made and freed in the step
  CHECK(r.rule.at(6000) == InferRule::kGradientFreed);
  // A free carries its allocation's category.
  const InferredCategories& inf = r.c->analysis->inferred;
  for (uint32_t i = 0; i < inf.pair.size(); ++i) {
    if (inf.pair[i] != kNone32) CHECK(inf.category[i] == inf.category[inf.pair[i]]);
  }
  CHECK(r.c->inferred);
}

TEST_CASE("infer: the loss, kept past the backward") {
  // Without the free in backward, the loss is placed by the scopes around
  // it: after the forward's module, before the backward.
  std::vector<std::string> events = StepEvents();
  std::erase(events, Mem("71", -40, 0x400));
  const Inferred r = Run(events);
  CHECK(r.rule.at(40) == InferRule::kActivationLoss);
}

TEST_CASE("infer: parameters made by module construction, and memory from before the profile") {
  const Inferred r =
      Run({Ev("python_function", "torch/nn/modules/linear.py(99): __init__", "1", "5"),
           Ev("cpu_op", "aten::empty", "2", "1"), Mem("2.5", 512, 0x10),  // kept: PARAMETER
           Ev("cpu_op", "aten::empty", "4", "1"), Mem("4.5", 8, 0x20),    // freed in its op
           Mem("4.8", -8, 0x20), Ev("cpu_op", "aten::empty", "5.1", "0.5"),
           Mem("5.2", 128, 0x30),  // freed after it
           Mem("5.9", -128, 0x30)});
  CHECK(r.rule.at(512) == InferRule::kParameter);
  CHECK(r.rule.at(8) == InferRule::kTemporary);
  CHECK(r.rule.at(128) == InferRule::kNone);  // a parameter is never freed
  // Without with_stack nothing places an allocation outside every scope.
  const Inferred plain = Run({Ev("cpu_op", "aten::ones", "1", "2"), Mem("1.5", 16, 0x300),
                              Ev("cpu_op", "aten::relu", "4", "2"), Mem("4.5", 32, 0x310)});
  CHECK(plain.rule.at(16) == InferRule::kNone);
  CHECK(plain.rule.at(32) == InferRule::kNone);
}

TEST_CASE("infer: the timeline and the outputs say inferred") {
  PipelineOptions options;
  options.explain_peak = 5;
  options.report = true;
  const Inferred r = Run(StepEvents(), options);
  const Categorized& c = *r.c;
  // The export counts each allocation in its inferred category.
  const CoalescedTimeline rows = Coalesce(c.timeline, c.categories, c.device);
  int64_t most_state = 0, most_grad = 0;
  for (const auto& s : rows.sizes) {
    most_state = std::max(most_state, s[ExportIndex(Category::kOptimizerState) + 1]);
    most_grad = std::max(most_grad, s[ExportIndex(Category::kGradient) + 1]);
  }
  CHECK(most_state == 4000);
  CHECK(most_grad == 8000);  // with the one from before the profile that zero_grad frees
  CHECK(rows.sizes.back()[ExportIndex(Category::kGradient) + 1] == 0);  // zero_grad freed it
  const std::string text =
      FormatTimeline(c.analysis->trace, c.analysis->keys, c.timeline, c.categories);
  CHECK(text.find("OPTIMIZER_STATE (inferred)") != std::string::npos);
  REQUIRE(c.peak.has_value());
  CHECK(c.peak->inferred);
  const std::string peak = FormatPeak(*c.peak);
  CHECK(peak.find("categories are inferred") != std::string::npos);
  CHECK(peak.find("GRADIENT (inferred)") != std::string::npos);
  CHECK(peak.find("A" + std::to_string(r.record.at(4000))) != std::string::npos);
  REQUIRE(c.report.has_value());
  CHECK(c.report->inferred);
  const Analysis& a = *c.analysis;
  const ExplainInput in{a.trace,    a.keys,   *a.tree, *a.graph,   c.categories,
                        c.timeline, c.device, nullptr, &a.inferred};
  auto why = ExplainAllocation(in, r.record.at(2000), false);
  REQUIRE(why.ok());
  CHECK(why.value().find("GRADIENT (inferred)") != std::string::npos);
  CHECK(why.value().find(std::string(InferRuleText(InferRule::kGradient))) != std::string::npos);
  CHECK(why.value().find("Optimizer.zero_grad#SGD.zero_grad") != std::string::npos);
  CHECK(!ExplainAllocation(in, 999, false).ok());
  const Summary s = Summarize(in, "step.json", 3);
  CHECK(s.inferred);
  CHECK(FormatSummary(s).find("ACTIVATION (inferred)") != std::string::npos);
}

TEST_CASE("infer: the reserved total is kept where it changes, per device that reports it") {
  auto k = ReadKinetoString(
      Doc({Ev("cpu_op", "aten::empty", "1", "9"), Mem("2", 64, 0x10, 1024),
           Mem("3", 64, 0x20, 1024), Mem("4", 4096, 0x30, 8192), Mem("5", -4096, 0x30, 8192)}),
      "r.json");
  REQUIRE(k.ok());
  const std::vector<ReservedPoint>& r = k.value().reserved;
  REQUIRE(r.size() == 2);
  CHECK(r[0].bytes == 1024);
  CHECK(r[1].bytes == 8192);
  CHECK(r[1].time_ns - r[0].time_ns == 2000);
  // The CPU allocator's zeros are no line.
  auto zeros = ReadKinetoString(Doc({Mem("2", 64, 0x10)}), "z.json");
  REQUIRE(zeros.ok());
  CHECK(zeros.value().reserved.empty());
}

TEST_CASE("infer: the memory tables put the allocations alive at the peak where they were made") {
  PipelineOptions options;
  const Inferred r = Run(StepEvents(), options);
  const Categorized& c = *r.c;
  const Analysis& a = *c.analysis;
  const ExplainInput in{a.trace,    a.keys,   *a.tree, *a.graph,   c.categories,
                        c.timeline, c.device, nullptr, &a.inferred};
  const MemoryTables t = ComputeTables(in)[c.device];
  const PeakReport peak = FindPeak(c.timeline, c.categories, c.device);
  REQUIRE(peak.any);
  // Every byte alive at the peak has a row, none of them "(no tensor identity)".
  CHECK(t.device.at_peak == peak.bytes);
  int64_t by_op = 0;
  for (const MemoryRow& row : t.by_op) {
    CHECK(row.name != kNoIdentity);
    by_op += row.self.at_peak;
  }
  CHECK(by_op == peak.bytes);
  // The allocations alive then are those AllocationsAliveAt lists, each
  // under the op that made it.
  int64_t alive = 0;
  for (const uint32_t rec : AllocationsAliveAt(a.trace, a.inferred, c.device, peak.time_us)) {
    const int64_t b = a.trace.allocs[rec].bytes;
    alive += b > 0 ? b : -b;
  }
  CHECK(alive == peak.bytes);
  auto row_of = [&](std::string_view name) -> const MemoryRow* {
    for (const MemoryRow& row : t.by_op)
      if (row.name == name) return &row;
    return nullptr;
  };
  // The step's peak is in the optimizer step: its state (4000 bytes, made
  // in aten::clone) is alive, with the gradient made in the backward.
  const MemoryRow* clone = row_of("aten::clone");
  REQUIRE(clone != nullptr);
  CHECK(clone->self.at_peak == 4000);
  // Memory from before the profile that zero_grad frees later.
  const MemoryRow* before = row_of(kBeforeProfile);
  REQUIRE(before != nullptr);
  CHECK(before->self.at_peak == 6000);
}

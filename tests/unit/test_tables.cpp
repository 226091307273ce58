// The memory tables by op and by module (core/explain/tables.h) and the
// rest of the HTML report's data (core/explain/report.h): checked against
// the timeline on every fixture, and by reasoning on the resnet18 step and
// on a small two-device trace with steps.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/explain/report.h"
#include "core/explain/summary.h"
#include "core/explain/tables.h"
#include "core/pipeline/analysis.h"
#include "core/read/memtl/trace_reader.h"
#include "export/export.h"
#include "tests/unit/trace_text.h"

using namespace memtl;
namespace fs = std::filesystem;

namespace {

std::vector<fs::path> AllFixtures() {
  std::vector<fs::path> out;
  const fs::path root = fs::path(MEMTL_SOURCE_DIR) / "fixtures";
  for (const fs::path& dir : {root, root / "torch2"}) {
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().filename().string().find(".trace.jsonl") != std::string::npos)
        out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::unique_ptr<Categorized> Run(const fs::path& path) {
  auto r = RunPipeline(path.string());
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.status().message()));
  return std::move(r.value());
}

ExplainInput InputOf(const Categorized& c) {
  const Analysis& a = *c.analysis;
  return ExplainInput{a.trace, a.keys, *a.tree, *a.graph, c.categories, c.timeline, c.device};
}

const MemoryRow& Row(const std::vector<MemoryRow>& rows, std::string_view name) {
  const auto it =
      std::find_if(rows.begin(), rows.end(), [&](const MemoryRow& r) { return r.name == name; });
  REQUIRE_MESSAGE(it != rows.end(), "no row " << name);
  return *it;
}

MemoryUse SelfSum(const std::vector<MemoryRow>& rows) {
  MemoryUse sum;
  for (const MemoryRow& r : rows) sum += r.self;
  return sum;
}

// The pipeline on a trace's text.
std::unique_ptr<Categorized> FromText(const std::string& text, const std::string& name) {
  auto trace = ReadTraceString(text, name);
  REQUIRE(trace.ok());
  auto analysis = Analyze(std::move(trace.value()), name);
  REQUIRE(analysis.ok());
  auto categorized = Categorize(std::move(analysis.value()));
  REQUIRE(categorized.ok());
  return std::move(categorized.value());
}

// Step 1 allocates 4 KiB on the CPU (freed in the step) and 1 MiB on
// cuda:0; step 2 allocates 8 KiB on the CPU and frees the 1 MiB.
std::unique_ptr<Categorized> TwoDevices() {
  using namespace memtl::test;
  // The ops' arguments are as torch 1.13 records them (a size list is not recorded),
  // enough to match their schemas: they are the graph's nodes.
  const std::string empty = R"(null,{"int":6},null,null,{"bool":false},null)";
  const std::string zeros = R"(null,null,null,null,{"bool":false})";
  const std::string text =
      Header() + Op(0, -1, "ProfilerStep#1", 1000, 5000, "", "user_scope") +
      Op(1, 0, "aten::empty", 1100, 1200, empty) + Alloc(2, 1, 1150, 0x1000, 4096, "cpu") +
      Op(3, 0, "aten::empty", 2100, 2200, empty) + Alloc(4, 3, 2150, 0x2000, 1 << 20, "cuda:0") +
      Alloc(5, 0, 3000, 0x1000, -4096, "cpu") +
      Op(6, -1, "ProfilerStep#2", 6000, 9000, "", "user_scope") +
      Op(7, 6, "aten::zeros", 6100, 6900, zeros) + Alloc(8, 7, 6500, 0x3000, 8192, "cpu") +
      Alloc(9, 6, 7000, 0x2000, -(1 << 20), "cuda:0");
  return FromText(text, "two_devices");
}

}  // namespace

TEST_CASE("tables: each table's selves add up to the timeline's totals, on every fixture") {
  for (const fs::path& f : AllFixtures()) {
    CAPTURE(f);
    const auto c = Run(f);
    const ExplainInput in = InputOf(*c);
    const std::vector<MemoryTables> tables = ComputeTables(in);
    REQUIRE(tables.size() == c->analysis->trace.devices.size());
    for (size_t d = 0; d < tables.size(); ++d) {
      const auto device = static_cast<DeviceIndex>(d);
      // What the timeline says: the bytes and count of allocations (CREATE,
      // and re-allocations of a live untracked address), of frees, and the
      // peak (the top of the plot's stack).
      MemoryUse expected;
      for (const TimelineEvent& e : c->timeline) {
        if (e.device != device) continue;
        if (e.action == Action::kCreate ||
            (e.action == Action::kIncrementVersion && !e.has_key())) {
          expected.allocated += e.bytes;
          ++expected.count;
        }
        if (e.action == Action::kDestroy) expected.freed += e.bytes;
      }
      expected.at_peak = FindPeak(c->timeline, c->categories, device).bytes;
      const MemoryTables& t = tables[d];
      CHECK(t.device == expected);
      CHECK(SelfSum(t.by_op) == expected);
      CHECK(SelfSum(t.by_module) == expected);
      CHECK(SelfSum(t.by_call_site) == expected);
      // A total holds its self and more; the sorting is by total at the peak.
      for (const auto* rows : {&t.by_op, &t.by_module, &t.by_call_site}) {
        for (const MemoryRow& r : *rows) {
          CAPTURE(r.name);
          CHECK(r.total.allocated >= r.self.allocated);
          CHECK(r.total.freed >= r.self.freed);
          CHECK(r.total.count >= r.self.count);
          CHECK(r.total.at_peak >= r.self.at_peak);
          CHECK(r.total.allocated <= expected.allocated);
        }
        CHECK(
            std::is_sorted(rows->begin(), rows->end(), [](const MemoryRow& a, const MemoryRow& b) {
              return a.total.at_peak > b.total.at_peak;
            }));
      }
    }
  }
}

TEST_CASE(
    "summary: each table's rows add up to the peak and hold a byte under one label, on every "
    "trace memtl reads") {
  // memtl summary's tables (ops, modules, call sites holding the most at
  // the peak), all rows, on every input with tensors or allocations: the
  // fixtures of every folder (CUDA and execution-trace runs too), Kineto
  // traces alone (categories inferred) and joined to their execution
  // traces. The rows add up to the peak, none is below zero, and the bytes
  // from before the profile are under one label in each table: in the op
  // and call-site tables "(before the profile)" is exactly the live tensors
  // `memtl peak` says existed before it; in the module table those less the
  // model's state a module owns (a parameter a module reports, or the
  // optimizer reports with the model's name, its gradient and its optimizer
  // state: names.h), which is under that module.
  struct Input {
    fs::path trace, et;
  };
  std::vector<Input> inputs;
  const fs::path root = fs::path(MEMTL_SOURCE_DIR) / "fixtures";
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string name = e.path().filename().string();
    if (e.path().parent_path().filename() == "bad") continue;
    if (name.find(".trace.jsonl") != std::string::npos) inputs.push_back({e.path(), {}});
    // Kineto traces (the one of execution-trace-simple-add has no memory events).
    const bool kineto = name.ends_with(".kineto.json.gz") || name.ends_with(".pt.trace.json.gz") ||
                        name.starts_with("kineto-h100");
    if (!kineto || name.starts_with("execution-trace-simple-add")) continue;
    inputs.push_back({e.path(), {}});
    const fs::path et =
        e.path().parent_path() /
        (name.substr(0, name.size() - std::string(".kineto.json.gz").size()) + ".et.json.gz");
    if (name.ends_with(".kineto.json.gz") && fs::exists(et)) inputs.push_back({e.path(), et});
  }
  // The demo's transformer (scripts/record_demo.py): nn.MultiheadAttention
  // uses out_proj's weights without calling it, so only the model's names
  // place them in their module.
  for (const auto& e : fs::directory_iterator(fs::path(MEMTL_SOURCE_DIR) / "docs")) {
    if (e.path().filename().string().ends_with(".trace.jsonl.gz")) inputs.push_back({e.path(), {}});
  }
  std::sort(inputs.begin(), inputs.end(), [](const Input& a, const Input& b) {
    return a.trace < b.trace || (a.trace == b.trace && a.et < b.et);
  });
  REQUIRE(inputs.size() > 80);
  for (const Input& input : inputs) {
    CAPTURE(input.trace);
    CAPTURE(input.et);
    PipelineOptions options;
    options.read.et_path = input.et.string();
    auto r = RunPipeline(input.trace.string(), options);
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.status().message()));
    const Categorized& c = *r.value();
    const Analysis& a = *c.analysis;
    ExplainInput in = InputOf(c);
    in.inferred = c.inferred ? &a.inferred : nullptr;
    const Summary s = Summarize(in, "t", SIZE_MAX);
    REQUIRE(!s.devices.empty());
    for (const DeviceSummary& d : s.devices) {
      CAPTURE(d.device);
      for (const auto* rows : {&d.top_ops, &d.top_modules, &d.top_call_sites}) {
        if (rows == &d.top_call_sites && rows->empty()) continue;  // recorded without with_stack
        int64_t sum = 0;
        for (const MemoryRow& row : *rows) {
          CAPTURE(row.name);
          CHECK(row.self.at_peak >= 0);
          sum += row.self.at_peak;
        }
        CHECK(sum == d.peak_bytes);
      }
      if (c.inferred) continue;  // no tensors: allocations from before are one row
      const auto device = std::find_if(a.trace.devices.begin(), a.trace.devices.end(),
                                       [&](const auto& dev) { return dev.name == d.device; });
      in.device = static_cast<DeviceIndex>(device - a.trace.devices.begin());
      const PeakReport peak = ExplainPeak(in, SIZE_MAX);
      REQUIRE(peak.largest.size() == peak.live_tensors);
      int64_t before = 0, module_owned = 0;
      for (const LiveTensor& l : peak.largest) {
        if (l.creator != kNone32) continue;
        before += l.bytes;
        // Named, and not a parameter only an optimizer reports (no module).
        if (!l.name.empty() && !l.name.starts_with("optimizer param ")) module_owned += l.bytes;
      }
      auto at_peak = [](const std::vector<MemoryRow>& rows, std::string_view name) {
        for (const MemoryRow& row : rows) {
          if (row.name == name) return row.self.at_peak;
        }
        return int64_t{0};
      };
      CHECK(at_peak(d.top_ops, kBeforeProfile) == before);
      if (!d.top_call_sites.empty()) CHECK(at_peak(d.top_call_sites, kBeforeProfile) == before);
      CHECK(at_peak(d.top_modules, kBeforeProfile) == before - module_owned);
      CHECK(at_peak(d.top_ops, kNoIdentity) == peak.untracked_bytes);
    }
  }
}

TEST_CASE("tables: the resnet18 step's parameters and activations sit in their modules") {
  // resnet18 (10 classes) on a [2, 3, 32, 32] input, the second SGD step
  // with momentum (torch 1.13). The peak is in the backward pass: every
  // parameter, every momentum buffer (from the first step, so from before
  // the profile) and nearly every gradient are alive, and the autograd
  // graph still holds the stem's activations (conv1's output, saved for
  // bn1's backward).
  const auto c = Run(fs::path(MEMTL_SOURCE_DIR) / "fixtures" / "resnet18_sgd_step.trace.jsonl.gz");
  const ExplainInput in = InputOf(*c);
  const MemoryTables t = ComputeTables(in)[c->device];
  const PeakReport peak = ExplainPeak(in, 100000);  // every live tensor
  constexpr int kParameter = 0, kActivation = 4;

  // A layer holds its parameters, their gradients and their momentum
  // buffers (names.h), wherever they were made.
  constexpr int64_t kConv1 = 64 * 3 * 7 * 7 * 4, kConv16 = 512 * 512 * 3 * 3 * 4;
  constexpr int64_t kFc = (10 * 512 + 10) * 4;
  // conv1: its weight (64x3x7x7 float32, no bias), its momentum buffer and
  // its output ([2, 64, 16, 16] float32); its gradient is made last in the
  // backward pass, after the peak.
  const MemoryRow& conv1 = Row(t.by_module, "ResNet_0 > Conv2d_0");
  CHECK(conv1.self.at_peak == 2 * kConv1 + 2 * 64 * 16 * 16 * 4);
  // layer4.0.conv2 (512x512x3x3): weight, gradient, momentum; its
  // activations are gone.
  CHECK(Row(t.by_module, "ResNet_0 > Sequential_5 > BasicBlock_6 > Conv2d_16").self.at_peak ==
        3 * kConv16);
  // fc: weight [10, 512] and bias [10], their gradients and momentum at the
  // peak; it allocated its output, [2, 10] float32, once.
  const MemoryRow& fc = Row(t.by_module, "ResNet_0 > Linear_0");
  CHECK(fc.self.at_peak == 3 * kFc);
  CHECK(fc.self.allocated == 2 * 10 * 4);
  CHECK(fc.self.count == 1);

  // The model holds its named state (every parameter, and the gradients and
  // momentum buffers alive), plus the activations its modules made that are
  // alive (the peak report's creators say which: the loss is computed
  // outside the model).
  int64_t model_activations = 0, named = 0, before_profile = 0, before_unnamed = 0;
  int64_t made_outside_unnamed = 0;
  for (const LiveTensor& l : peak.largest) {
    if (l.category && ExportIndex(*l.category) == kActivation && l.module.starts_with("ResNet_0"))
      model_activations += l.bytes;
    if (!l.name.empty()) named += l.bytes;
    if (l.creator == kNone32) before_profile += l.bytes;
    if (l.creator == kNone32 && l.name.empty()) before_unnamed += l.bytes;
    if (l.creator != kNone32 && l.module.empty() && l.name.empty()) made_outside_unnamed += l.bytes;
  }
  REQUIRE(peak.largest.size() == peak.live_tensors);
  CHECK(model_activations > 0);
  CHECK(named >= peak.by_category[kParameter]);
  CHECK(Row(t.by_module, "ResNet_0").total.at_peak == named + model_activations);
  // Tensors from before the profile: the op table has them all in one row;
  // the module table gives the named ones to their modules and keeps the
  // rest (batch-norm statistics, the input).
  CHECK(Row(t.by_op, kBeforeProfile).self.at_peak == before_profile);
  CHECK(Row(t.by_module, kBeforeProfile).self.at_peak == before_unnamed);
  CHECK(Row(t.by_op, kNoIdentity).self.at_peak == peak.untracked_bytes);
  // Gradients are made in the backward pass, outside every module, and
  // counted under their layers; an op's total includes what the ops
  // inside it allocated.
  const MemoryRow& conv_bwd = Row(t.by_op, "ConvolutionBackward0");
  CHECK(conv_bwd.self.allocated == 0);
  CHECK(conv_bwd.total.allocated == Row(t.by_op, "aten::convolution_backward").total.allocated);
  CHECK(Row(t.by_module, kOutsideModules).self.at_peak == made_outside_unnamed);
}

TEST_CASE("peak and tables: the step and the Python call site of what holds the peak") {
  using namespace memtl::test;
  // Two tensors made by aten::ones_like in two steps (ProfilerStep#N
  // scopes are leaves, as torch.profiler records them): the first under
  // the model's line, through a PyTorch frame (not the user's), the second
  // at the training loop's line itself. The calls say the line of their
  // caller that made them (the model's forward at train.py:12, relu at
  // model.py:7); the op the loop runs itself has no such call around it.
  const std::string ones = ",null,null,null,null,null";
  auto py = [](int i, int p, const std::string& name, long t0, long t1, int line = 0) {
    return R"({"k":"py","i":)" + std::to_string(i) + R"(,"p":)" + std::to_string(p) +
           R"(,"name":")" + name + R"(","t0":)" + std::to_string(t0) + R"(,"t1":)" +
           std::to_string(t1) + R"(,"tid":1)" +
           (line != 0 ? R"(,"line":)" + std::to_string(line) : std::string()) + "}\n";
  };
  const std::string text =
      Header() + Op(0, -1, "ProfilerStep#1", 500, 600, "", "user_scope") +
      py(1, -1, "train.py(10): <module>", 1000, 5000) +
      py(2, 1, "model.py(5): forward", 1100, 1900, 12) +
      py(3, 2, "torch/nn/functional.py(100): relu", 1150, 1800, 7) +
      Op(4, 3, "aten::ones_like", 1200, 1300, T(1, 100) + ones) + Alloc(5, 4, 1250, 300, 16) +
      Op(6, 4, "aten::fill_", 1260, 1270, T(3, 300) + R"(,{"float":1.0})") +
      Op(7, -1, "ProfilerStep#2", 3000, 3100, "", "user_scope") +
      Op(8, 1, "aten::ones_like", 3200, 3300, T(1, 100) + ones) + Alloc(9, 8, 3250, 400, 16) +
      Op(10, 8, "aten::fill_", 3260, 3270, T(4, 400) + R"(,{"float":1.0})");
  auto trace = ReadTraceString(text, "steps");
  REQUIRE_MESSAGE(trace.ok(), (trace.ok() ? "" : trace.status().message()));
  auto analysis = Analyze(std::move(trace.value()), "steps");
  REQUIRE(analysis.ok());
  auto categorized = Categorize(std::move(analysis.value()));
  REQUIRE(categorized.ok());
  const ExplainInput in = InputOf(*categorized.value());

  const PeakReport peak = ExplainPeak(in, 20);
  const LiveTensor* model = nullptr;
  const LiveTensor* loop = nullptr;
  for (const LiveTensor& t : peak.largest) {
    if (t.call_site == "model.py:7 in forward()") model = &t;
    if (t.call_site == "train.py: <module>(), defined at line 10") loop = &t;
  }
  REQUIRE(model != nullptr);
  REQUIRE(loop != nullptr);
  CHECK(model->creator_name == "aten::ones_like");
  CHECK(model->step == "ProfilerStep#1");
  CHECK(loop->step == "ProfilerStep#2");
  CHECK(model->bytes == 16);
  const std::string text_out = FormatPeak(peak);
  CHECK(text_out.find("call site") != std::string::npos);
  CHECK(text_out.find("ProfilerStep#2") != std::string::npos);
  const auto j = nlohmann::json::parse(PeakJson(peak));
  bool found = false;
  for (const auto& t : j["largest"]) {
    if (t["call_site"] == "model.py:7 in forward()") found = t["step"] == "ProfilerStep#1";
  }
  CHECK(found);

  // The call-site table: self is the innermost user frame, total adds the
  // frames it was called from, each at the line of the call (where known).
  const MemoryTables t = ComputeTables(in)[categorized.value()->device];
  CHECK(HasCallSites(t.by_call_site));
  const MemoryRow& model_row = Row(t.by_call_site, "model.py:7 in forward()");
  CHECK(model_row.self.allocated == 16);
  CHECK(model_row.self.at_peak == 16);
  const MemoryRow& loop_line = Row(t.by_call_site, "train.py:12 in <module>()");
  CHECK(loop_line.self.allocated == 0);
  CHECK(loop_line.total.allocated == 16);
  CHECK(loop_line.total.at_peak == 16);
  const MemoryRow& loop_row = Row(t.by_call_site, "train.py: <module>(), defined at line 10");
  CHECK(loop_row.self.allocated == 16);
  CHECK(loop_row.total.allocated == 16);
  for (const MemoryRow& r : t.by_call_site) CHECK(r.name.find("torch/") == std::string::npos);
  CHECK(FormatTables(t, 10).find("by call site") != std::string::npos);
}

TEST_CASE("report: two devices, steps, and the op running at each point") {
  const auto two = TwoDevices();
  const Categorized& c = *two;
  const Report report = MakeReport(InputOf(c), 20);

  REQUIRE(report.steps.size() == 2);
  CHECK(report.steps[0].name == "ProfilerStep#1");
  CHECK(report.steps[0].time_us == 1);
  CHECK(report.steps[1].time_us == 6);
  REQUIRE(report.devices.size() == 2);
  // Accelerators first, then cpu.
  const DeviceReport& cuda = report.devices[0];
  const DeviceReport& cpu = report.devices[1];
  CHECK(cpu.name == "cpu");
  CHECK(cuda.name == "cuda:0");

  // The CPU: rows at 1, 3 and 6 us; the peak is the last (8 KiB).
  REQUIRE(cpu.series.points.size() == 3);
  CHECK(cpu.series.points[2].time_us == 6);
  CHECK(cpu.peak.bytes == 8192);
  CHECK(cpu.peak.time_us == 6);
  const MemoryTables& ct = cpu.tables;
  CHECK(Row(ct.by_op, "aten::empty").self.allocated == 4096);
  CHECK(Row(ct.by_op, "ProfilerStep#1").self.freed == 4096);
  CHECK(Row(ct.by_op, "ProfilerStep#1").total.allocated == 4096);
  CHECK(Row(ct.by_op, "ProfilerStep#2").total.allocated == 8192);
  CHECK(Row(ct.by_op, "aten::zeros").self.count == 1);
  // An untracked allocation alive at the peak is not paired with its op.
  CHECK(Row(ct.by_op, kNoIdentity).self.at_peak == 8192);
  CHECK(Row(ct.by_module, kOutsideModules).total.allocated == 4096 + 8192);

  // cuda:0: 1 MiB from 2 us to 7 us.
  REQUIRE(cuda.series.points.size() == 2);
  CHECK(cuda.peak.bytes == 1 << 20);
  CHECK(cuda.tables.device.allocated == 1 << 20);
  CHECK(Row(cuda.tables.by_op, "ProfilerStep#2").self.freed == 1 << 20);

  // Each point names the top-level op that started last before it.
  for (const DeviceReport* d : {&cpu, &cuda}) {
    for (const ChartPoint& p : d->series.points) {
      REQUIRE(p.op < d->series.ops.size());
      const RunningOp& op = d->series.ops[p.op];
      CHECK(op.phase == "other");
      CHECK(op.module.empty());
    }
  }
  CHECK(cpu.series.ops[cpu.series.points[0].op].op == "aten::empty");
  CHECK(cpu.series.ops[cpu.series.points[2].op].op == "aten::zeros");
  // The free at 3 us comes after aten::empty on cuda:0 started.
  CHECK(cpu.series.points[1].op == cpu.series.points[0].op);
}

TEST_CASE("report: sampled rows are the exports' rows, with every bucket's peak") {
  for (const fs::path& f : AllFixtures()) {
    CAPTURE(f);
    const auto c = Run(f);
    const CoalescedTimeline rows = Coalesce(c->timeline, c->categories, c->device);
    auto same = [&](const ChartPoint& p, size_t row) {
      if (rows.times[row] != p.time_us) return false;
      for (int i = 0; i < 8; ++i) {
        if (rows.sizes[row][i + 1] != p.bytes[i]) return false;
      }
      return true;
    };
    // Every row when there are few.
    const ChartSeries all = SampleRows(c->timeline, c->categories, c->device);
    REQUIRE(all.rows == rows.times.size());
    REQUIRE(all.points.size() == rows.times.size());
    for (size_t i = 0; i < all.points.size(); ++i) CHECK(same(all.points[i], i));
    // With 3 buckets: at most 4 rows each, all real rows in order, the first,
    // the last and the peak among them.
    const ChartSeries few = SampleRows(c->timeline, c->categories, c->device, 3);
    CHECK(few.rows == rows.times.size());
    if (rows.times.size() <= 12) continue;
    CHECK(few.points.size() <= 12);
    size_t at = 0;
    for (const ChartPoint& p : few.points) {
      while (at < rows.times.size() && !same(p, at)) ++at;
      CHECK(at < rows.times.size());
    }
    CHECK(same(few.points.front(), 0));
    CHECK(same(few.points.back(), rows.times.size() - 1));
    const PeakReport peak = FindPeak(c->timeline, c->categories, c->device);
    CHECK(std::any_of(few.points.begin(), few.points.end(),
                      [&](const ChartPoint& p) { return same(p, peak.row); }));
  }
}

TEST_CASE("report: made before the stages go, it equals the one made with everything kept") {
  for (const char* name : {"resnet18_sgd_step", "e2e_adam"}) {
    const fs::path f =
        fs::path(MEMTL_SOURCE_DIR) / "fixtures" / (std::string(name) + ".trace.jsonl.gz");
    const auto kept = Run(f);
    const Report full = MakeReport(InputOf(*kept), 20);
    PipelineOptions options;
    options.report = true;
    auto analysis = AnalyzeFile(f.string());
    REQUIRE(analysis.ok());
    auto dropped = CategorizeForExport(std::move(analysis.value()), options);
    REQUIRE(dropped.ok());
    const Exportable& d = *dropped.value();
    CHECK(d.view.trace.events.empty());
    REQUIRE(d.report.has_value());
    REQUIRE(d.report->devices.size() == full.devices.size());
    for (size_t i = 0; i < full.devices.size(); ++i) {
      const DeviceReport &a = full.devices[i], &b = d.report->devices[i];
      CHECK(FormatPeak(a.peak) == FormatPeak(b.peak));
      CHECK(FormatTables(a.tables, 1000) == FormatTables(b.tables, 1000));
      REQUIRE(a.series.points.size() == b.series.points.size());
      auto op = [](const ChartSeries& s, size_t k) {
        return s.points[k].op == kNone32 ? std::string("-") : s.ops[s.points[k].op].op;
      };
      for (size_t k = 0; k < a.series.points.size(); ++k) {
        CHECK(a.series.points[k].bytes == b.series.points[k].bytes);
        CHECK(op(a.series, k) == op(b.series, k));
      }
    }
  }
}

TEST_CASE("report: the HTML holds every device's chart data and loads nothing") {
  const auto c = TwoDevices();
  const Analysis& a = *c->analysis;
  const Report report = MakeReport(InputOf(*c), 20);
  ExportInput in{a.trace, c->timeline, c->categories, a.diagnostics, "two <devices>", ""};
  in.report = &report;
  const fs::path path =
      fs::temp_directory_path() / ("memtl_report_" + std::to_string(::getpid()) + ".html");
  REQUIRE(ExportMemoryTimeline(in, path.string(), c->device).ok());
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  const std::string html = text.str();
  fs::remove(path);

  // One file: nothing to fetch, and a policy that forbids fetching.
  CHECK(html.find("default-src 'none'") != std::string::npos);
  for (const char* load : {"<link", "@import", "src=\"http", "src='http", "url(http"})
    CHECK_MESSAGE(html.find(load) == std::string::npos, load);
  CHECK(html.find("<title>memtl memory timeline: cuda:0 (two &lt;devices&gt;)</title>") !=
        std::string::npos);
  CHECK(html.find("<option value=\"0\" selected>cuda:0</option>") != std::string::npos);
  CHECK(html.find("Memory by module") != std::string::npos);
  // The chart's data: every device's points as the report has them.
  const std::string open = "<script id=\"memtl-data\" type=\"application/json\">";
  const size_t at = html.find(open) + open.size();
  const auto data = nlohmann::json::parse(html.substr(at, html.find("</script>", at) - at));
  CHECK(data["selected"] == 0);
  CHECK(data["source"] == "two <devices>");
  REQUIRE(data["devices"].size() == 2);
  REQUIRE(data["steps"].size() == 2);
  CHECK(data["steps"][1][0] == "ProfilerStep#2");
  for (size_t d = 0; d < 2; ++d) {
    const auto& dev = data["devices"][d];
    const ChartSeries& s = report.devices[d].series;
    CHECK(dev["name"] == report.devices[d].name);
    REQUIRE(dev["t"].size() == s.points.size());
    for (size_t k = 0; k < s.points.size(); ++k) {
      CHECK(dev["first_us"].get<int64_t>() + dev["t"][k].get<int64_t>() == s.points[k].time_us);
      for (int i = 0; i < 8; ++i) CHECK(dev["v"][k][i] == s.points[k].bytes[i]);
      CHECK(dev["ops"][dev["op"][k].get<size_t>()][0] == s.ops[s.points[k].op].op);
    }
    CHECK(dev["peak"]["bytes"] == report.devices[d].peak.bytes);
  }
}

TEST_CASE(
    "tables: a deep nest of ops and module calls costs memory by its events, not their square") {
  // 20,000 nested ops, each allocating 16 bytes beneath it, inside 100
  // nested module calls: each op's total counts every allocation beneath it
  // once, and module calls past kMaxModuleDepth count with the one around
  // them, so no module row's name holds more than that many modules.
  using namespace memtl::test;
  constexpr int kModules = 100;
  constexpr int kOps = 20000;
  constexpr int kEnd = 10 * (kModules + kOps);
  std::string text = Header();
  int i = 0;
  for (; i < kModules; ++i) {
    text += R"({"k":"py","i":)" + std::to_string(i) + R"(,"p":)" + std::to_string(i - 1) +
            R"(,"name":"nn.Module: M","t0":)" + std::to_string(i) + R"(,"t1":)" +
            std::to_string(kEnd - i) + "}\n";
  }
  for (; i < kModules + kOps; ++i)
    text += Op(i, i - 1, "op" + std::to_string(i % 3), i, kEnd - i, "");
  for (int k = 0; k < kOps; ++k) {
    const int parent = kModules + k;
    text += Alloc(i++, parent, parent, 64 * (k + 1), 16);
  }
  const auto c = FromText(text, "deep");
  const MemoryTables t = ComputeTables(InputOf(*c))[0];
  int ops = 0;
  for (const MemoryRow& r : t.by_op) {
    CAPTURE(r.name);
    if (!r.name.starts_with("op")) continue;  // "(no tensor identity)": at the peak
    ++ops;
    // The outermost op holds every allocation; the next names first come
    // one and two levels down.
    const int first = (r.name.back() - '0' - kModules % 3 + 3) % 3;
    const int64_t beneath = kOps - first;
    CHECK(r.total.count == beneath);
    CHECK(r.total.allocated == 16 * beneath);
    CHECK(std::abs(r.self.count - kOps / 3) <= 1);
  }
  CHECK(ops == 3);
  CHECK(t.device.count == kOps);
  size_t longest = 0;
  for (const MemoryRow& r : t.by_module) longest = std::max(longest, r.name.size());
  const size_t one = std::string_view("M_0 > ").size();
  CHECK(longest <= kMaxModuleDepth * (one + 4));
  CHECK(t.by_module.size() <= kMaxModuleDepth + 1);
}

// memtl whatif (core/plan/whatif.h) on the fixtures: with no change it
// gives back every device's peak exactly as the exports have it; each
// change moves the bytes it names; what it cannot replay is refused; the
// report's "What would help" (core/plan/help.h). The predictions are
// checked against real runs in tests/python/test_whatif.py.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/explain/peak.h"
#include "core/pipeline/analysis.h"
#include "core/plan/help.h"
#include "core/plan/whatif.h"
#include "core/read/memtl/trace_reader.h"
#include "export/export.h"
#include "tests/unit/trace_text.h"

using namespace memtl;
namespace fs = std::filesystem;

namespace {

const fs::path kFixtures = fs::path(MEMTL_SOURCE_DIR) / "fixtures";

std::unique_ptr<Categorized> Run(const fs::path& path) {
  PipelineOptions options;
  options.read.keep_shapes = true;
  auto c = RunPipeline(path.string(), options);
  REQUIRE_MESSAGE(c.ok(), (c.ok() ? "" : c.status().message()));
  return std::move(c.value());
}

ExplainInput InputOf(const Categorized& c) {
  const Analysis& a = *c.analysis;
  return ExplainInput{a.trace,  a.keys,        *a.tree,
                      *a.graph, c.categories,  c.timeline,
                      c.device, &a.key_shapes, c.inferred ? &a.inferred : nullptr};
}

std::vector<fs::path> Traces(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.find(".trace.jsonl") != std::string::npos ||
        (dir.filename() == "kineto" && name.ends_with(".json.gz") &&
         !name.ends_with(".et.json.gz")))
      out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

WhatIfReport WhatIfOk(const Categorized& c, const WhatIfChanges& ch) {
  auto r = WhatIf(InputOf(c), ch, "t");
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.status().message()));
  return std::move(r.value());
}

const WhatIfDevice& Cpu(const WhatIfReport& r) {
  for (const WhatIfDevice& d : r.devices) {
    if (d.device == "cpu") return d;
  }
  FAIL("no cpu device");
  return r.devices.front();
}

constexpr int kParameter = 0, kOptimizerState = 1, kGradient = 5;

// Changes made by `set` on none.
template <typename F>
WhatIfChanges Changes(F set) {
  WhatIfChanges c;
  set(c);
  return c;
}

}  // namespace

TEST_CASE("whatif: with no change, every device's peak is the exports' own") {
  std::vector<fs::path> traces = Traces(kFixtures);
  for (const char* dir : {"torch2", "cuda", "kineto"}) {
    for (const fs::path& p : Traces(kFixtures / dir)) traces.push_back(p);
  }
  REQUIRE(traces.size() > 30);
  for (const fs::path& path : traces) {
    CAPTURE(path.filename().string());
    auto run = RunPipeline(path.string());
    if (!run.ok()) continue;  // a trace with no memory events
    const std::unique_ptr<Categorized>& c = run.value();
    const WhatIfReport r = WhatIfOk(*c, WhatIfChanges{});
    for (const WhatIfDevice& d : r.devices) {
      DeviceIndex index = 0;
      while (c->analysis->trace.devices[index].name != d.device) ++index;
      const PeakReport want = FindPeak(c->timeline, c->categories, index);
      CAPTURE(d.device);
      CHECK(d.before.bytes == want.bytes);
      CHECK(d.before.since_start_us == want.since_start_us);
      CHECK(d.before.by_category == want.by_category);
      CHECK(d.after.bytes == d.before.bytes);
      CHECK(d.after.by_category == d.before.by_category);
      CHECK(d.rank_peaks.empty());
    }
  }
}

TEST_CASE("whatif: set to none frees what zero_grad zeroes; kept, the gradients stay") {
  auto zeroed = Run(kFixtures / "e2e_sequential_set_to_none_false.trace.jsonl.gz");
  WhatIfChanges ch;
  ch.set_to_none = true;
  const WhatIfDevice freed = Cpu(WhatIfOk(*zeroed, ch));
  CHECK(freed.after.bytes < freed.before.bytes);

  auto freed_run = Run(kFixtures / "e2e_sequential_set_to_none_true.trace.jsonl.gz");
  ch.set_to_none = false;
  const WhatIfDevice kept = Cpu(WhatIfOk(*freed_run, ch));
  CHECK(kept.before.by_category[kGradient] == 0);  // the measured peak is before the backward
  CHECK(kept.after.by_category[kGradient] > 0);
  CHECK(kept.after.bytes > kept.before.bytes);

  // Already so: no change, said.
  const WhatIfReport same =
      WhatIfOk(*freed_run, Changes([](WhatIfChanges& c) { c.set_to_none = true; }));
  CHECK(Cpu(same).after.bytes == Cpu(same).before.bytes);
  CHECK(same.changes.at(0).find("no change") != std::string::npos);
}

TEST_CASE("whatif: the optimizer, the dtype and ZeRO-1 scale the bytes they name") {
  auto c = Run(kFixtures / "e2e_adam.trace.jsonl.gz");
  WhatIfChanges sgd;
  sgd.optimizer = "sgd";
  const WhatIfDevice s = Cpu(WhatIfOk(*c, sgd));
  CHECK(s.before.by_category[kOptimizerState] > 0);
  CHECK(s.after.by_category[kOptimizerState] == 0);

  WhatIfChanges bf16;
  bf16.dtype_bytes[0] = DtypeBytes("bf16");
  const WhatIfDevice b = Cpu(WhatIfOk(*c, bf16));
  CHECK(b.after.by_category[kParameter] * 2 == b.before.by_category[kParameter]);

  WhatIfChanges zero;
  zero.shard_optimizer = 2;
  const WhatIfDevice z = Cpu(WhatIfOk(*c, zero));
  CHECK(z.after.by_category[kOptimizerState] < z.before.by_category[kOptimizerState]);
  CHECK(z.after.by_category[kOptimizerState] * 2 >= z.before.by_category[kOptimizerState]);
  CHECK(z.after.bytes < z.before.bytes);
}

TEST_CASE("whatif: what it cannot replay is refused, naming it") {
  auto c = Run(kFixtures / "torch2" / "e2e_adam.trace.jsonl.gz");
  auto refused = [&](const WhatIfChanges& ch) {
    auto r = WhatIf(InputOf(*c), ch, "t.trace");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().starts_with("t.trace: "));
    return r.status().message();
  };
  CHECK(refused(Changes([](WhatIfChanges& c) {
          c.checkpoint = {"NoSuchBlock_*"};
        })).find("no module call matches") != std::string::npos);
  CHECK(refused(Changes([](WhatIfChanges& c) { c.shard_params = 2; })).find("needs --wrap") !=
        std::string::npos);
  CHECK(refused(Changes([](WhatIfChanges& c) {
          c.shard_params = 2;
          c.wrap = "NoSuch*";
        })).find("--wrap") != std::string::npos);

  auto inference = Run(kFixtures / "e2e_inference.trace.jsonl.gz");
  WhatIfChanges grads;
  grads.dtype_bytes[1] = 2;
  auto r = WhatIf(InputOf(*inference), grads, "inference");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("no GRADIENT") != std::string::npos);
  WhatIfChanges unknown;
  unknown.optimizer = "lamb";
  r = WhatIf(InputOf(*inference), unknown, "inference");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("not one memtl knows") != std::string::npos);
}

TEST_CASE("whatif: JSON, text and HTML say the same peaks; names from the trace are escaped") {
  auto c = Run(kFixtures / "e2e_adam.trace.jsonl.gz");
  auto r = WhatIf(InputOf(*c), Changes([](WhatIfChanges& c) { c.optimizer = "sgd"; }),
                  "<b>run</b>.trace");
  REQUIRE(r.ok());
  const nlohmann::json j = nlohmann::json::parse(WhatIfJson(r.value()));
  const WhatIfDevice& d = Cpu(r.value());
  CHECK(j["devices"][0]["peak_bytes"]["before"] == d.before.bytes);
  CHECK(j["devices"][0]["peak_bytes"]["after"] == d.after.bytes);
  CHECK(j["devices"][0]["by_category"]["after"]["OPTIMIZER_STATE"] == 0);
  CHECK(j["trace"] == "<b>run</b>.trace");
  const std::string text = FormatWhatIf(r.value());
  CHECK(text.find(HumanBytes(d.after.bytes)) != std::string::npos);
  const std::string html = WhatIfHtml(r.value());
  CHECK(html.find("<b>run</b>") == std::string::npos);
  CHECK(html.find("&lt;b&gt;run&lt;/b&gt;") != std::string::npos);
  CHECK(html.find("<polyline") != std::string::npos);
}

TEST_CASE("whatif: checkpointing a module frees what its forward saved until its backward") {
  for (const char* name :
       {"resnet18_sgd_step.trace.jsonl.gz", "torch2/resnet_bn_sgd_step.trace.jsonl.gz"}) {
    CAPTURE(name);
    auto c = Run(kFixtures / name);
    const WhatIfReport r =
        WhatIfOk(*c, Changes([](WhatIfChanges& ch) { ch.checkpoint = {"*Block_*"}; }));
    CHECK(Cpu(r).after.bytes <= Cpu(r).before.bytes);
    CHECK(r.changes.at(0).find("saved for backward is freed") != std::string::npos);
  }
  // A Linear saves its input, made outside it: nothing of its own to free.
  auto c = Run(kFixtures / "torch2" / "e2e_adam.trace.jsonl.gz");
  auto r =
      WhatIf(InputOf(*c), Changes([](WhatIfChanges& ch) { ch.checkpoint = {"Linear_*"}; }), "t");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("none saves a tensor") != std::string::npos);
}

TEST_CASE("what would help: changes that lower the peak, the most saved first") {
  PipelineOptions options;
  options.report = true;
  auto c = RunPipeline((kFixtures / "resnet18_sgd_step.trace.jsonl.gz").string(), options);
  REQUIRE(c.ok());
  const Report& report = *c.value()->report;
  REQUIRE(!report.devices.empty());
  const std::vector<HelpRow>& help = report.devices.front().help;
  REQUIRE(!help.empty());
  for (size_t i = 0; i < help.size(); ++i) {
    CHECK(help[i].saved > 0);
    CHECK(help[i].peak + help[i].saved == report.devices.front().peak.bytes);
    CHECK(!help[i].trust.empty());
    if (i > 0) CHECK(help[i - 1].saved >= help[i].saved);
  }
}

TEST_CASE("whatif: bytes scaled past what 64 bits hold are no number, refused") {
  // A module's 25,000 float parameters of 2^47-1 bytes each, 2^61.6 in
  // all: within the exports' 64 bits, but not once an 8-byte dtype scales
  // them.
  using namespace memtl::test;
  constexpr int kParams = 25000;
  constexpr long kBytes = 140737488355327;
  std::string text = Header(true), params;
  for (int k = 0; k < kParams; ++k) {
    const unsigned long ptr = 0x100000 + 0x1000ul * static_cast<unsigned long>(k);
    text += Alloc(k, -1, 10 + k, ptr, kBytes, "cpu", k, k);
    params += std::string(k ? "," : "") + R"({"name":"w","t":)" + T(0x900000 + k, ptr, 4, k, k) +
              R"(,"grad":null})";
  }
  text += R"({"k":"py","i":)" + std::to_string(kParams) +
          R"(,"p":-1,"name":"nn.Module: Linear_0","t0":100000,"t1":100001,"tid":1,)" +
          R"("module":{"self":1,"cls":"Linear","params":[)" + params + "]}}\n";
  auto trace = ReadTraceString(text, "huge.trace.jsonl");
  REQUIRE_MESSAGE(trace.ok(), (trace.ok() ? "" : trace.status().message()));
  auto a = Analyze(std::move(trace.value()), "huge.trace.jsonl");
  REQUIRE(a.ok());
  auto c = Categorize(std::move(a.value()));
  REQUIRE(c.ok());
  WhatIfChanges ch;
  ch.dtype_bytes[0] = DtypeBytes("fp64");
  auto r = WhatIf(InputOf(*c.value()), ch, "huge");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("pass what 64 bits hold") != std::string::npos);
  ch.dtype_bytes[0] = DtypeBytes("bf16");  // halved: a number
  CHECK(WhatIf(InputOf(*c.value()), ch, "huge").ok());
}

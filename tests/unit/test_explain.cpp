// memtl explain and memtl summary (core/explain/explain.h, summary.h): the
// passes' history agrees with the
// categories the export uses, and on the resnet-style step the rules that
// decide a parameter, a gradient and an activation are the ones that should.
#include <doctest/doctest.h>

#include <memory>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/explain/context.h"
#include "core/explain/explain.h"
#include "core/explain/summary.h"
#include "core/pipeline/analysis.h"
#include "core/read/memtl/trace_reader.h"
#include "tests/unit/trace_text.h"

using namespace memtl;

namespace {

const std::string kDir = std::string(MEMTL_SOURCE_DIR) + "/fixtures/torch2/";

struct Explained {
  std::unique_ptr<Categorized> c;
  std::string Run(const std::string& ref, bool json) {
    const Analysis& a = *c->analysis;
    const ExplainInput in{a.trace,       a.keys,      *a.tree,  *a.graph,
                          c->categories, c->timeline, c->device};
    auto r = ExplainTensor({in, *a.sizes, &a.schemas}, *ParseTensorRef(ref), json);
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.status().message()));
    return r.value();
  }
};

Explained Load(const std::string& name) {
  auto c = RunPipeline(kDir + name);
  REQUIRE_MESSAGE(c.ok(), (c.ok() ? "" : c.status().message()));
  return {std::move(c.value())};
}

}  // namespace

TEST_CASE("call sites: the user's frames, not PyTorch's, built-ins or generated code") {
  CHECK(IsUserFrame("train.py(35): step"));
  CHECK(IsUserFrame("/home/me/proj/model.py(12): forward"));
  CHECK(!IsUserFrame("torch/nn/modules/linear.py(125): forward"));
  CHECK(!IsUserFrame("/usr/lib/python3/dist-packages/torch/autograd/__init__.py(200): backward"));
  CHECK(!IsUserFrame("<built-in method add_ of Tensor object at 0x7f>"));
  CHECK(!IsUserFrame("nn.Module: Linear_0"));
  // torch.compile's generated files: compiled regions of the user's code.
  for (const char* generated :
       {"torchinductor_root/hm/chmioy7tw5ibwerrqvc6kerrxrsteppsj5xvsga7zrj6sdd2ccjf.py(71): call",
        "/tmp/torchinductor_alice/ab/cabcdef.py(242): call"}) {
    CHECK(!IsUserFrame(generated));
    CHECK(IsGeneratedFrame(generated));
  }
  CHECK(!IsGeneratedFrame("train.py(35): step"));
}

TEST_CASE("explain: tensor references") {
  CHECK(ParseTensorRef("T12")->id == 12);
  CHECK(!ParseTensorRef("T12")->version);
  CHECK(*ParseTensorRef("T12:v1")->version == 1);
  CHECK(*ParseTensorRef("T12(v3)")->version == 3);
  CHECK(*ParseTensorRef("12:4")->version == 4);
  CHECK(!ParseTensorRef("Tx"));
  CHECK(!ParseTensorRef("T12(v1"));
  CHECK(!ParseTensorRef("T12:"));
  CHECK(!ParseTensorRef(""));
}

TEST_CASE("explain: every version's category is the last pass decision, on three fixtures") {
  for (const char* name : {"resnet_bn_sgd_step.trace.jsonl.gz", "e2e_adam.trace.jsonl.gz",
                           "dataflow_simple.trace.jsonl.gz"}) {
    CAPTURE(name);
    Explained e = Load(name);
    const KeyTable& kt = e.c->analysis->keys;
    int64_t last_id = -1;
    size_t versions = 0;
    for (uint32_t k = 0; k < kt.size(); ++k) {
      if (kt.keys[k].id.value() == last_id) continue;  // keys of one id are sorted together
      last_id = kt.keys[k].id.value();
      std::istringstream lines(e.Run("T" + std::to_string(last_id), true));
      for (std::string line; std::getline(lines, line);) {
        const auto j = nlohmann::json::parse(line);
        const auto& why = j["decided_by"];
        const std::string want = why.empty() ? "unknown" : why.back()["to"].get<std::string>();
        CHECK_MESSAGE(j["category"] == want, line);
        ++versions;
      }
    }
    CHECK(versions >= 3);
  }
}

TEST_CASE("explain: the rules behind a parameter, a gradient and an activation") {
  Explained e = Load("resnet_bn_sgd_step.trace.jsonl.gz");
  // The first conv's weight: reported by the module call, before the profile.
  const std::string param = e.Run("T50:v0", false);
  CHECK(param.find("category: PARAMETER") != std::string::npos);
  CHECK(param.find("parameters from the python tracer: unknown -> PARAMETER") != std::string::npos);
  CHECK(param.find("existed before profiling") != std::string::npos);
  // Its gradient: made by ConvolutionBackward0 from the weight, in backward.
  const std::string grad = e.Run("T104:v0", false);
  CHECK(grad.find("gradients and temporaries: unknown -> GRADIENT") != std::string::npos);
  CHECK(grad.find("created by: ConvolutionBackward0") != std::string::npos);
  CHECK(grad.find("phase backward") != std::string::npos);
  CHECK(grad.find("T50(v0) PARAMETER") != std::string::npos);
  // A ReLU's output in the forward pass: flooded from an activation.
  const std::string act = e.Run("T12:v0", false);
  CHECK(act.find("activations: unknown -> ACTIVATION") != std::string::npos);
  CHECK(act.find("created by: aten::relu") != std::string::npos);
  CHECK(act.find("ReLU_0") != std::string::npos);
  CHECK(act.find("called from record_fixtures.py: ") != std::string::npos);
}

TEST_CASE("categories: the bytes no rule categorized are \"unknown\" in every output") {
  // One spelling: the text and JSON outputs, the report and the plot's
  // legend all take the names of kExportIndexNames (the plot said
  // "Unknown", everything else "unknown").
  CHECK(CategoryName(std::nullopt) == "unknown");
  CHECK(kExportIndexNames[kUnknownIndex] == "unknown");
  for (int c = 0; c < 8; ++c) CHECK(ExportCategoryName(c) == kExportIndexNames[c]);
  // --budget takes the name as printed, in any case.
  for (const char* text : {"unknown=1", "Unknown=1", "UNKNOWN=1"})
    CHECK(*ParseBudget(text).value().category == kUnknownIndex);
}

TEST_CASE(
    "summary: budgets parse with units, and a category's largest is checked on every device") {
  CHECK(ParseBudget("ACTIVATION=2GiB").value().bytes == (int64_t{2} << 30));
  CHECK(*ParseBudget("activation=2GiB").value().category == 4);
  CHECK(!ParseBudget("total=10GB").value().category);
  CHECK(ParseBudget("total=10GB").value().bytes == 10'000'000'000);
  CHECK(ParseBudget("unknown=1.5k").value().bytes == 1500);
  CHECK(ParseBudget("GRADIENT=512").value().bytes == 512);
  CHECK(!ParseBudget("GRADIENT").ok());
  CHECK(!ParseBudget("bogus=1").ok());
  CHECK(!ParseBudget("GRADIENT=1parsec").ok());
  // Strictly DIGITS[.DIGITS]UNIT: no prefix of a malformed size is taken.
  for (const char* bad : {"total=1..5GB", "total=1.2.3MB", "total=.", "total=1.GB", "total=.5GB",
                          "total=", "total=GB", "total=5GBx"}) {
    CAPTURE(bad);
    CHECK(!ParseBudget(bad).ok());
  }
  CHECK(ParseBudget("total=0.5GB").value().bytes == 500'000'000);
  CHECK(!ParseBudget("GRADIENT=").ok());

  Explained e = Load("resnet_bn_sgd_step.trace.jsonl.gz");
  const Analysis& a = *e.c->analysis;
  const ExplainInput in{a.trace,         a.keys,        *a.tree,    *a.graph,
                        e.c->categories, e.c->timeline, e.c->device};
  const Summary s = Summarize(in, "t", 5);
  REQUIRE(s.devices.size() == 1);
  const DeviceSummary& d = s.devices[0];
  int64_t sum = 0;
  for (int c = 0; c < 8; ++c) {
    sum += d.at_peak[c];
    CHECK(d.largest[c] >= d.at_peak[c]);
  }
  CHECK(sum == d.peak_bytes);
  CHECK(d.top_ops.size() <= 5);
  // Exactly at the largest value holds; a byte less is over.
  CHECK(
      CheckBudgets(s, {ParseBudget("ACTIVATION=" + std::to_string(d.largest[4])).value()}).empty());
  const auto over =
      CheckBudgets(s, {ParseBudget("ACTIVATION=" + std::to_string(d.largest[4] - 1)).value(),
                       ParseBudget("total=" + std::to_string(d.peak_bytes)).value()});
  REQUIRE(over.size() == 1);
  CHECK(over[0].find("budget exceeded: ACTIVATION on cpu") != std::string::npos);
  // A run against itself differs nowhere.
  const std::string diff = FormatDiff(s, s);
  CHECK(diff.find("+") == std::string::npos);
  CHECK(diff.find("differ most") == std::string::npos);
}

TEST_CASE("explain: the ProfilerStep#N a version was made in") {
  // ProfilerStep#N scopes are leaves of the event tree: the step is the last
  // one that started before the creating op.
  using namespace memtl::test;
  const std::string text = Header() + Op(0, -1, "ProfilerStep#3", 100, 200, "") +
                           Op(1, -1, "aten::empty", 110, 120, "", "function") +
                           Alloc(2, 1, 111, 4096, 64) + Op(3, -1, "ProfilerStep#4", 300, 400, "") +
                           Op(4, -1, "aten::relu_", 310, 320, T(7, 4096, 16)) +
                           Alloc(5, -1, 500, 4096, -64);
  auto trace = ReadTraceString(text, "steps.trace");
  REQUIRE_MESSAGE(trace.ok(), (trace.ok() ? "" : trace.status().message()));
  auto a = Analyze(std::move(trace.value()), "steps.trace");
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.status().message()));
  auto c = Categorize(std::move(a.value()));
  REQUIRE_MESSAGE(c.ok(), (c.ok() ? "" : c.status().message()));
  Explained e{std::move(c.value())};
  const std::string out = e.Run("T0", false);
  const size_t v1 = out.find("T0(v1)");
  REQUIRE(v1 != std::string::npos);
  // v0 is allocated in step 3 (outside any op: a [memory] node); relu_
  // writes v1 in step 4.
  CHECK(out.substr(0, v1).find("; ProfilerStep#3") != std::string::npos);
  CHECK(out.find("created by: aten::relu_ at 0.000 ms; phase other; ProfilerStep#4", v1) !=
        std::string::npos);
}

TEST_CASE("explain: the creating op's matched overload") {
  // Adam's exp_avg (T28) gets its v1 from lerp_ with a Python float weight:
  // of lerp_'s overloads, the Scalar one fits what was observed.
  Explained e = Load("e2e_adam.trace.jsonl.gz");
  const std::string text = e.Run("T28:v1", false);
  CHECK(text.find("created by: aten::lerp_ (overload aten::lerp_.Scalar) at") != std::string::npos);
  // A default overload alone is not repeated.
  CHECK(e.Run("T28:v0", false).find("created by: aten::zeros_like at") != std::string::npos);
  CHECK(e.Run("T28:v1", true).find("\"overloads\":[\"aten::lerp_.Scalar\"]") != std::string::npos);
}

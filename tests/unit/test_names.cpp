// Names of a model's parameters, gradients and optimizer state
// (core/explain/names.h): the data-flow rule checked against the python
// tracer's answer, torch 1.13's training steps, and the model's own names
// from a trace's header.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/explain/names.h"
#include "core/explain/tables.h"
#include "core/pipeline/analysis.h"
#include "core/read/memtl/trace_reader.h"
#include "tests/unit/gzip_text.h"

using namespace memtl;
namespace fs = std::filesystem;

namespace {

const fs::path kFixtures = fs::path(MEMTL_SOURCE_DIR) / "fixtures";

std::string Gunzip(const fs::path& path) { return test::GunzipFile(path.string()); }

std::unique_ptr<Categorized> RunText(std::string text, const std::string& name) {
  auto trace = ReadTraceString(std::move(text), name);
  REQUIRE_MESSAGE(trace.ok(), (trace.ok() ? "" : trace.status().message()));
  auto a = Analyze(std::move(trace.value()), name);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.status().message()));
  auto c = Categorize(std::move(a.value()));
  REQUIRE_MESSAGE(c.ok(), (c.ok() ? "" : c.status().message()));
  return std::move(c.value());
}

// A file through the whole pipeline (a trace whose storages must be split
// is read twice: AnalyzeFile).
std::unique_ptr<Categorized> Run(const fs::path& path) {
  auto c = RunPipeline(path.string());
  REQUIRE_MESSAGE(c.ok(), (c.ok() ? "" : c.status().message()));
  return std::move(c.value());
}

ExplainInput InputOf(const Categorized& c) {
  const Analysis& a = *c.analysis;
  return ExplainInput{a.trace, a.keys, *a.tree, *a.graph, c.categories, c.timeline, c.device};
}

std::vector<fs::path> Fixtures(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().find(".trace.jsonl") != std::string::npos)
      out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The parameter a name extends: "X" of "X grad" and of "X exp_avg".
std::string Base(const std::string& text, bool* is_param) {
  const size_t dot = text.rfind(" .");
  const size_t space = text.find(' ', dot == std::string::npos ? 0 : dot + 2);
  *is_param = space == std::string::npos;
  return text.substr(0, space);
}

}  // namespace

TEST_CASE("names: the data-flow rule names what the tracer names, on every torch 2.x fixture") {
  // CPU steps loop over parameters; the CUDA runs' steps are foreach and
  // fused kernels over lists of tensors.
  std::vector<fs::path> fixtures = Fixtures(kFixtures / "torch2");
  for (const fs::path& p : Fixtures(kFixtures / "cuda")) fixtures.push_back(p);
  size_t agreed = 0;
  for (const fs::path& path : fixtures) {
    CAPTURE(path.filename().string());
    const auto c = Run(path);
    const ExplainInput in = InputOf(*c);
    const TensorNames tracer = NameModelState(in, nullptr);
    const TensorNames flow = NameModelState(in, nullptr, /*tracer_state=*/false);
    for (const auto& [key, name] : flow) {
      bool is_param = false;
      const std::string base = Base(name.text, &is_param);
      if (is_param) continue;  // parameters come from the module calls alike
      const auto it = tracer.find(key);
      CAPTURE(name.text);
      REQUIRE(it != tracer.end());
      bool tracer_param = false;
      CHECK(Base(it->second.text, &tracer_param) == base);
      CHECK(it->second.module == name.module);
      ++agreed;
    }
    // Where the run has an optimizer step the tracer saw, the rule names
    // each gradient and state the tracer does.
    if (path.filename().string().starts_with("e2e_adam") ||
        path.filename().string().starts_with("resnet_bn_sgd_step")) {
      for (const auto& [key, name] : tracer) {
        bool is_param = false;
        Base(name.text, &is_param);
        CAPTURE(name.text);
        if (!is_param) CHECK(flow.contains(key));
      }
    }
  }
  CHECK(agreed > 50);
}

TEST_CASE("names: torch 1.13 training steps name every gradient and state at the peak") {
  for (const char* name : {"e2e_adam", "e2e_fwd_bwd_sgd", "resnet18_sgd_step", "resnet_bn_sgd_step",
                           "e2e_sequential_set_to_none_false"}) {
    CAPTURE(name);
    const auto c = Run(kFixtures / (std::string(name) + ".trace.jsonl.gz"));
    const PeakReport r = ExplainPeak(*c, 1000);
    size_t named = 0;
    for (const LiveTensor& t : r.largest) {
      if (t.category != Category::kGradient && t.category != Category::kOptimizerState &&
          t.category != Category::kParameter)
        continue;
      CAPTURE(LiveName(t));
      CHECK(!t.name.empty());
      ++named;
    }
    CHECK(named > 0);
  }
}

TEST_CASE("names: the model's own names from the trace's header") {
  // The header lists each module parameter's storage under a name of the
  // model's, as memtl.save(..., model=model) writes them.
  for (const char* fixture : {"e2e_adam.trace.jsonl.gz", "torch2/e2e_adam.trace.jsonl.gz"}) {
    CAPTURE(fixture);
    std::string text = Gunzip(kFixtures / fixture);
    std::istringstream lines(text);
    std::string line, header, body;
    std::getline(lines, header);
    nlohmann::json model = nlohmann::json::array();
    int n = 0;
    while (std::getline(lines, line)) {
      body += line + "\n";
      if (line.find("\"module\"") == std::string::npos) continue;
      const auto rec = nlohmann::json::parse(line);
      for (const auto& p : rec["module"]["params"]) {
        nlohmann::json entry = {
            {"name", "net." + std::to_string(n++) + "." + p["name"].get<std::string>()},
            {"ptr", p["t"]["ptr"]}};
        if (p["t"].contains("dev"))
          entry["dev"] = p["t"]["dev"];
        else
          entry["dev"] = "cpu";
        model.push_back(entry);
      }
    }
    REQUIRE(n > 0);
    auto h = nlohmann::json::parse(header);
    h["model"] = model;
    const auto c = RunText(h.dump() + "\n" + body, fixture);
    const PeakReport r = ExplainPeak(*c, 1000);
    size_t exact = 0;
    for (const LiveTensor& t : r.largest) {
      if (t.category != Category::kParameter && t.category != Category::kGradient &&
          t.category != Category::kOptimizerState)
        continue;
      CAPTURE(t.name);
      CHECK(t.name.starts_with("net."));
      ++exact;
    }
    CHECK(exact >= 6);
    // The by-module table keeps the tracer's paths, and counts the layer's
    // weight, gradient and both moments under it: 4 x 64 KiB.
    const std::vector<MemoryTables> tables = ComputeTables(InputOf(*c));
    const auto& rows = tables[c->device].by_module;
    const auto it = std::find_if(rows.begin(), rows.end(), [](const MemoryRow& row) {
      return row.name == "Sequential_0 > Linear_1";
    });
    REQUIRE(it != rows.end());
    CHECK(it->self.at_peak >= 4 * 64 * 1024);
    CHECK(it->self.at_peak < 4 * 64 * 1024 + 64);  // and the step counts
  }
}

TEST_CASE("names: the model's names reach parameters only an optimizer reports") {
  // A torch.compile'd model: its layers are never called from Python, so
  // only the optimizer lists their parameters ("optimizer param N" without
  // the model's names).
  std::string text = Gunzip(kFixtures / "torch2" / "compiled_mlp_sgd.trace.jsonl.gz");
  std::istringstream lines(text);
  std::string line, header, body;
  std::getline(lines, header);
  nlohmann::json model = nlohmann::json::array();
  while (std::getline(lines, line)) {
    body += line + "\n";
    if (line.find("\"optimizer\"") == std::string::npos || !model.empty()) continue;
    const auto rec = nlohmann::json::parse(line);
    for (const auto& p : rec["optimizer"]["params"])
      model.push_back({{"name", "layers." + std::to_string(model.size()) + ".weight"},
                       {"ptr", p["t"]["ptr"]},
                       {"dev", p["t"]["dev"]}});
  }
  REQUIRE(model.size() == 4);
  const auto plain = RunText(text, "compiled");
  auto h = nlohmann::json::parse(header);
  h["model"] = model;
  const auto named = RunText(h.dump() + "\n" + body, "compiled");
  for (const auto* c : {plain.get(), named.get()}) {
    const PeakReport r = ExplainPeak(*c, 1000);
    size_t state = 0;
    for (const LiveTensor& t : r.largest) {
      if (t.category != Category::kParameter && t.category != Category::kGradient) continue;
      if (t.creator_name == "[memory]") continue;  // inductor's buffer, no parameter of the model
      CAPTURE(t.name);
      CHECK(t.name.starts_with(c == plain.get() ? "optimizer param " : "layers."));
      ++state;
    }
    CHECK(state == 8);
  }
}

// Golden files: `memtl graph` output for every recorded fixture, compared
// with tests/golden/<fixture>.graph. MEMTL_UPDATE_GOLDENS=1 rewrites them
// (review the diff; a golden changes only with a reason in the commit).
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/pipeline/analysis.h"
#include "core/timeline/timeline.h"
#include "export/export.h"
#include "passes/pass.h"

using namespace memtl;
namespace fs = std::filesystem;

namespace {

std::vector<fs::path> Fixtures() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(MEMTL_SOURCE_DIR) / "fixtures")) {
    const std::string name = e.path().filename().string();
    if (name.size() > 15 && name.find(".trace.jsonl") != std::string::npos) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string Stem(const fs::path& p) {
  std::string n = p.filename().string();
  return n.substr(0, n.find(".trace.jsonl"));
}

void CheckGolden(const std::string& name, const std::string& actual) {
  const fs::path golden = fs::path(MEMTL_SOURCE_DIR) / "tests" / "golden" / name;
  const char* update = std::getenv("MEMTL_UPDATE_GOLDENS");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream(golden, std::ios::binary) << actual;
    return;
  }
  std::ifstream in(golden, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "missing golden " << golden << " (run with MEMTL_UPDATE_GOLDENS=1)");
  std::stringstream ss;
  ss << in.rdbuf();
  CHECK_MESSAGE(ss.str() == actual, "golden " << golden << " differs; actual:\n" << actual);
}

}  // namespace

TEST_SUITE("golden") {
  TEST_CASE("golden: memtl graph on every fixture") {
    const auto fixtures = Fixtures();
    REQUIRE(fixtures.size() >= 10);
    for (const auto& f : fixtures) {
      CAPTURE(f);
      auto a = AnalyzeFile(f.string());
      REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.status().message()));
      CheckGolden(Stem(f) + ".graph", FormatDataFlow(a.value()->trace, *a.value()->graph));
    }
  }

  TEST_CASE("golden: memtl categories on every fixture, and the exports agree") {
    for (const auto& f : Fixtures()) {
      CAPTURE(f);
      auto r = AnalyzeFile(f.string());
      REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.status().message()));
      Analysis& a = *r.value();
      CategoryDict cats;
      RunAllPasses(PassInput{a.trace, *a.tree, *a.graph, *a.sizes}, cats);
      const auto timeline = BuildTimeline(*a.tree, *a.graph, *a.sizes, cats, a.diagnostics);
      CheckGolden(Stem(f) + ".categories", FormatTimeline(a.trace, timeline, cats));

      // The raw events summed per category equal the last row of sizes, and
      // the sizes' times never go backwards.
      auto device = ResolveDevice(a.trace, "");
      REQUIRE(device.ok());
      const auto raw = nlohmann::json::parse(RawJson(timeline, cats, device.value()));
      const auto sizes = nlohmann::json::parse(SizesJson(Coalesce(timeline, cats, device.value())));
      std::array<int64_t, 8> sum{};
      for (const auto& row : raw) sum[row[3].get<int>()] += row[2].get<int64_t>();
      REQUIRE(!sizes[1].empty());
      const auto& last = sizes[1].back();
      CHECK(last.size() == 9);
      CHECK(last[0].get<int64_t>() == 0);
      for (int c = 0; c < 8; ++c) CHECK(sum[c] == last[c + 1].get<int64_t>());
      CHECK(sizes[0].size() == sizes[1].size());
      for (size_t i = 1; i < sizes[0].size(); ++i)
        CHECK(sizes[0][i - 1].get<int64_t>() <= sizes[0][i].get<int64_t>());
    }
  }
}

TEST_CASE("determinism: the threaded file reader and the in-memory reader give the same analysis") {
  const auto path = fs::path(MEMTL_SOURCE_DIR) / "fixtures" / "resnet18_sgd_step.trace.jsonl.gz";
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  auto threaded = AnalyzeFile(path.string());
  auto inline_read = ReadTraceString(ss.str(), path.string());
  REQUIRE(threaded.ok());
  REQUIRE(inline_read.ok());
  auto single = Analyze(std::move(inline_read.value()), path.string());
  REQUIRE(single.ok());
  auto render = [](Analysis& a) {
    CategoryDict cats;
    RunAllPasses(PassInput{a.trace, *a.tree, *a.graph, *a.sizes}, cats);
    const auto timeline = BuildTimeline(*a.tree, *a.graph, *a.sizes, cats, a.diagnostics);
    return FormatDataFlow(a.trace, *a.graph) + RawJson(timeline, cats, 0);
  };
  CHECK(render(*threaded.value()) == render(*single.value()));
}

TEST_CASE("pipeline: dropping data after its last reader changes no timeline or export") {
  // The CLI drops what only the graph and passes read before the timeline,
  // and the rest before an export; the timeline and every export must be
  // what they are with everything kept, on every fixture.
  for (const auto& f : Fixtures()) {
    CAPTURE(f);
    auto kept = AnalyzeFile(f);
    auto dropped = AnalyzeFile(f);
    REQUIRE(kept.ok());
    REQUIRE(dropped.ok());
    Analysis& k = *kept.value();
    Analysis& d = *dropped.value();
    CategoryDict kc, dc;
    RunAllPasses(PassInput{k.trace, *k.tree, *k.graph, *k.sizes}, kc);
    ReleaseAfterGraph(d);
    RunAllPasses(PassInput{d.trace, *d.tree, *d.graph, *d.sizes}, dc);
    ReleaseAfterPasses(d);
    CHECK(d.trace.arg_kinds.empty());
    const auto kt = BuildTimeline(*k.tree, *k.graph, *k.sizes, kc, k.diagnostics);
    const auto dt = BuildTimeline(*d.tree, *d.graph, *d.sizes, dc, d.diagnostics);
    CHECK(FormatTimeline(k.trace, kt, kc) == FormatTimeline(d.trace, dt, dc));
    const auto device = ResolveDevice(k.trace, "");
    REQUIRE(device.ok());
    ReleaseAfterTimeline(d);
    CHECK(d.trace.events.empty());
    CHECK(d.graph == nullptr);
    CHECK(RawJson(kt, kc, device.value()) == RawJson(dt, dc, device.value()));
    std::string ks, ds;
    CoalescedSizes(kt, kc, device.value(), [&](const std::array<int64_t, 9>& row) {
      for (int64_t v : row) ks += std::to_string(v) + ",";
    });
    CoalescedSizes(dt, dc, device.value(), [&](const std::array<int64_t, 9>& row) {
      for (int64_t v : row) ds += std::to_string(v) + ",";
    });
    CHECK(ks == ds);
    // The HTML report reads the trace's devices, which stay.
    const fs::path dir =
        fs::temp_directory_path() / ("memtl_release_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const ExportInput ki{k.trace, kt, kc, k.diagnostics, "t", ""};
    const ExportInput di{d.trace, dt, dc, d.diagnostics, "t", ""};
    REQUIRE(ExportMemoryTimeline(ki, (dir / "k.html").string(), device.value()).ok());
    REQUIRE(ExportMemoryTimeline(di, (dir / "d.html").string(), device.value()).ok());
    auto slurp = [](const fs::path& p) {
      std::ifstream in(p, std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      return ss.str();
    };
    CHECK(slurp(dir / "k.html") == slurp(dir / "d.html"));
    fs::remove_all(dir);
  }
}

TEST_CASE("exports: the streamed files hold exactly the JSON texts") {
  const auto path = fs::path(MEMTL_SOURCE_DIR) / "fixtures" / "e2e_adam.trace.jsonl.gz";
  auto r = AnalyzeFile(path.string());
  REQUIRE(r.ok());
  Analysis& a = *r.value();
  CategoryDict cats;
  RunAllPasses(PassInput{a.trace, *a.tree, *a.graph, *a.sizes}, cats);
  const auto timeline = BuildTimeline(*a.tree, *a.graph, *a.sizes, cats, a.diagnostics);
  const ExportInput in{a.trace, timeline, cats, a.diagnostics, "t", ""};
  const fs::path dir = fs::temp_directory_path() / ("memtl_stream_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto read_all = [](const fs::path& p) {
    std::string cmd = "gzip -dcf '" + p.string() + "'";
    std::string out;
    FILE* f = popen(cmd.c_str(), "r");
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    pclose(f);
    return out;
  };
  REQUIRE(ExportMemoryTimeline(in, (dir / "a.raw.json.gz").string(), 0).ok());
  REQUIRE(ExportMemoryTimeline(in, (dir / "a.json.gz").string(), 0).ok());
  REQUIRE(ExportMemoryTimeline(in, (dir / "a.json").string(), 0).ok());
  CHECK(read_all(dir / "a.raw.json.gz") == RawJson(timeline, cats, 0));
  CHECK(read_all(dir / "a.json.gz") == SizesJson(Coalesce(timeline, cats, 0)));
  CHECK(read_all(dir / "a.json") == SizesJson(Coalesce(timeline, cats, 0)));

  // Large enough to stream in several chunks.
  std::vector<TimelineEvent> big(200000);
  for (size_t i = 0; i < big.size(); ++i) {
    big[i].time = 1795366842513838103 + static_cast<int64_t>(i) * 1000;
    big[i].action = i % 2 ? Action::kDestroy : Action::kCreate;
    big[i].bytes = static_cast<int64_t>(i % 977) * 4096;
  }
  const Trace empty;
  const ExportInput big_in{empty, big, cats, a.diagnostics, "big", ""};
  REQUIRE(ExportMemoryTimeline(big_in, (dir / "b.raw.json.gz").string(), 0).ok());
  REQUIRE(ExportMemoryTimeline(big_in, (dir / "b.json").string(), 0).ok());
  const std::string raw = RawJson(big, cats, 0);
  CHECK(raw.size() > (3u << 20));
  CHECK(read_all(dir / "b.raw.json.gz") == raw);
  CHECK(read_all(dir / "b.json") == SizesJson(Coalesce(big, cats, 0)));
  fs::remove_all(dir);
}

// Golden files: `memtl graph` output for every recorded fixture, compared
// with tests/golden/<fixture>.graph. MEMTL_UPDATE_GOLDENS=1 rewrites them
// (review the diff; a golden changes only with a reason in the commit).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/pipeline/analysis.h"

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
}

// Golden files: `memtl graph` and `memtl categories` output for every
// recorded fixture, compared with tests/golden/<fixture>.graph and
// .categories (torch 1.13's fixtures in fixtures/, torch 2.x's in
// fixtures/torch2/ with their goldens in tests/golden/torch2/, CUDA runs of
// torch 2.x in fixtures/cuda/ and tests/golden/cuda/), and the HTML report's plot of the
// resnet18 step drawn as text
// (.plot). MEMTL_UPDATE_GOLDENS=1 rewrites them (review the diff; a golden
// changes only with a reason in the commit).
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/explain/events.h"
#include "core/explain/peak.h"
#include "core/pipeline/analysis.h"
#include "core/timeline/timeline.h"
#include "export/export.h"
#include "passes/pass.h"
#include "tests/unit/png_decode.h"

using namespace memtl;
namespace fs = std::filesystem;

namespace {

// The recorded fixtures of both torch versions and the CUDA runs, sorted.
std::vector<fs::path> Fixtures() {
  std::vector<fs::path> out;
  const fs::path root = fs::path(MEMTL_SOURCE_DIR) / "fixtures";
  for (const fs::path& dir : {root, root / "torch2", root / "cuda"}) {
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      if (name.size() > 15 && name.find(".trace.jsonl") != std::string::npos)
        out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Whether a fixture was recorded with torch 2.x (fixtures/torch2/ and
// fixtures/cuda/): those have goldens of every dump.
bool IsTorch2(const fs::path& p) {
  const fs::path dir = p.parent_path().filename();
  return dir == "torch2" || dir == "cuda";
}

// The golden's name without its suffix: "NAME", "torch2/NAME" or "cuda/NAME".
std::string Stem(const fs::path& p) {
  std::string n = p.filename().string();
  n = n.substr(0, n.find(".trace.jsonl"));
  return IsTorch2(p) ? p.parent_path().filename().string() + "/" + n : n;
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void CheckGolden(const std::string& name, const std::string& actual) {
  const fs::path golden = fs::path(MEMTL_SOURCE_DIR) / "tests" / "golden" / name;
  const char* update = std::getenv("MEMTL_UPDATE_GOLDENS");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream(golden, std::ios::binary) << actual;
    return;
  }
  REQUIRE_MESSAGE(fs::exists(golden),
                  "missing golden " << golden << " (run with MEMTL_UPDATE_GOLDENS=1)");
  CHECK_MESSAGE(ReadFile(golden) == actual, "golden " << golden << " differs; actual:\n" << actual);
}

// A file through the whole pipeline, everything kept (with the tensors'
// shapes when `keep_shapes`, as memtl events reads it).
std::unique_ptr<Categorized> Pipeline(const fs::path& path, bool keep_shapes = false) {
  PipelineOptions options;
  options.read.keep_shapes = keep_shapes;
  auto r = RunPipeline(path.string(), options);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.status().message()));
  return std::move(r.value());
}

// The bytes of standard base64 text (no line breaks).
std::string FromBase64(std::string_view text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    const int v = value(c);
    if (v < 0) break;  // '=' padding ends the data
    acc = acc << 6 | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 255);
    }
  }
  return out;
}

// The plot as text for review: a line with its size and a hash of every
// pixel (so that any change of a pixel shows), then one character per cell
// of 16 x 24 pixels: the category whose colour (alpha 0.7 over white, as
// drawn) most of its pixels have, '#' where at least an eighth of it is ink
// (text, axes, ticks), '-' grid, ' ' white.
std::string PlotAsText(const Image& img) {
  struct Class {
    char c;
    int r, g, b;
  };
  auto over_white = [](int v) { return (v * 179 + 255 * 76 + 127) / 255; };
  std::vector<Class> classes = {{' ', 255, 255, 255}, {'-', 229, 229, 229}, {'#', 0, 0, 0}};
  const char letters[] = "POITAGDU";  // export order, as the legend lists them
  const int colours[8][3] = {{0, 100, 0}, {218, 165, 32}, {0, 0, 0},      {147, 112, 219},
                             {255, 0, 0}, {0, 0, 205},    {65, 105, 225}, {128, 128, 128}};
  for (int k = 0; k < 8; ++k) {
    classes.push_back({letters[k], over_white(colours[k][0]), over_white(colours[k][1]),
                       over_white(colours[k][2])});
  }
  auto classify = [&](uint32_t v) {
    const int r = (v >> 16) & 255, g = (v >> 8) & 255, b = v & 255;
    if (std::max({r, g, b}) < 96) return size_t{2};  // ink
    size_t best = 0;
    int best_d = 1 << 30;
    for (size_t i = 0; i < classes.size(); ++i) {
      const int d = (r - classes[i].r) * (r - classes[i].r) +
                    (g - classes[i].g) * (g - classes[i].g) +
                    (b - classes[i].b) * (b - classes[i].b);
      if (d < best_d) best_d = d, best = i;
    }
    return best;
  };
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a over the pixel words
  for (uint32_t v : img.px) {
    for (int s = 0; s < 32; s += 8) hash = (hash ^ ((v >> s) & 255)) * 0x100000001b3ull;
  }
  char head[160];
  std::snprintf(head, sizeof head, "plot %dx%d, FNV-1a 64 of its pixels %016llx\n", img.width,
                img.height, static_cast<unsigned long long>(hash));
  std::string out = head;
  constexpr int kCellW = 16, kCellH = 24;
  for (int cy = 0; cy + kCellH <= img.height; cy += kCellH) {
    std::string line;
    for (int cx = 0; cx + kCellW <= img.width; cx += kCellW) {
      std::vector<int> count(classes.size(), 0);
      for (int y = cy; y < cy + kCellH; ++y)
        for (int x = cx; x < cx + kCellW; ++x) ++count[classify(img.at(x, y))];
      size_t best = 0;
      for (size_t i = 1; i < count.size(); ++i)
        if (count[i] > count[best]) best = i;
      line += count[2] * 8 >= kCellW * kCellH ? '#' : classes[best].c;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace

TEST_SUITE("golden") {
  TEST_CASE("golden: memtl graph on every fixture") {
    const auto fixtures = Fixtures();
    REQUIRE(fixtures.size() >= 40);
    for (const auto& f : fixtures) {
      CAPTURE(f);
      auto a = AnalyzeFile(f.string());
      REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.status().message()));
      CheckGolden(Stem(f) + ".graph",
                  FormatDataFlow(a.value()->trace, a.value()->keys, *a.value()->graph));
    }
  }

  TEST_CASE("golden: memtl categories on every fixture, and the exports agree") {
    for (const auto& f : Fixtures()) {
      CAPTURE(f);
      const auto c = Pipeline(f);
      const Analysis& a = *c->analysis;
      const auto& cats = c->categories;
      const auto& timeline = c->timeline;
      CheckGolden(Stem(f) + ".categories", FormatTimeline(a.trace, a.keys, timeline, cats));

      // The raw events summed per category equal the last row of sizes, and
      // the sizes' times never go backwards.
      const auto raw = nlohmann::json::parse(RawJson(timeline, cats, c->device));
      const auto sizes = nlohmann::json::parse(SizesJson(Coalesce(timeline, cats, c->device)));
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

  TEST_CASE("golden: what each pass decides, on every torch 2.x fixture") {
    // The passes run one at a time, as RunAllPasses runs them; after each,
    // every (tensor, version) whose category it changed is listed under the
    // pass's label (tests/golden/torch2/NAME.passes). A pass whose rule
    // breaks changes its own section, whatever the later passes do.
    int checked = 0;
    for (const auto& f : Fixtures()) {
      if (!IsTorch2(f)) continue;
      CAPTURE(f);
      auto r = AnalyzeFile(f.string());
      REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.status().message()));
      const Analysis& a = *r.value();
      const PassInput in{a.trace, a.keys, *a.tree, *a.graph, *a.sizes};
      const KeyTable& kt = a.keys;
      CategoryDict cats;
      std::string text;
      for (const PassStep& step : RunAllPassesTraced(in, cats)) {
        text += std::string("== ") + step.label + "\n";
        for (const PassChange& c : step.changes) {
          text += "T" + std::to_string(kt[c.key].id.value()) + "(v" +
                  std::to_string(c.version.value()) + ")  " + std::string(CategoryName(c.before)) +
                  " -> " + std::string(CategoryName(c.after)) + "\n";
        }
        if (step.changes.empty()) text += "(no change)\n";
      }
      CheckGolden(Stem(f) + ".passes", text);
      ++checked;
    }
    CHECK(checked >= 20);
  }

  TEST_CASE("golden: memtl peak on every torch 2.x fixture; the peak adds up, on every fixture") {
    for (const auto& f : Fixtures()) {
      CAPTURE(f);
      const auto c = Pipeline(f);
      // Every live tensor listed: they and the untracked allocations are the
      // peak's bytes, and so are the categories; the peak is the plot's top.
      const PeakReport all = ExplainPeak(*c, SIZE_MAX);
      int64_t live = all.untracked_bytes, by_category = 0, top = 0;
      for (const LiveTensor& t : all.largest) live += t.bytes;
      for (const int64_t b : all.by_category) by_category += b;
      CoalescedRows(c->timeline, c->categories, c->device,
                    [&](int64_t, const std::array<int64_t, 9>& sizes) {
                      int64_t total = 0;
                      for (const int64_t b : sizes) total += b;
                      top = std::max(top, total);
                    });
      CHECK(all.largest.size() == all.live_tensors);
      CHECK(live == all.bytes);
      CHECK(by_category == all.bytes);
      CHECK(top == all.bytes);
      // torch 1.13's too: its gradients and state are named by data flow.
      CheckGolden(Stem(f) + ".peak", FormatPeak(ExplainPeak(*c, 10)));
    }
  }

  TEST_CASE("golden: memtl events on every torch 2.x fixture, a row per timeline event") {
    for (const auto& f : Fixtures()) {
      CAPTURE(f);
      const auto c = Pipeline(f, true);
      const Analysis& a = *c->analysis;
      const ExplainInput in{a.trace,       a.keys,      *a.tree,   *a.graph,
                            c->categories, c->timeline, c->device, &a.key_shapes};
      const std::string tsv = FormatEvents(in, EventsFormat::kTsv);
      // The header, then the timeline's events in its order, each with the
      // category `memtl categories` gives it.
      CHECK(static_cast<size_t>(std::count(tsv.begin(), tsv.end(), '\n')) ==
            c->timeline.size() + 1);
      std::string categories_column, from_dump;
      std::istringstream rows(tsv),
          dump(FormatTimeline(a.trace, a.keys, c->timeline, c->categories));
      std::string row, line;
      std::getline(rows, row);
      while (std::getline(rows, row) && std::getline(dump, line)) {
        size_t tab = 0;
        for (int k = 0; k < 6; ++k) tab = row.find('\t', tab) + 1;  // the category: column 7
        categories_column += row.substr(tab, row.find('\t', tab) - tab) + "\n";
        // The dump's category: after "  " following the bytes' " B".
        const size_t at = line.find(" B  ") + 4;
        const size_t end = a.trace.devices.size() > 1 ? line.rfind("  ") : line.size();
        from_dump += line.substr(at, end - at) + "\n";
      }
      CHECK(categories_column == from_dump);
      if (IsTorch2(f)) CheckGolden(Stem(f) + ".events", tsv);
    }
  }

  TEST_CASE("golden: the HTML report's plot of the resnet18 step") {
    // The plot is drawn by memtl from a committed glyph table, so its
    // pixels are the same on every machine (the PNG's bytes may not be,
    // with another zlib): the golden holds a hash of the pixels and the
    // plot drawn in characters.
    const auto c =
        Pipeline(fs::path(MEMTL_SOURCE_DIR) / "fixtures" / "resnet18_sgd_step.trace.jsonl.gz");
    const Analysis& a = *c->analysis;
    const fs::path dir = fs::temp_directory_path() / ("memtl_plot_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const ExportInput in{a.trace,       c->timeline,         c->categories,
                         a.diagnostics, "resnet18_sgd_step", ""};
    REQUIRE(ExportMemoryTimeline(in, (dir / "r.html").string(), 0).ok());
    const std::string html = ReadFile(dir / "r.html");
    fs::remove_all(dir);
    const std::string marker = "data:image/png;base64,";
    const size_t at = html.find(marker);
    REQUIRE(at != std::string::npos);
    const size_t end = html.find('\'', at);
    REQUIRE(end != std::string::npos);
    const Image img = DecodePng(
        FromBase64(std::string_view(html).substr(at + marker.size(), end - at - marker.size())));
    REQUIRE(img.width == 1600);
    REQUIRE(img.height == 960);
    CheckGolden("resnet18_sgd_step.plot", PlotAsText(img));
  }
}

TEST_CASE("determinism: the threaded file reader and the in-memory reader give the same analysis") {
  const auto path = fs::path(MEMTL_SOURCE_DIR) / "fixtures" / "resnet18_sgd_step.trace.jsonl.gz";
  auto threaded = AnalyzeFile(path.string());
  auto inline_read = ReadTraceString(ReadFile(path), path.string());
  REQUIRE(threaded.ok());
  REQUIRE(inline_read.ok());
  auto single = Analyze(std::move(inline_read.value()), path.string());
  REQUIRE(single.ok());
  auto render = [](std::unique_ptr<Analysis> analysis) {
    auto c = Categorize(std::move(analysis));
    REQUIRE(c.ok());
    const Analysis& a = *c.value()->analysis;
    return FormatDataFlow(a.trace, a.keys, *a.graph) +
           RawJson(c.value()->timeline, c.value()->categories, 0);
  };
  CHECK(render(std::move(threaded.value())) == render(std::move(single.value())));
}

TEST_CASE("pipeline: keeping only what an export reads changes no timeline or export") {
  // An export keeps only the trace's header, strings and devices of the
  // analysis (CategorizeForExport); the timeline and every export must be
  // what they are with everything kept, on every fixture.
  for (const auto& f : Fixtures()) {
    CAPTURE(f);
    const auto k = Pipeline(f);
    PipelineOptions export_only;
    export_only.explain_peak = 20;  // made before the analysis goes
    auto analysis = AnalyzeFile(f.string());
    REQUIRE(analysis.ok());
    auto d = CategorizeForExport(std::move(analysis.value()), export_only);
    REQUIRE(d.ok());
    CHECK(d.value()->timeline.size() == k->timeline.size());
    const Exportable& dc = *d.value();
    CHECK(dc.view.trace.events.empty());
    REQUIRE(dc.peak.has_value());
    const PeakReport kept_peak = ExplainPeak(*k, 20);
    CHECK(FormatPeak(*dc.peak) == FormatPeak(kept_peak));
    CHECK(dc.device == k->device);
    CHECK(RawJson(k->timeline, k->categories, k->device) ==
          RawJson(dc.timeline, dc.categories, dc.device));
    std::string ks, ds;
    CoalescedSizes(k->timeline, k->categories, k->device, [&](const std::array<int64_t, 9>& row) {
      for (int64_t v : row) ks += std::to_string(v) + ",";
    });
    CoalescedSizes(dc.timeline, dc.categories, dc.device, [&](const std::array<int64_t, 9>& row) {
      for (int64_t v : row) ds += std::to_string(v) + ",";
    });
    CHECK(ks == ds);
    // The HTML report reads the trace's devices, which stay.
    const fs::path dir =
        fs::temp_directory_path() / ("memtl_release_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    ExportInput ki{k->analysis->trace,       k->timeline, k->categories,
                   k->analysis->diagnostics, "t",         ""};
    ExportInput di{dc.view.trace, dc.timeline, dc.categories, dc.view.diagnostics, "t", ""};
    ki.peak = &kept_peak;  // the report's peak section, made from both
    di.peak = &*dc.peak;
    REQUIRE(ExportMemoryTimeline(ki, (dir / "k.html").string(), k->device).ok());
    REQUIRE(ExportMemoryTimeline(di, (dir / "d.html").string(), dc.device).ok());
    CHECK(ReadFile(dir / "k.html") == ReadFile(dir / "d.html"));
    fs::remove_all(dir);
  }
}

// An export's result holds none of the analysis's stages (issue 36: the
// analysis it kept was hollow, its graph null, and only a comment kept the
// explaining outputs from it): they cannot be reached once they went.
template <typename T>
concept HoldsTheStages = requires(const T& t) {
  t.analysis->graph;
};
static_assert(!HoldsTheStages<Exportable>);
static_assert(HoldsTheStages<Categorized>);

TEST_CASE("exports: the streamed files hold exactly the JSON texts") {
  const auto c = Pipeline(fs::path(MEMTL_SOURCE_DIR) / "fixtures" / "e2e_adam.trace.jsonl.gz");
  const Analysis& a = *c->analysis;
  const auto& timeline = c->timeline;
  const auto& cats = c->categories;
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

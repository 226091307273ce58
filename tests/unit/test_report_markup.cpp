// Markup from a trace in the HTML report (docs/reliability.md, "Markup from
// a trace"): names that carry "<!--<script>" or "</script>" leave no "<" in
// the data block, the policy lets only the page's own scripts run (by their
// SHA-256, checked here with coreutils' sha256sum, not memtl's build), a
// trace with more devices than the report draws names how many it left out,
// and the flame graph's stacks (folded.h, report.h's ReportFlame) add up to
// each device's peak.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/explain/report.h"
#include "core/pipeline/analysis.h"
#include "core/read/memtl/trace_reader.h"
#include "export/export.h"
#include "export/html_util.h"
#include "tests/unit/trace_text.h"

using namespace memtl;
namespace fs = std::filesystem;

namespace {

constexpr const char* kHostile = "<!--<script>";

std::unique_ptr<Categorized> CategorizedOf(const std::string& text, const std::string& name) {
  auto trace = ReadTraceString(text, name);
  REQUIRE_MESSAGE(trace.ok(), (trace.ok() ? "" : trace.status().message()));
  auto analysis = Analyze(std::move(trace.value()), name);
  REQUIRE(analysis.ok());
  auto categorized = Categorize(std::move(analysis.value()));
  REQUIRE(categorized.ok());
  return std::move(categorized.value());
}

// The HTML report of `c` (with its analysis' report, as the CLI writes it) for
// `device`, from a trace named `source`.
std::string HtmlOf(const Categorized& c, const std::string& source, DeviceIndex device) {
  const Analysis& a = *c.analysis;
  // The report is made for the device exported, as the pipeline makes it
  // for the device --device resolves to.
  const ExplainInput ein{a.trace, a.keys, *a.tree, *a.graph, c.categories, c.timeline, device};
  const Report report = MakeReport(ein, 20);
  ExportInput in{a.trace, c.timeline, c.categories, a.diagnostics, source, ""};
  in.report = &report;
  const fs::path path =
      fs::temp_directory_path() / ("memtl_markup_" + std::to_string(::getpid()) + ".html");
  const Status st = ExportMemoryTimeline(in, path.string(), device);
  REQUIRE_MESSAGE(st.ok(), st.message());
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  fs::remove(path);
  return text.str();
}

struct Script {
  std::string open;  // the start tag
  std::string text;
};

// The page's script elements, each up to the first "</script" after it:
// where the HTML parser would end it if no "<!--" were inside.
std::vector<Script> Scripts(const std::string& html) {
  std::vector<Script> out;
  for (size_t at = html.find("<script"); at != std::string::npos;
       at = html.find("<script", at + 1)) {
    const size_t open_end = html.find('>', at);
    REQUIRE(open_end != std::string::npos);
    const size_t close = html.find("</script", open_end);
    REQUIRE(close != std::string::npos);
    out.push_back(
        {html.substr(at, open_end + 1 - at), html.substr(open_end + 1, close - open_end - 1)});
    at = close;
  }
  return out;
}

std::string Hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (const unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string FromBase64(const std::string& s) {
  static const std::string alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  unsigned bits = 0;
  int have = 0;
  for (const char c : s) {
    if (c == '=') break;
    const size_t v = alphabet.find(c);
    REQUIRE(v != std::string::npos);
    bits = (bits << 6) | static_cast<unsigned>(v);
    have += 6;
    if (have >= 8) {
      have -= 8;
      out += static_cast<char>((bits >> have) & 0xff);
    }
  }
  return out;
}

// The SHA-256 of `text` in hex, as coreutils' sha256sum computes it.
std::string Sha256Hex(const std::string& text) {
  const fs::path path =
      fs::temp_directory_path() / ("memtl_markup_script_" + std::to_string(::getpid()));
  std::ofstream(path, std::ios::binary) << text;
  FILE* p = ::popen(("sha256sum '" + path.string() + "'").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[65] = {};
  const size_t n = std::fread(buf, 1, 64, p);
  ::pclose(p);
  fs::remove(path);
  REQUIRE(n == 64);
  return std::string(buf, 64);
}

// The sources of the policy's script-src.
std::vector<std::string> ScriptSources(const std::string& html) {
  const std::string meta = "<meta http-equiv=\"Content-Security-Policy\" content=\"";
  const size_t at = html.find(meta);
  REQUIRE(at != std::string::npos);
  CHECK(html.find(meta, at + 1) == std::string::npos);
  const std::string policy =
      html.substr(at + meta.size(), html.find('"', at + meta.size()) - at - meta.size());
  const size_t src = policy.find("script-src ");
  REQUIRE(src != std::string::npos);
  std::istringstream words(policy.substr(src + 11, policy.find(';', src) - src - 11));
  std::vector<std::string> out;
  for (std::string w; words >> w;) out.push_back(w);
  return out;
}

// Every script the page runs is listed by its hash, and nothing else is.
void CheckPolicy(const std::string& html) {
  std::set<std::string> listed;
  for (const std::string& s : ScriptSources(html)) {
    REQUIRE_MESSAGE(s.rfind("'sha256-", 0) == 0, s);
    REQUIRE(s.back() == '\'');
    listed.insert(Hex(FromBase64(s.substr(8, s.size() - 9))));
  }
  std::set<std::string> run;
  for (const Script& s : Scripts(html)) {
    if (s.open.find("type=\"application/json\"") != std::string::npos) continue;
    CHECK(s.open == "<script>");
    run.insert(Sha256Hex(s.text));
  }
  CHECK(!run.empty());
  CHECK(listed == run);
}

// The text of the data block, checked to leave the parser nothing: no "<"
// at all (nor ">", "&").
nlohmann::json DataBlock(const std::string& html) {
  for (const Script& s : Scripts(html)) {
    if (s.open != "<script id=\"memtl-data\" type=\"application/json\">") continue;
    CHECK(s.text.find_first_of("<>&") == std::string::npos);
    return nlohmann::json::parse(s.text);
  }
  FAIL("no data block");
  return {};
}

}  // namespace

TEST_CASE("report markup: names from the trace cannot end or open a script") {
  using namespace memtl::test;
  const std::string empty = R"(null,{"int":6},null,null,{"bool":false},null)";
  // A step, a user scope and a module whose names carry markup, around
  // allocations on two devices: they reach the chart's data (the steps,
  // the module of the op at each point) and the tables.
  const std::string module = std::string("Net") + kHostile + "_0";
  const std::string text =
      Header() +
      Op(0, -1, std::string("ProfilerStep#1") + kHostile, 1000000, 5000000, "", "user_scope") +
      Op(1, 0, std::string("block ") + kHostile + "</script><script>alert(1)</script>", 1050000,
         4000000, "", "user_scope") +
      R"({"k":"py","i":2,"p":1,"name":"nn.Module: )" + module +
      R"(","t0":1080000,"t1":2500000,"tid":1})" + "\n" +
      Op(3, 2, "aten::empty", 1100000, 1200000, empty) + Alloc(4, 3, 1150000, 0x1000, 4096, "cpu") +
      Op(5, 2, "aten::empty", 2100000, 2200000, empty) +
      Alloc(6, 5, 2150000, 0x2000, 1 << 20, "cuda:0") + Alloc(7, 1, 3000000, 0x1000, -4096, "cpu") +
      Alloc(8, 0, 4500000, 0x2000, -(1 << 20), "cuda:0");
  const std::string source = std::string("run ") + kHostile + "</script>\xe2\x80\xa8.trace";
  const auto c = CategorizedOf(text, source);
  const std::string html = HtmlOf(*c, source, c->device);

  const nlohmann::json data = DataBlock(html);
  // The names are all there, as they were: the escapes are the same JSON.
  CHECK(data["source"] == source);
  REQUIRE(data["steps"].size() == 1);
  CHECK(data["steps"][0][0] == std::string("ProfilerStep#1") + kHostile);
  REQUIRE(data["devices"].size() == 2);
  for (const auto& dev : data["devices"]) {
    REQUIRE(dev["ops"].size() == 1);
    CHECK(dev["ops"][0][1] == module);
    // The flame graph's stacks hold every byte of the peak.
    int64_t bytes = 0;
    for (const auto& stack : dev["flame"]["stacks"]) bytes += stack[0].get<int64_t>();
    CHECK(bytes == dev["peak"]["bytes"].get<int64_t>());
  }
  // The page's four elements only (the data, dygraphs, report.js,
  // flame.js): none from a name, which the page shows as text.
  const std::vector<Script> scripts = Scripts(html);
  CHECK(scripts.size() == 4);
  size_t closes = 0;
  for (size_t at = html.find("</script"); at != std::string::npos;
       at = html.find("</script", at + 1))
    ++closes;
  CHECK(closes == scripts.size());
  CHECK(html.find("<!--") == std::string::npos);
  CHECK(html.find("&lt;!--&lt;script&gt;") != std::string::npos);
  CheckPolicy(html);
}

TEST_CASE("report markup: the data block's one rule") {
  CHECK(html::ScriptJson(R"({"a":"</script><!--<script>&","b":[1,2]})") ==
        R"({"a":"\u003c/script\u003e\u003c!--\u003cscript\u003e\u0026","b":[1,2]})");
  CHECK(html::ScriptJson("[\"\xe2\x80\xa8\xe2\x80\xa9\xe2\x80\xaa\"]") ==
        "[\"\\u2028\\u2029\xe2\x80\xaa\"]");
  const std::string json = R"({"a":"x<y>z&w","b":"\u2028"})";
  CHECK(nlohmann::json::parse(html::ScriptJson(json)) == nlohmann::json::parse(json));
}

TEST_CASE("report markup: the diff, ranks and whatif pages run only their hashed script") {
  // The diff page of a trace with itself: its names escaped, its policy
  // listing report.js alone, which it runs.
  Summary a;
  a.trace = std::string("a ") + kHostile + ".trace";
  Summary b = a;
  b.trace = "b</script>.trace";
  const std::string diff = DiffHtml(a, b);
  CheckPolicy(diff);
  DataBlock(diff);
  CHECK(diff.find(kHostile) == std::string::npos);

  WhatIfReport w;
  w.trace = kHostile;
  w.changes = {std::string("--checkpoint ") + kHostile};
  const std::string whatif = WhatIfHtml(w);
  CheckPolicy(whatif);
  DataBlock(whatif);
  CHECK(whatif.find(kHostile) == std::string::npos);

  const std::string ranks = RanksHtml(RanksReport{});
  CheckPolicy(ranks);
  DataBlock(ranks);
}

TEST_CASE("report markup: a trace with many devices draws the highest peaks and says so") {
  using namespace memtl::test;
  const std::string empty = R"(null,{"int":6},null,null,{"bool":false},null)";
  // kReportMaxDevices + 5 devices, device d peaking at (d + 1) KiB; cuda:0,
  // the lowest, is the one exported.
  const size_t n = kReportMaxDevices + 5;
  std::string text = Header() + Op(0, -1, "ProfilerStep#1", 1000, 900000, "", "user_scope");
  int i = 1;
  for (size_t d = 0; d < n; ++d) {
    const std::string dev = "cuda:" + std::to_string(d);
    text += Op(i, 0, "aten::empty", 1000 + 10 * static_cast<long>(d),
               1005 + 10 * static_cast<long>(d), empty);
    text += Alloc(i + 1, i, 1001 + 10 * static_cast<long>(d), 0x1000 + 0x100 * d,
                  1024 * static_cast<long>(d + 1), dev.c_str());
    i += 2;
  }
  const auto c = CategorizedOf(text, "many.trace");
  DeviceIndex first = 0;
  while (c->analysis->trace.devices[first].name != "cuda:0") ++first;
  const std::string html = HtmlOf(*c, "many.trace", first);

  const nlohmann::json data = DataBlock(html);
  REQUIRE(data["devices"].size() == kReportMaxDevices);
  std::set<std::string> drawn;
  for (const auto& dev : data["devices"]) drawn.insert(dev["name"].get<std::string>());
  // The exported device, and the others with the highest peaks.
  CHECK(drawn.count("cuda:0") == 1);
  for (size_t d = n - (kReportMaxDevices - 1); d < n; ++d)
    CHECK(drawn.count("cuda:" + std::to_string(d)) == 1);
  CHECK(data["devices"][data["selected"].get<size_t>()]["name"] == "cuda:0");
  size_t sections = 0, options = 0;
  for (size_t at = html.find("<section class=\"device\""); at != std::string::npos;
       at = html.find("<section class=\"device\"", at + 1))
    ++sections;
  for (size_t at = html.find("<option "); at != std::string::npos;
       at = html.find("<option ", at + 1))
    ++options;
  CHECK(sections == kReportMaxDevices);
  CHECK(options == kReportMaxDevices);
  CHECK(html.find("5 more devices are not drawn") != std::string::npos);
  CheckPolicy(html);
}

TEST_CASE("report: the flame graph's stacks are the folded lines, the smallest summed") {
  // A tensor whose name carries the folded format's separators, one made
  // by an op in a module, and untracked bytes.
  PeakReport r;
  r.bytes = 4096 + 1024 + 100;
  LiveTensor named;
  named.bytes = 4096;
  named.category = Category::kParameter;
  named.creator = 3;
  named.name = "Net_0 > Linear;1 .weight\nx";
  LiveTensor made;
  made.bytes = 1024;
  made.category = Category::kActivation;
  made.creator = 5;
  made.module = "Net_0";
  made.ops = {"aten::linear", "aten::addmm"};
  r.largest = {named, made};
  r.live_tensors = 2;
  r.untracked_bytes = 100;
  const std::vector<FoldedStack> stacks = FoldPeak(r);
  REQUIRE(stacks.size() == 3);
  CHECK(stacks[0].frames == std::vector<std::string>{"(no tensor identity)", "unknown"});
  CHECK(stacks[1].frames ==
        std::vector<std::string>{"Net_0", "Linear,1", ".weight x", "PARAMETER"});
  CHECK(stacks[2].frames ==
        std::vector<std::string>{"Net_0", "aten::linear", "aten::addmm", "ACTIVATION"});
  CHECK(stacks[2].category == ExportIndex(Category::kActivation));
  CHECK(FoldedPeak(r) ==
        "(no tensor identity);unknown 100\nNet_0;Linear,1;.weight x;PARAMETER 4096\n"
        "Net_0;aten::linear;aten::addmm;ACTIVATION 1024\n");

  // Kept: the two largest, in their order; the rest summed per category
  // under one frame, so the bytes still add up.
  const std::vector<FoldedStack> kept = ReportFlame(stacks, 2);
  REQUIRE(kept.size() == 3);
  CHECK(kept[0].bytes == 4096);
  CHECK(kept[1].bytes == 1024);
  CHECK(kept[2].frames == std::vector<std::string>{"(1 smaller stacks)", "unknown"});
  CHECK(kept[2].bytes == 100);
  CHECK(kept[2].category == kUnknownIndex);
  CHECK(ReportFlame(stacks).size() == 3);

  // A report of the largest tensor alone: the other two by category.
  r.largest = {named};
  r.live_tensors = 3;
  r.by_category[ExportIndex(Category::kParameter)] = 4096 + 512;
  r.by_category[ExportIndex(Category::kActivation)] = 1024;
  r.by_category[kUnknownIndex] = 100;
  CHECK(FoldedPeak(r) ==
        "(2 smaller tensors);ACTIVATION 1024\n(2 smaller tensors);PARAMETER 512\n"
        "(no tensor identity);unknown 100\nNet_0;Linear,1;.weight x;PARAMETER 4096\n");

  // No tensors (a raw timeline): a stack per category at the peak.
  PeakReport raw;
  raw.by_category[0] = 10;
  raw.by_category[4] = 20;
  CHECK(FoldedPeak(raw) == "ACTIVATION 20\nPARAMETER 10\n");
}

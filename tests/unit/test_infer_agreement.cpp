// How far the categories inferred for a Kineto trace (core/infer/) agree
// with the categories memtl proves from its own trace of the same run
// (fixtures/et/: the Kineto trace and memtl's trace were recorded from one
// profile, so both hold the same allocator events). Allocations are
// matched by (device, address, bytes, occurrence); each one's proven
// category is its key's at version 0 (what the timeline's create counts),
// unknown for an allocation with no tensor. Byte-weighted, per category:
// recall (of the bytes proven C, the share inferred C) and precision (of
// the bytes inferred C, the share proven C). The figures are printed
// (doctest -s); the checks hold the inference to a floor on them.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/pipeline/analysis.h"
#include "core/read/common/format.h"
#include "core/read/kineto/kineto_reader.h"

using namespace memtl;

namespace {

const std::string kFixtures = std::string(MEMTL_SOURCE_DIR) + "/fixtures/et/";

// bytes[proven export index][inferred export index]
using Confusion = std::array<std::array<int64_t, 8>, 8>;

struct Matched {
  Confusion bytes{};
  int64_t unmatched = 0;                  // bytes of Kineto allocations memtl's trace lacks
  std::array<int64_t, 8> unmatched_as{};  // by inferred export index
};

using AllocKey = std::tuple<std::string, uint64_t, int64_t, int>;

// Per allocation record of an allocation: its (device, address, bytes, n-th
// such) key, counted in time order (the two traces' clocks differ, and
// their record orders differ where two threads overlap, on a GPU).
std::vector<AllocKey> Keys(const Trace& t) {
  std::vector<AllocKey> keys(t.allocs.size());
  std::vector<std::pair<int64_t, uint32_t>> by_time;
  for (uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.events[e].kind == EventKind::kAlloc)
      by_time.emplace_back(t.event_t0[e], t.events[e].payload);
  }
  std::stable_sort(by_time.begin(), by_time.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::map<std::tuple<std::string, uint64_t, int64_t>, int> seen;
  for (const auto& [time, i] : by_time) {
    const AllocInfo& a = t.allocs[i];
    if (a.bytes <= 0) continue;
    const std::string& dev = t.devices[a.device].name;
    const int n = seen[{dev, t.alloc_ptrs[i], a.bytes}]++;
    keys[i] = {dev, t.alloc_ptrs[i], a.bytes, n};
  }
  return keys;
}

Matched Match(const std::string& name) {
  Matched m;
  const std::string memtl_path = kFixtures + name + ".trace.jsonl.gz";
  const std::string kineto_path = kFixtures + name + ".kineto.json.gz";
  // Proven: memtl's own trace, its addresses read apart (the pipeline frees them).
  auto raw = ReadTraceFile(memtl_path);
  REQUIRE(raw.ok());
  const std::vector<AllocKey> proven_keys = Keys(raw.value());
  auto proven = RunPipeline(memtl_path);
  REQUIRE(proven.ok());
  const Analysis& pa = *proven.value()->analysis;
  std::map<AllocKey, int> proven_of;
  for (size_t i = 0; i < proven_keys.size(); ++i) {
    if (pa.trace.allocs[i].bytes <= 0) continue;
    const KeySlot key = pa.keys.SlotOfAlloc(static_cast<uint32_t>(i));
    proven_of[proven_keys[i]] =
        key.valid() ? ExportIndex(proven.value()->categories.Get(key, Version(0))) : kUnknownIndex;
  }
  // Inferred: the Kineto trace, likewise.
  auto opened = OpenInput(kineto_path);
  REQUIRE(opened.ok());
  auto kraw = ReadKinetoInput(std::move(opened.value()));
  REQUIRE(kraw.ok());
  const std::vector<AllocKey> kineto_keys = Keys(kraw.value().trace);
  auto inferred = RunPipeline(kineto_path);
  REQUIRE(inferred.ok());
  const Analysis& ka = *inferred.value()->analysis;
  REQUIRE(ka.inferred.category.size() == kineto_keys.size());
  for (size_t i = 0; i < kineto_keys.size(); ++i) {
    const int64_t bytes = ka.trace.allocs[i].bytes;
    if (bytes <= 0 || ka.inferred.pair[i] != kNone32) continue;
    const int got = ExportIndex(ka.inferred.Get(static_cast<uint32_t>(i)));
    const auto it = proven_of.find(kineto_keys[i]);
    if (it == proven_of.end()) {
      m.unmatched += bytes;
      m.unmatched_as[got] += bytes;
      continue;
    }
    m.bytes[it->second][got] += bytes;
  }
  return m;
}

std::string Table(const Confusion& c) {
  std::string out = "category            proven B  recall   inferred B  precision  unknown\n";
  char buf[160];
  for (int k = 0; k < 8; ++k) {
    if (k == kUnknownIndex) continue;
    int64_t proven = 0, inferred = 0;
    for (int j = 0; j < 8; ++j) {
      proven += c[k][j];
      inferred += c[j][k];
    }
    if (proven == 0 && inferred == 0) continue;
    std::snprintf(
        buf, sizeof buf, "%-16s %11lld  %6.1f%%  %11lld  %8.1f%%  %6.1f%%\n",
        std::string(ExportCategoryName(k)).c_str(), static_cast<long long>(proven),
        proven ? 100.0 * static_cast<double>(c[k][k]) / static_cast<double>(proven) : 0.0,
        static_cast<long long>(inferred),
        inferred ? 100.0 * static_cast<double>(c[k][k]) / static_cast<double>(inferred) : 0.0,
        proven ? 100.0 * static_cast<double>(c[k][kUnknownIndex]) / static_cast<double>(proven)
               : 0.0);
    out += buf;
  }
  std::string unknown;
  for (int j = 0; j < 8; ++j) {
    if (j != kUnknownIndex && c[kUnknownIndex][j] != 0)
      unknown +=
          " " + std::string(ExportCategoryName(j)) + " " + std::to_string(c[kUnknownIndex][j]);
  }
  if (!unknown.empty()) out += "proven unknown, inferred as:" + unknown + "\n";
  std::string wrong;
  for (int k = 0; k < 8; ++k)
    for (int j = 0; j < 8; ++j)
      if (k != j && k != kUnknownIndex && j != kUnknownIndex && c[k][j] != 0)
        wrong += " " + std::string(ExportCategoryName(k)) + "->" +
                 std::string(ExportCategoryName(j)) + " " + std::to_string(c[k][j]);
  if (!wrong.empty()) out += "wrong:" + wrong + "\n";
  return out;
}

}  // namespace

TEST_CASE("infer: agreement with memtl's own traces of the same runs") {
  const char* runs[] = {"e2e_fwd_bwd_sgd",     "e2e_adam",
                        "e2e_inference",       "convnet_channels_last",
                        "optimizers_indexing", "cuda/mlp_sgd_momentum",
                        "cuda/sdpa_attention", "cuda/convnet_bn_sgd"};
  Confusion all{};
  for (const char* run : runs) {
    const Matched m = Match(run);
    std::string unmatched;
    for (int j = 0; j < 8; ++j) {
      if (m.unmatched_as[j] != 0)
        unmatched +=
            " " + std::string(ExportCategoryName(j)) + " " + std::to_string(m.unmatched_as[j]);
    }
    const std::string text = std::string(run) + " (unmatched " + std::to_string(m.unmatched) +
                             " B, inferred as:" + unmatched + ")\n" + Table(m.bytes);
    MESSAGE(text);
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 8; ++j) all[i][j] += m.bytes[i][j];
  }
  const std::string text = "all runs\n" + Table(all);
  MESSAGE(text);
  // No byte proven one category is inferred another (unknown aside), and
  // the categories the rules target are found nearly whole.
  int64_t wrong = 0, inferred = 0;
  for (int k = 0; k < 8; ++k) {
    for (int j = 0; j < 8; ++j) {
      if (j == kUnknownIndex) continue;
      inferred += all[k][j];
      if (k != j && k != kUnknownIndex) wrong += all[k][j];
    }
  }
  CHECK(wrong * 1000 <= inferred);
  for (const int k : {0, 1, 3, 4, 5, 6}) {
    int64_t proven = 0;
    for (int j = 0; j < 8; ++j) proven += all[k][j];
    if (proven == 0) continue;
    INFO(ExportCategoryName(k));
    CHECK(all[k][k] * 100 >= proven * 95);
  }
}

namespace {

// Per (device name, export index): bytes.
using ByDevice = std::map<std::pair<std::string, int>, int64_t>;

// What memtl's own trace proves of the memory from before the profile that
// the profile never frees: its tensors, by device and category.
ByDevice ProvenBeforeProfile(const std::string& path) {
  ByDevice out;
  auto proven = RunPipeline(path);
  REQUIRE(proven.ok());
  const Categorized& c = *proven.value();
  std::map<uint32_t, bool> destroyed;
  for (const TimelineEvent& te : c.timeline)
    if (te.has_key() && te.action == Action::kDestroy) destroyed[te.slot] = true;
  for (const TimelineEvent& te : c.timeline) {
    if (!te.has_key() || te.action != Action::kPreexisting || destroyed.count(te.slot)) continue;
    const int k = ExportIndex(c.categories.Get(te.key(), te.version()));
    out[{c.analysis->trace.devices[te.device].name, k}] += te.bytes;
  }
  return out;
}

// What the inference makes of the Kineto trace's memory from before the
// profile, by device and category.
ByDevice InferredBeforeProfile(const std::string& path) {
  ByDevice out;
  auto opened = OpenInput(path);
  REQUIRE(opened.ok());
  auto raw = ReadKinetoInput(std::move(opened.value()));
  REQUIRE(raw.ok());
  const std::vector<uint64_t> ptrs = raw.value().trace.alloc_ptrs;
  auto inferred = RunPipeline(path);
  REQUIRE(inferred.ok());
  const Analysis& a = *inferred.value()->analysis;
  REQUIRE(ptrs.size() == a.trace.allocs.size());
  for (size_t i = 0; i < ptrs.size(); ++i) {
    if (!PreProfilePartOf(ptrs[i], a.trace.devices.size())) continue;
    const int k = ExportIndex(a.inferred.Get(static_cast<uint32_t>(i)));
    out[{a.trace.devices[a.trace.allocs[i].device].name, k}] += a.trace.allocs[i].bytes;
  }
  return out;
}

}  // namespace

// The memory from before the profile is blocks, not tensors, in a Kineto
// trace: the inference names parts of it by their bytes
// (core/read/kineto/kineto_pre_profile.h), so they are compared by bytes
// per device and category with the tensors memtl's own trace shows from
// before the profile and never frees. Recall: of the bytes proven C, the
// share inferred C (at most the smaller of the two, per device); precision:
// of the bytes inferred C, the share proven C.
TEST_CASE("infer: memory from before the profile, split by category") {
  const char* runs[] = {"e2e_fwd_bwd_sgd",     "e2e_adam",
                        "e2e_inference",       "convnet_channels_last",
                        "optimizers_indexing", "cuda/mlp_sgd_momentum",
                        "cuda/sdpa_attention", "cuda/convnet_bn_sgd"};
  // proven_held: proven on a device where the Kineto trace holds memory
  // from before the profile at all (a CPU trace's totals often start at
  // the profile: then nothing is there to split).
  std::array<int64_t, 8> proven{}, proven_held{}, inferred{}, both{};
  std::string text = "memory from before the profile (bytes: proven / inferred)\n";
  for (const char* run : runs) {
    const ByDevice p = ProvenBeforeProfile(kFixtures + run + ".trace.jsonl.gz");
    const ByDevice i = InferredBeforeProfile(kFixtures + run + ".kineto.json.gz");
    text += std::string(run) + ":";
    std::map<std::pair<std::string, int>, std::pair<int64_t, int64_t>> rows;
    for (const auto& [key, bytes] : p) rows[key].first += bytes;
    std::map<std::string, bool> held;
    for (const auto& [key, bytes] : i) {
      rows[key].second += bytes;
      held[key.first] = true;
    }
    for (const auto& [key, pi] : rows) {
      const int k = key.second;
      if (k == kUnknownIndex) continue;
      proven[k] += pi.first;
      if (held.count(key.first)) proven_held[k] += pi.first;
      inferred[k] += pi.second;
      both[k] += std::min(pi.first, pi.second);
      text += " " + key.first + " " + std::string(ExportCategoryName(k)) + " " +
              std::to_string(pi.first) + "/" + std::to_string(pi.second);
    }
    text += "\n";
  }
  for (const int k : {0, 1}) {  // PARAMETER, OPTIMIZER_STATE
    auto pct = [](int64_t a, int64_t b) {
      return b ? 100.0 * static_cast<double>(a) / static_cast<double>(b) : 0.0;
    };
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "%-16s proven %lld (%lld where memory is held), inferred %lld: recall %.1f%% "
                  "(%.1f%%), precision %.1f%%\n",
                  std::string(ExportCategoryName(k)).c_str(), static_cast<long long>(proven[k]),
                  static_cast<long long>(proven_held[k]), static_cast<long long>(inferred[k]),
                  pct(both[k], proven[k]), pct(both[k], proven_held[k]), pct(both[k], inferred[k]));
    text += buf;
    INFO(ExportCategoryName(k));
    CHECK(both[k] * 1000 >= inferred[k] * 999);
    CHECK(both[k] * 100 >= proven_held[k] * 95);
  }
  MESSAGE(text);
}

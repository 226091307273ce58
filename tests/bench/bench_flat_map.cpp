// memtl's hash maps (core/model/flat_map.h) against absl::flat_hash_map
// (and std::unordered_map, for scale) on the key streams memtl puts on them,
// taken from a trace read by memtl's reader: time (best of RUNS, the maps
// taking turns) and the heap each holds at its largest (operator new is
// counted, so a map's growth, old and new table together, is included).
// docs/performance.md ("Libraries measured") has the figures and the
// decision. Built on request only (tests/bench/CMakeLists.txt, needs Debian
// libabsl-dev):
//   cmake --build build --target bench_flat_map
//   build/tests/bench/bench_flat_map TRACE.jsonl.gz [RUNS]
//
// The workloads, as the pipeline runs them:
// - live allocations: per allocation event in event order, an allocation
//   inserts its (pointer, device) with a 4-byte value, a free looks it up and
//   erases it (the allocation checks; the size map's walk of untracked
//   allocations is the same stream with 1-byte values);
// - storage pointers: per tensor observation (by op, in event order, then
//   the rest) and allocation event, insert-if-absent of its (pointer,
//   device) and erase on a free (identity's step 2, Flattener);
// - partial pointers: the storage pointers of torch 1.13's python-tracer
//   tensors inserted, then every other observation's pointer looked up
//   (identity's step 0; memtl puts a bit filter in front of the lookups,
//   which turns most misses away before the map);
// - impl numbering: every tensor observation's TensorImpl address numbered
//   densely in order of first sighting (the reader, DenseNumbering). The
//   trace keeps the numbers, not the addresses, so each number stands for a
//   16-byte aligned address scattered over 64 GiB (distinct numbers,
//   distinct addresses), so that no map gains from a regular stride.
#include <absl/container/flat_hash_map.h>
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/model/flat_map.h"
#include "core/read/memtl/trace_reader.h"
#include "tests/bench/old_flat_map.h"

namespace {

// Heap bytes in use (malloc_usable_size, which the free side can ask too),
// and the most since the last ResetPeak.
size_t g_bytes = 0, g_peak = 0;
void ResetPeak() { g_peak = g_bytes; }

}  // namespace

void* operator new(size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  g_bytes += malloc_usable_size(p);
  g_peak = std::max(g_peak, g_bytes);
  return p;
}
void operator delete(void* p) noexcept {
  if (p == nullptr) return;
  g_bytes -= malloc_usable_size(p);
  std::free(p);
}
void operator delete(void* p, size_t /*n*/) noexcept { operator delete(p); }

namespace {

using memtl::Trace;

// One interface over the maps: insert-if-absent, find, erase.
template <typename V>
struct FlatMapOf {
  static constexpr const char* kName = "memtl FlatMap";
  memtl::bench::FlatMap<uint64_t, V, memtl::bench::U64Hash> m;
  V* Insert(uint64_t k, V v, bool* inserted) {
    auto [p, ins] = m.try_emplace(k, v);
    *inserted = ins;
    return p;
  }
  V* Find(uint64_t k) { return m.find(k); }
  bool Erase(uint64_t k) { return m.erase(k); }
  size_t size() const { return m.size(); }
};

template <typename Map, const char* Name>
struct StdLikeOf {
  static constexpr const char* kName = Name;
  Map m;
  auto* Insert(uint64_t k, typename Map::mapped_type v, bool* inserted) {
    auto [it, ins] = m.try_emplace(k, v);
    *inserted = ins;
    return &it->second;
  }
  auto* Find(uint64_t k) {
    auto it = m.find(k);
    return it == m.end() ? nullptr : &it->second;
  }
  bool Erase(uint64_t k) { return m.erase(k) != 0; }
  size_t size() const { return m.size(); }
};

constexpr char kAbsl[] = "absl flat_hash_map";
constexpr char kAbslMix[] = "absl flat_hash_map, Mix64";
constexpr char kStd[] = "std::unordered_map";
template <typename V>
using AbslOf = StdLikeOf<absl::flat_hash_map<uint64_t, V>, kAbsl>;
template <typename V>
using AbslMixOf = StdLikeOf<absl::flat_hash_map<uint64_t, V, memtl::bench::U64Hash>, kAbslMix>;
template <typename V>
using StdOf = StdLikeOf<std::unordered_map<uint64_t, V>, kStd>;

// PtrDevMap's layout: one map of pointers per device.
template <typename M>
struct PerDevice {
  std::vector<M> maps;
  M& operator[](uint16_t d) {
    if (d >= maps.size()) maps.resize(size_t{d} + 1);
    return maps[d];
  }
  size_t size() const {
    size_t n = 0;
    for (const auto& m : maps) n += m.size();
    return n;
  }
};

struct Result {
  size_t ops = 0, max_size = 0;
  uint64_t check = 0;  // a sum of the values seen, the same for every map
  size_t peak_bytes = 0;
};

template <typename M>
Result LiveAllocations(const Trace& t) {
  Result r;
  PerDevice<M> live;
  for (uint32_t ei = 0; ei < t.events.size(); ++ei) {
    const memtl::Event& e = t.events[ei];
    if (e.kind != memtl::EventKind::kAlloc) continue;
    const memtl::AllocInfo& a = t.allocs[e.payload];
    const uint64_t ptr = t.alloc_ptrs[e.payload];
    ++r.ops;
    bool inserted = false;
    if (a.bytes > 0) {
      *live[a.device].Insert(ptr, 0, &inserted) = e.payload;
      r.max_size = std::max(r.max_size, live.size());
    } else if (const uint32_t* v = live[a.device].Find(ptr); v != nullptr) {
      r.check += *v;
      live[a.device].Erase(ptr);
    }
  }
  return r;
}

template <typename M>
Result StoragePointers(const Trace& t) {
  Result r;
  PerDevice<M> live;
  uint32_t next = 1;
  auto aid = [&](uint64_t ptr, uint16_t device, bool is_free) {
    bool inserted = false;
    M& m = live[device];
    const uint32_t v = *m.Insert(ptr, next, &inserted);
    next += inserted ? 1 : 0;
    if (is_free) m.Erase(ptr);
    r.check += v;
    ++r.ops;
    r.max_size = std::max(r.max_size, live.size());
  };
  std::vector<bool> seen(t.tensors.size());
  auto tensor = [&](uint32_t ti) {
    if (ti == memtl::kNone32 || seen[ti]) return;
    seen[ti] = true;
    aid(t.tensor_ptrs[ti], static_cast<uint16_t>(t.tensors[ti].device), false);
  };
  for (const memtl::Event& e : t.events) {
    if (e.kind == memtl::EventKind::kAlloc) {
      const memtl::AllocInfo& a = t.allocs[e.payload];
      aid(t.alloc_ptrs[e.payload], a.device, a.bytes < 0);
    } else if (e.kind == memtl::EventKind::kOp) {
      for (const memtl::Arg arg : t.ArgsOf(e.payload)) {
        if (arg.kind == memtl::ArgKind::kTensor) tensor(arg.begin);
        for (uint32_t k = 0; arg.kind == memtl::ArgKind::kTensorList && k < arg.count; ++k) {
          tensor(t.list_items[arg.begin + k]);
        }
      }
    }
  }
  for (uint32_t ti = 0; ti < t.tensors.size(); ++ti) tensor(ti);
  return r;
}

template <typename M>
Result PartialPointers(const Trace& t) {
  Result r;
  M list_of;
  uint32_t lists = 0;
  bool inserted = false;
  for (size_t ti = 0; ti < t.tensors.size(); ++ti) {
    if (!t.tensors[ti].partial) continue;
    list_of.Insert(t.tensor_ptrs[ti], lists, &inserted);
    lists += inserted ? 1 : 0;
    ++r.ops;
  }
  r.max_size = list_of.size();
  if (lists == 0) return r;
  for (size_t ti = 0; ti < t.tensors.size(); ++ti) {
    if (t.tensors[ti].partial) continue;
    if (const uint32_t* i = list_of.Find(t.tensor_ptrs[ti]); i != nullptr) r.check += *i + 1;
    ++r.ops;
  }
  return r;
}

// n times an odd constant is a bijection modulo 2^32.
uint64_t ImplAddress(uint32_t n) {
  const uint32_t scattered = n * 0x9e3779b1u;
  return 0x55d0a0000000ull + 16 * uint64_t{scattered};
}

// DenseNumbering itself, or a map from address to number beside the array of
// keys that DenseNumbering::TakeKeys gives.
struct DenseOf {
  static constexpr const char* kName = "memtl DenseNumbering";
  memtl::DenseNumbering d;
  uint32_t Number(uint64_t k) { return d.Number(k); }
  size_t size() const { return d.size(); }
};
template <typename M>
struct KeysBeside {
  static constexpr const char* kName = M::kName;
  M m;
  std::vector<uint64_t> keys{0};
  uint32_t Number(uint64_t k) {
    bool inserted = false;
    const uint32_t n = *m.Insert(k, static_cast<uint32_t>(keys.size()), &inserted);
    if (inserted) keys.push_back(k);
    return n;
  }
  size_t size() const { return keys.size(); }
};

template <typename N>
Result ImplNumbering(const Trace& t) {
  Result r;
  N numbering;
  for (const memtl::Tensor& tensor : t.tensors) {
    if (tensor.impl == 0) continue;
    r.check += numbering.Number(ImplAddress(tensor.impl));
    ++r.ops;
  }
  r.max_size = numbering.size() - 1;
  return r;
}

struct Row {
  Row(const char* w, const char* m, Result (*r)(const Trace&)) : workload(w), map(m), run(r) {}
  const char* workload;
  const char* map;
  Result (*run)(const Trace&);
  double best_ms = 1e300;
  Result result;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s TRACE.jsonl.gz [RUNS]\n", argv[0]);
    return 2;
  }
  const int runs = argc > 2 ? std::atoi(argv[2]) : 5;
  auto read = memtl::ReadTraceFile(argv[1]);
  if (!read.ok()) {
    std::fprintf(stderr, "%s\n", read.status().message().c_str());
    return 1;
  }
  const Trace& t = read.value();
  std::vector<Row> rows = {
      {"live allocations", FlatMapOf<uint32_t>::kName, LiveAllocations<FlatMapOf<uint32_t>>},
      {"live allocations", kAbsl, LiveAllocations<AbslOf<uint32_t>>},
      {"live allocations", kAbslMix, LiveAllocations<AbslMixOf<uint32_t>>},
      {"live allocations", kStd, LiveAllocations<StdOf<uint32_t>>},
      {"storage pointers", FlatMapOf<uint32_t>::kName, StoragePointers<FlatMapOf<uint32_t>>},
      {"storage pointers", kAbsl, StoragePointers<AbslOf<uint32_t>>},
      {"storage pointers", kAbslMix, StoragePointers<AbslMixOf<uint32_t>>},
      {"storage pointers", kStd, StoragePointers<StdOf<uint32_t>>},
      {"partial pointers", FlatMapOf<uint32_t>::kName, PartialPointers<FlatMapOf<uint32_t>>},
      {"partial pointers", kAbsl, PartialPointers<AbslOf<uint32_t>>},
      {"partial pointers", kAbslMix, PartialPointers<AbslMixOf<uint32_t>>},
      {"partial pointers", kStd, PartialPointers<StdOf<uint32_t>>},
      {"impl numbering", DenseOf::kName, ImplNumbering<DenseOf>},
      {"impl numbering", "memtl FlatMap + keys", ImplNumbering<KeysBeside<FlatMapOf<uint32_t>>>},
      {"impl numbering", "absl flat_hash_map + keys", ImplNumbering<KeysBeside<AbslOf<uint32_t>>>},
      {"impl numbering", "std::unordered_map + keys", ImplNumbering<KeysBeside<StdOf<uint32_t>>>},
  };
  for (int round = 0; round < runs; ++round) {
    for (Row& row : rows) {
      const size_t before = g_bytes;
      ResetPeak();
      const auto t0 = std::chrono::steady_clock::now();
      Result res = row.run(t);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      res.peak_bytes = g_peak - before;
      row.best_ms = std::min(row.best_ms, ms);
      row.result = res;
    }
  }
  std::printf("%zu events, %zu tensor observations, %zu allocation events; best of %d runs\n\n",
              t.events.size(), t.tensors.size(), t.allocs.size(), runs);
  std::printf(
      "| workload | map | operations | largest size | best ms | ns/operation | peak MiB |"
      " check |\n|---|---|---:|---:|---:|---:|---:|---:|\n");
  for (const Row& row : rows) {
    const Result& r = row.result;
    std::printf(
        "| %s | %s | %zu | %zu | %.2f | %.1f | %.2f | %llu |\n", row.workload, row.map, r.ops,
        r.max_size, row.best_ms, r.ops == 0 ? 0.0 : row.best_ms * 1e6 / static_cast<double>(r.ops),
        static_cast<double>(r.peak_bytes) / (1 << 20), static_cast<unsigned long long>(r.check));
  }
  return 0;
}

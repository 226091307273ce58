// Wires the core stages in their fixed order for one trace: read, schemas,
// identity, op tree, data-flow graph. The CLI, tests and fuzzers share it so
// that every caller runs exactly the same pipeline.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/categories/category.h"
#include "core/checks/allocation_checks.h"
#include "core/graph/data_flow.h"
#include "core/graph/op_tree.h"
#include "core/graph/size_map.h"
#include "core/identity/identity.h"
#include "core/model/diagnostics.h"
#include "core/read/trace_reader.h"
#include "core/schema/schema.h"

namespace memtl {

// Peak resident memory of the process so far, in bytes (0 if unknown).
int64_t PeakRssBytes();
// Resident memory of the process now, in bytes (0 if unknown).
int64_t RssBytes();
// Minor page faults of the process so far: first touches of memory, each
// mapping a 4 KiB page (or a 2 MiB one where the kernel uses huge pages on
// its own). Their cost is the cost of fresh memory.
int64_t MinorFaults();

// Wall time of each stage, in run order, and the process's peak resident
// memory when it ended, for --timings and benchmarks.
class PhaseTimer {
 public:
  struct Phase {
    const char* name;
    double seconds;
    int64_t peak_rss;
    int64_t rss;           // when the phase ended
    int64_t minor_faults;  // during this phase
  };
  void Start() {
    last_ = std::chrono::steady_clock::now();
    last_faults_ = MinorFaults();
  }
  void Mark(const char* phase) {
    const auto now = std::chrono::steady_clock::now();
    const int64_t faults = MinorFaults();
    phases_.push_back({phase, std::chrono::duration<double>(now - last_).count(), PeakRssBytes(),
                       RssBytes(), faults - last_faults_});
    last_ = now;
    last_faults_ = faults;
  }
  const std::vector<Phase>& phases() const { return phases_; }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  int64_t last_faults_ = MinorFaults();
  std::vector<Phase> phases_;
};

struct Analysis {
  std::string name;  // file name used in messages
  Trace trace;
  ReadInfo read_info;
  SchemaRegistry schemas;
  Diagnostics diagnostics;
  AllocationSummary allocations;
  IdentityStats identity;
  std::unique_ptr<OpTree> tree;
  std::unique_ptr<SizeMap> sizes;
  std::unique_ptr<DataFlowGraph> graph;
  PhaseTimer timer;
};

// Each stage's data may go once its last reader is done (the CLI frees them;
// tests and tools that inspect an analysis keep everything):
// - after the graph: what only the graph reads (the op tree's schema facts)
//   and the schema registry (read by identity and the op tree's facts);
void ReleaseAfterGraph(Analysis& a);
// - after the passes: what only the graph and the passes read (op
//   arguments, python calls, the op tree's schema facts and backward flags,
//   the key slots of tensor observations); the timeline needs none of it;
void ReleaseAfterPasses(Analysis& a);
// - after the timeline, before an export: every trace record, the op tree,
//   the graph and the size map. The trace keeps its header, strings and
//   devices, and the diagnostics stay.
// `cats`, which the passes filled from `a`, takes over the key table's and
// the graph's arrays it refers to (CategoryDict::Keep) before they go.
void ReleaseAfterTimeline(Analysis& a, CategoryDict& cats);

// Runs the core stages on a trace already read. Errors name `name`.
// `threaded`: the allocation checks and the op tree's orders are built on a
// second thread beside identity (the result is the same either way);
// AnalyzeFile follows ReadOptions::threaded.
Expected<std::unique_ptr<Analysis>> Analyze(Trace trace, const std::string& name,
                                            bool threaded = false);
Expected<std::unique_ptr<Analysis>> AnalyzeFile(const std::string& path,
                                                const ReadOptions& options = {});

}  // namespace memtl

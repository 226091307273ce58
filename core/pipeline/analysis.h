// Wires the stages in their fixed order for one trace: read, schemas,
// identity, op tree, size map, data-flow graph (Analyze), then the passes and
// the timeline (Categorize); RunPipeline does both. The CLI, the tests and
// the fuzzers call these, so that every caller runs exactly the same
// pipeline; exporters then read what Categorized holds.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/categories/category.h"
#include "core/checks/allocation_checks.h"
#include "core/explain/peak.h"
#include "core/explain/report.h"
#include "core/graph/data_flow.h"
#include "core/graph/op_tree.h"
#include "core/graph/size_map.h"
#include "core/identity/identity.h"
#include "core/infer/infer.h"
#include "core/model/diagnostics.h"
#include "core/read/kineto/kineto_reader.h"
#include "core/read/memtl/trace_reader.h"
#include "core/read/raw/raw_timeline.h"
#include "core/schema/schema.h"
#include "core/timeline/timeline.h"

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
  // Identity's result: every stage after it reads tensors' keys here.
  KeyTable keys;
  // Per allocation record with no key, whether its (address, device) was
  // live among such allocations just before it (UntrackedAllocationsLive,
  // computed while the addresses are in scope): what the timeline needs of
  // them.
  std::vector<bool> untracked_live;
  std::unique_ptr<OpTree> tree;
  std::unique_ptr<SizeMap> sizes;
  // Per key slot, when the reader kept shapes (ReadOptions::keep_shapes):
  // the shape and dtype (an id into trace.shapes, kNone32: none) of the
  // key's first observation in start-time order, usually the output of the
  // op that allocated it. A key whose shape changes (an in-place resize_, a
  // view's storage) shows its first. Empty when shapes were not kept.
  std::vector<uint32_t> key_shapes;
  std::unique_ptr<DataFlowGraph> graph;
  PhaseTimer timer;
  // The categories inferred for a trace without tensors (a Kineto trace
  // read without an execution trace; core/infer/), per allocation record;
  // empty when the passes categorize the trace. The timeline keeps them.
  InferredCategories inferred;
  // A Kineto trace's "Total Reserved" where it changes, per device that
  // reports one (KinetoRead::reserved): the HTML report's reserved line.
  std::vector<ReservedPoint> reserved;
  // A PyTorch raw timeline (AnalyzeFile): it is the categorized timeline
  // already, so Categorize turns its rows into the timeline and takes no
  // other stage. The trace then holds one device and a key per category,
  // and no events (the op tree and graph are empty).
  std::optional<RawTimeline> raw_timeline;
};

// Runs the core stages on a trace already read. Errors name `name`.
// `threaded`: the allocation checks and the op tree's orders are built on a
// second thread beside identity (the result is the same either way);
// AnalyzeFile follows ReadOptions::threaded. `infer`: the categories of
// the allocations are inferred (InferCategories), as AnalyzeFile asks for a
// Kineto trace read without an execution trace.
Expected<std::unique_ptr<Analysis>> Analyze(Trace trace, const std::string& name,
                                            bool threaded = false, bool infer = false);
Expected<std::unique_ptr<Analysis>> AnalyzeFile(const std::string& path,
                                                const ReadOptions& options = {});

// The device to export: `requested` when given (an error lists the devices
// the trace has when it is not one of them), else the accelerator (any
// device but cpu: cuda:N, hip:N, xpu:N...) whose `peaks` (PeakPerDevice,
// by device index) is the largest, the first on a tie, else cpu;
// devices.size() when the trace has neither (an empty export). Categorize
// resolves it once the timeline is built. On a trace whose accelerator
// memory is all on cuda:0 this is PyTorch's default.
Expected<DeviceIndex> ResolveDevice(const Trace& trace, const std::string& requested,
                                    const std::vector<int64_t>& peaks);

// What stays of an analysis once Categorize has built the timeline. No
// stage's data is dropped by hand: each goes when the value that owns it
// goes out of scope (the tensor records when identity and the size map are
// done, AnalyzeTimed; the rest of the analysis, for an export, when
// Categorize returns).
enum class Retain {
  kAll,     // every stage's result (the commands that print the timeline,
            // explain it or summarize it, tests and tools)
  kExport,  // what an export reads: the analysis's name, diagnostics and
            // timer, and the trace's header, strings and devices (the
            // categories hold their own numbering)
};

// An analysis categorized and turned into the timeline.
struct Categorized {
  std::unique_ptr<Analysis> analysis;
  CategoryDict categories;
  std::vector<TimelineEvent> timeline;
  DeviceIndex device = 0;  // the export device (ResolveDevice)
  // The categories are inferred (Analysis::inferred), not proven: the
  // explaining outputs say so.
  bool inferred = false;
  // Who holds the memory at the peak, when PipelineOptions::explain_peak
  // asked for it (made before an export lets the analysis go).
  std::optional<PeakReport> peak;
  // What the HTML report shows of every device, when PipelineOptions::report
  // asked for it (made, as the peak, before an export lets the analysis go).
  std::optional<Report> report;
};

struct PipelineOptions {
  ReadOptions read;
  Retain retain = Retain::kAll;
  std::string device;  // requested export device; empty: the default
  // A peak report listing this many of the largest live tensors (none: no report).
  std::optional<size_t> explain_peak;
  // The HTML report's data for every device (MakeReport): peaks, memory
  // tables, the sampled timeline with the op running at each point, steps.
  bool report = false;
};

// The passes (passes/passes.def order), then the timeline, on an analysis
// from Analyze; on a raw timeline, its rows (no peak tensors or report
// tables: a raw timeline names no tensor or op). A trace recorded without profile_memory (its
// header says so, or says nothing and has no allocation event) is an error, as in PyTorch's
// _memory_profile; so is a requested device the trace lacks.
Expected<std::unique_ptr<Categorized>> Categorize(std::unique_ptr<Analysis> analysis,
                                                  const PipelineOptions& options = {});
// The peak report of a categorized analysis that kept everything
// (Retain::kAll).
PeakReport ExplainPeak(const Categorized& c, size_t top);

// The whole pipeline on a file: AnalyzeFile, then Categorize.
Expected<std::unique_ptr<Categorized>> RunPipeline(const std::string& path,
                                                   const PipelineOptions& options = {});

}  // namespace memtl

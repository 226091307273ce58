// Wires the stages in their fixed order for one trace: read, schemas,
// identity, op tree, size map, data-flow graph (Analyze), then the passes and
// the timeline (Categorize); RunPipeline does both. The CLI, the tests and
// the fuzzers call these, so that every caller runs exactly the same
// pipeline; exporters then read what Categorized holds.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
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
#include "core/pipeline/phase_timer.h"
#include "core/read/kineto/kineto_reader.h"
#include "core/read/memtl/trace_reader.h"
#include "core/read/raw/raw_timeline.h"
#include "core/schema/schema.h"
#include "core/timeline/timeline.h"

namespace memtl {

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
};

// Runs the core stages on a trace already read. Errors name `name`.
// `threaded`: the allocation checks and the op tree's orders are built on a
// second thread beside identity (the result is the same either way);
// AnalyzeFile follows ReadOptions::threaded. `infer`: the categories of
// the allocations are inferred (InferCategories), as AnalyzeFile asks for a
// Kineto trace read without an execution trace.
Expected<std::unique_ptr<Analysis>> Analyze(Trace trace, const std::string& name,
                                            bool threaded = false, bool infer = false);
// A raw timeline is an error here: it names no op or tensor for the stages
// (AnalyzeAnyFile reads it).
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

// What categorizing an analysis adds to it: the categories, the timeline,
// the export device, and what the explaining outputs make while the
// stages are there (the peak report, the HTML report's data).
struct CategorizedTimeline {
  CategoryDict categories;
  std::vector<TimelineEvent> timeline;
  DeviceIndex device = 0;  // the export device (ResolveDevice)
  // The categories are inferred (Analysis::inferred), not proven: the
  // explaining outputs say so.
  bool inferred = false;
  // Who holds the memory at the peak, when PipelineOptions::explain_peak
  // asked for it.
  std::optional<PeakReport> peak;
  // What the HTML report shows of every device, when PipelineOptions::report
  // asked for it.
  std::optional<Report> report;
};

// An analysis categorized, with every stage kept: what the commands that
// print, explain or summarize the timeline read, and tests and tools.
// `analysis` is never null, nor is any of its stages.
struct Categorized : CategorizedTimeline {
  std::unique_ptr<Analysis> analysis;
};

// What an export reads of an analysis once its stages are gone: its name,
// what the reader said, the diagnostics, the timer, and of the trace its
// header, strings and devices (its events and records are empty). The
// categories hold their own numbering.
struct ExportView {
  std::string name;
  ReadInfo read_info;
  Diagnostics diagnostics;
  PhaseTimer timer;
  Trace trace;
};

// An analysis categorized for an export: the stages went once the timeline,
// the peak and the report were made (CategorizeForExport). No stage is
// reachable from it, so none can be read after it went.
struct Exportable : CategorizedTimeline {
  ExportView view;
};

// A PyTorch raw timeline (.raw.json.gz) as read. Its rows are a categorized
// timeline already, of one device the file does not name, and it names no
// op, tensor or module: no stage runs on it, and CategorizeForExport makes
// its Exportable (a key per category, T0 PARAMETER .. T6 AUTOGRAD_DETAIL).
struct RawTimelineRead {
  ExportView view;  // its trace holds a header and one device, no events
  RawTimeline raw;
};

// A file as read: a trace's analysis, or a raw timeline.
using FileAnalysis = std::variant<std::unique_ptr<Analysis>, std::unique_ptr<RawTimelineRead>>;

// AnalyzeFile for every input: a raw timeline is read, not analyzed.
Expected<FileAnalysis> AnalyzeAnyFile(const std::string& path, const ReadOptions& options = {});
// What the reader said of a file, and its diagnostics so far, whichever it is.
const ReadInfo& ReadInfoOf(const FileAnalysis& file);
const Diagnostics& DiagnosticsOf(const FileAnalysis& file);
// The error of asking a raw timeline at `path` for what only a trace's
// stages hold (AnalyzeFile, and the commands that read tensors or ops).
Status RawTimelineHasNoStages(const std::string& path);

struct PipelineOptions {
  ReadOptions read;
  std::string device;  // requested export device; empty: the default
  // A peak report listing this many of the largest live tensors (none: no report).
  std::optional<size_t> explain_peak;
  // The HTML report's data for every device (MakeReport): peaks, memory
  // tables, the sampled timeline with the op running at each point, steps.
  bool report = false;
};

// The passes (passes/passes.def order), then the timeline, on an analysis
// from Analyze. A trace recorded without profile_memory (its header says
// so, or says nothing and has no allocation event) is an error, as in
// PyTorch's _memory_profile; so is a requested device the trace lacks.
Expected<std::unique_ptr<Categorized>> Categorize(std::unique_ptr<Analysis> analysis,
                                                  const PipelineOptions& options = {});
// Categorize for an export: the peak and the report are made while the
// stages are there, then all of the analysis goes but its ExportView, when
// `analysis` goes out of scope on return.
Expected<std::unique_ptr<Exportable>> CategorizeForExport(std::unique_ptr<Analysis> analysis,
                                                          const PipelineOptions& options = {});
// A raw timeline's rows as the timeline (a version bump that changes the
// category is a destroy and a create), on the device --device names; the
// peak when asked for, without tensors (it names none), and no report
// tables.
Expected<std::unique_ptr<Exportable>> CategorizeForExport(std::unique_ptr<RawTimelineRead> raw,
                                                          const PipelineOptions& options = {});
Expected<std::unique_ptr<Exportable>> CategorizeForExport(FileAnalysis file,
                                                          const PipelineOptions& options = {});
// The peak report of a categorized analysis.
PeakReport ExplainPeak(const Categorized& c, size_t top);

// The whole pipeline on a file: AnalyzeFile, then Categorize.
Expected<std::unique_ptr<Categorized>> RunPipeline(const std::string& path,
                                                   const PipelineOptions& options = {});

}  // namespace memtl

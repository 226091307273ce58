// The core pipeline, stage by stage.
#include "core/pipeline/analysis.h"

#include <exception>
#include <filesystem>
#include <iterator>
#include <optional>
#include <system_error>
#include <thread>

#include "core/model/large_array.h"
#include "core/model/quote.h"
#include "core/plan/help.h"
#include "core/read/common/format.h"
#include "core/read/et/et_join.h"
#include "core/read/kineto/kineto_reader.h"
#include "core/read/memtl/trace_reader.h"
#include "core/read/raw/raw_timeline.h"
#include "core/read/snapshot/snapshot_reader.h"
#include "passes/pass.h"

namespace memtl {

namespace {

// Analysis::key_shapes: per key slot, the shape of its first observation in
// start-time order (the order the size map reads them in: op arguments, then
// the parameters, gradients and optimizer state of python calls); empty
// when the reader kept no shapes.
std::vector<uint32_t> ShapesOfKeys(const OpTree& tree, const KeyTable& keys,
                                   const TensorRecords& records) {
  const Trace& trace = tree.trace();
  std::vector<uint32_t> shapes;
  if (records.tensor_shapes.empty() || records.tensor_shapes.size() != records.tensors.size())
    return shapes;
  shapes.assign(keys.size(), kNone32);
  auto observe = [&](uint32_t tensor) {
    const KeySlot key = keys.SlotOfTensor(tensor);
    if (key.valid() && shapes[key.value()] == kNone32)
      shapes[key.value()] = records.tensor_shapes[tensor];
  };
  for (uint32_t e : tree.sorted()) {
    const Event& ev = trace.events[e];
    if (ev.kind == EventKind::kOp) {
      for (const Arg arg : trace.ArgsOf(ev.payload)) {
        if (arg.kind == ArgKind::kTensor) observe(arg.begin);
        if (arg.kind == ArgKind::kTensorList) {
          for (uint32_t k = 0; k < arg.count; ++k) observe(trace.list_items[arg.begin + k]);
        }
      }
    } else if (ev.kind == EventKind::kPy) {
      const PyInfo py = trace.Py(ev.payload);
      auto params = [&](uint32_t begin, uint32_t count, bool with_state) {
        for (uint32_t p = begin; p < begin + count; ++p) {
          observe(trace.params[p].tensor);
          observe(trace.params[p].grad);
          if (!with_state) continue;
          for (uint32_t s = 0; s < trace.params[p].state_count; ++s)
            observe(trace.states[trace.params[p].state_begin + s].tensor);
        }
      };
      if (py.module() != kNone32)
        params(trace.modules[py.module()].params_begin, trace.modules[py.module()].params_count,
               false);
      if (py.optimizer() != kNone32) {
        const OptimizerInfo& o = trace.optimizers[py.optimizer()];
        params(o.params_begin, o.params_count, true);
        for (uint32_t s = o.state_begin; s < o.state_begin + o.state_count; ++s)
          observe(trace.states[s].tensor);
      }
    }
  }
  return shapes;
}

// Identity (with the op tree's orders and the allocation checks beside it),
// the untracked allocations' liveness, the inference when asked, and the
// size map: the stages that read the tensor records and the allocations'
// addresses, which `records` owns; they go when it does, on return.
Status IdentityAndSizes(Analysis& a, TensorRecords records, bool threaded, bool infer,
                        const StorageSplits& splits) {
  const std::string& name = a.name;
  std::vector<uint64_t> tensor_ptrs = std::move(a.trace.tensor_ptrs);
  if (threaded) {
    // The op tree's orders and the allocation checks (which walk the
    // tree's start-time order) read the events and not what identity
    // returns (the key table), and identity only reads the trace, so they
    // are built on the second core while identity runs. The checks count
    // into their own diagnostics, merged in the single-threaded order.
    Diagnostics checks_diag, identity_diag;
    std::exception_ptr helper_error;
    auto helper_work = [&] {
      try {
        a.tree = std::make_unique<OpTree>(a.trace);
        a.allocations = CheckAllocations(*a.tree, records, checks_diag);
      } catch (...) {
        helper_error = std::current_exception();
      }
    };
    {
      std::jthread helper;
      try {
        helper = std::jthread(helper_work);
      } catch (const std::system_error&) {
        helper_work();  // no second thread to be had: the same work, here
      }
      IdentityResult id = AssignIdentity(a.trace, records, std::move(tensor_ptrs), a.schemas,
                                         identity_diag, splits);
      a.keys = std::move(id.keys);
      a.identity = id.stats;
    }
    if (helper_error) std::rethrow_exception(helper_error);
    a.diagnostics.Merge(checks_diag);
    a.diagnostics.Merge(identity_diag);
    a.timer.Mark("identity+checks+orders");
  } else {
    a.tree = std::make_unique<OpTree>(a.trace);
    a.allocations = CheckAllocations(*a.tree, records, a.diagnostics);
    a.timer.Mark("orders+checks");
    IdentityResult id =
        AssignIdentity(a.trace, records, std::move(tensor_ptrs), a.schemas, a.diagnostics, splits);
    a.keys = std::move(id.keys);
    a.identity = id.stats;
    a.timer.Mark("identity");
  }
  // What the timeline needs of the addresses (the liveness of untracked
  // allocations, by pointer) is kept.
  auto untracked_live = UntrackedAllocationsLive(*a.tree, a.keys, records);
  if (!untracked_live.ok()) return untracked_live.status().Prefixed(name + ": ");
  a.untracked_live = std::move(untracked_live.value());
  if (infer) {  // pairs allocations with frees by address
    auto inferred = InferCategories(*a.tree, records);
    if (!inferred.ok()) return inferred.status().Prefixed(name + ": ");
    a.inferred = std::move(inferred.value());
    a.timer.Mark("inference");
  }
  // The size map reads the tensor records for the last time (the graph and
  // every later stage read tensors through the key table and the size map);
  // it needs only the tree's start-time order.
  a.sizes = std::make_unique<SizeMap>(*a.tree, a.keys, records);
  a.key_shapes = ShapesOfKeys(*a.tree, a.keys, records);
  return Status();
}

// `splits`: the storages identity splits (StorageSplits). When the graph
// finds storages allocated again while live and `retry` is given, the
// analysis fails and `retry` says which to split on a second analysis of
// the same trace.
Expected<std::unique_ptr<Analysis>> AnalyzeTimed(Trace trace, const std::string& name,
                                                 PhaseTimer timer, bool threaded, bool infer,
                                                 const StorageSplits& splits = {},
                                                 StorageSplits* retry = nullptr) {
  auto a = std::make_unique<Analysis>();
  a->timer = std::move(timer);
  a->name = name;
  a->trace = std::move(trace);
  a->schemas = SchemaRegistry::Builtin(a->trace.strings);
  for (const auto& [op, schemas] : a->trace.schemas) {
    if (auto s = a->schemas.Override(op, schemas); !s.ok()) return s.Prefixed(name + ": ");
  }
  if (a->trace.ops_ending_before_start > 0) {
    a->diagnostics.Add("op whose end precedes its start", "the analysis uses start times only",
                       a->trace.ops_ending_before_start);
  }
  if (a->trace.ops_without_end > 0) {
    a->diagnostics.Add("op without an end time", "the analysis uses start times only",
                       a->trace.ops_without_end);
  }
  if (a->trace.events_before_parent > 0) {
    a->diagnostics.Add("event starts before its parent", "the parent links may be wrong",
                       a->trace.events_before_parent);
  }
  if (a->trace.strings.invalid_utf8() > 0) {
    a->diagnostics.Add("name that is not valid UTF-8: its bad bytes read as U+FFFD",
                       a->trace.strings.invalid_utf8_example(), a->trace.strings.invalid_utf8());
  }
  // The trace split by lifetime: the tensor records and the allocations'
  // addresses are read by the stages up to the size map only, and go when
  // IdentityAndSizes returns, before the op tree's facts and the graph add
  // theirs (about a fifth of the trace's memory).
  if (Status s = IdentityAndSizes(*a, TakeTensorRecords(a->trace), threaded, infer, splits);
      !s.ok())
    return s;
  if (a->identity.split_storages > 0) {
    a->diagnostics.Add(
        "storage allocated again while live (its free was not recorded): split in two",
        "the earlier storage ends where its address is allocated again; PyTorch's memory "
        "profiler fails on this trace (\"version mismatch\")",
        a->identity.split_storages);
  }
  a->timer.Mark("size map");
  a->tree->AddFacts(a->keys, a->schemas);
  a->timer.Mark("op tree");
  std::vector<KeySlot> reused;
  auto graph = DataFlowGraph::Build(*a->tree, a->keys, retry != nullptr ? &reused : nullptr);
  if (!graph.ok() && !reused.empty()) {
    retry->first_new_id = a->identity.allocation_id_bound;
    for (KeySlot k : reused) retry->allocation_ids.push_back(a->keys[k].allocation.value());
    std::sort(retry->allocation_ids.begin(), retry->allocation_ids.end());
  }
  if (!graph.ok()) return graph.status().Prefixed(name + ": ");
  a->graph = std::make_unique<DataFlowGraph>(std::move(graph.value()));
  a->timer.Mark("graph");
  return a;
}

}  // namespace

namespace {

// What an export reads of an analysis (ExportView), moved out of it.
ExportView ViewOf(Analysis& a) {
  ExportView v;
  v.name = std::move(a.name);
  v.read_info = std::move(a.read_info);
  v.diagnostics = std::move(a.diagnostics);
  v.timer = std::move(a.timer);
  v.trace.header = std::move(a.trace.header);
  v.trace.strings = std::move(a.trace.strings);
  v.trace.devices = std::move(a.trace.devices);
  return v;
}

}  // namespace

namespace {

// A raw timeline's category export indices 0..6 as categories (7, unknown,
// has no key).
constexpr Category kRawCategories[] = {Category::kParameter,     Category::kOptimizerState,
                                       Category::kInput,         Category::kTemporary,
                                       Category::kActivation,    Category::kGradient,
                                       Category::kAutogradDetail};
constexpr uint32_t kRawKeys = std::size(kRawCategories);

// A raw timeline as read: one device (the file names none: cpu until
// --device names it), no events.
std::unique_ptr<RawTimelineRead> RawRead(RawTimeline raw, const std::string& name) {
  auto r = std::make_unique<RawTimelineRead>();
  r->view.name = name;
  Trace& t = r->view.trace;
  t.header.version = kTraceFormatVersion;
  t.header.producer = "PyTorch raw memory timeline";
  t.header.profile_memory = 1;
  t.InternDevice("cpu");
  t.Finish();
  if (raw.times_were_us) {
    r->view.diagnostics.Add("raw timeline in microseconds (written by an older PyTorch)",
                            "its times were multiplied by 1000");
  }
  r->raw = std::move(raw);
  return r;
}

// The timeline of a raw timeline's rows, in their order. A version bump
// that keeps its category is one event, as PyTorch's timeline has it; one
// that changes it is a destroy of the old category and a create of the new
// (the keys are categories, with no versions to bump), the same bytes in
// every export but for the raw export's action numbers.
Status CategorizeRaw(RawTimelineRead& r, const PipelineOptions& options, Exportable& c) {
  ExportView& v = r.view;
  // The file names no device: --device names it, by the rule every trace's
  // devices follow (it was taken as it came).
  if (Status s = CheckDeviceOption(options.device); !s.ok()) return s.Prefixed(v.name + ": ");
  if (!options.device.empty()) v.trace.devices[0].name = options.device;
  c.device = 0;
  // The categories are keys T0..T6 of one version each (kRawCategories'
  // order, the export's), so that the exports read them as any trace's.
  KeyTable keys;
  std::vector<uint32_t> value_begin;
  for (uint32_t k = 0; k < kRawKeys; ++k) {
    keys.keys.push_back(v.trace.KeyOf(TensorId(k), AllocationId(k), 0));
    keys.id_slot.push_back(k);
    value_begin.push_back(k);
  }
  keys.num_ids = kRawKeys;
  value_begin.push_back(kRawKeys);
  c.categories.Reset(keys.id_slot, keys.num_ids, value_begin);
  CategoryWriter w(c.categories);
  for (uint32_t k = 0; k < kRawKeys; ++k) w.SetByKey(KeySlot(k), kRawCategories[k]);
  const std::vector<RawTimelineRow>& rows = r.raw.rows;
  auto event = [](const RawTimelineRow& row, Action action) {
    TimelineEvent e;
    e.time = row.time;
    e.bytes = row.bytes < 0 ? -row.bytes : row.bytes;
    e.device = 0;
    e.slot = row.category < kRawKeys ? row.category : KeySlot::kNone;
    e.ver = 0;
    e.action = action;
    return e;
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    const RawTimelineRow& row = rows[i];
    const auto action = static_cast<Action>(row.action);
    if (action == Action::kIncrementVersion && i + 1 < rows.size() &&
        rows[i + 1].action == row.action && rows[i + 1].time == row.time) {
      const RawTimelineRow& next = rows[++i];
      if (next.category == row.category) {
        c.timeline.push_back(event(next, Action::kIncrementVersion));
      } else {
        c.timeline.push_back(event(row, Action::kDestroy));
        c.timeline.push_back(event(next, Action::kCreate));
      }
      continue;
    }
    // A lone bump row: its sign says which half it is.
    const Action as = action != Action::kIncrementVersion ? action
                      : row.bytes < 0                     ? Action::kDestroy
                                                          : Action::kCreate;
    c.timeline.push_back(event(row, as));
  }
  if (Status s = CheckTimelineSums(v.trace, keys, c.timeline, c.categories, v.diagnostics); !s.ok())
    return s.Prefixed(v.name + ": ");
  if (options.explain_peak) {
    c.peak = FindPeak(c.timeline, c.categories, c.device);
    c.peak->device = v.trace.devices[0].name;
  }
  return Status();
}

}  // namespace

Expected<std::unique_ptr<Analysis>> Analyze(Trace trace, const std::string& name, bool threaded,
                                            bool infer) {
  return AnalyzeTimed(std::move(trace), name, PhaseTimer(), threaded, infer);
}

Expected<DeviceIndex> ResolveDevice(const Trace& trace, const std::string& requested,
                                    const std::vector<int64_t>& peaks) {
  std::string want = requested;
  if (want.empty()) {
    // The accelerator whose memory peaks highest, the first on a tie.
    want = "cpu";
    int64_t best = -1;
    for (size_t d = 0; d < trace.devices.size() && d < peaks.size(); ++d) {
      if (trace.devices[d].name.starts_with("cpu") || peaks[d] <= best) continue;
      best = peaks[d];
      want = trace.devices[d].name;
    }
  }
  for (size_t i = 0; i < trace.devices.size(); ++i) {
    if (trace.devices[i].name == want) return static_cast<DeviceIndex>(i);
  }
  if (!requested.empty()) {
    std::string list;
    for (const auto& d : trace.devices) list += (list.empty() ? "" : ", ") + d.name;
    return Status::Error("device \"" + requested + "\" is not in the trace (devices: " +
                         (list.empty() ? std::string("none") : list) + ")");
  }
  return static_cast<DeviceIndex>(trace.devices.size());  // no such device: an empty export
}

namespace {

// The reserved totals into the report's devices (DeviceReport::reserved),
// in the chart's times (PyTorch's microseconds).
void AddReserved(const std::vector<ReservedPoint>& reserved, Report& report) {
  for (DeviceReport& d : report.devices) {
    for (const ReservedPoint& p : reserved) {
      if (p.device == d.device) d.reserved.emplace_back(PyTrueDivTrunc1000(p.time_ns), p.bytes);
    }
  }
}

}  // namespace

Expected<std::unique_ptr<Categorized>> Categorize(std::unique_ptr<Analysis> analysis,
                                                  const PipelineOptions& options) {
  Analysis& a = *analysis;
  const bool no_memory_events = a.allocations.allocations + a.allocations.frees == 0;
  if (a.trace.header.profile_memory == 0 ||
      (no_memory_events && a.trace.header.profile_memory != 1)) {
    // As PyTorch's _memory_profile: without memory events there is no timeline.
    return Status::Error(
        a.name +
        ": the trace has no memory events (it was recorded without profile_memory=True?); "
        "record with torch.profiler.profile(record_shapes=True, profile_memory=True, "
        "with_stack=True)");
  }
  auto c = std::make_unique<Categorized>();
  RunAllPasses(PassInput{a.trace, a.keys, *a.tree, *a.graph, *a.sizes}, c->categories);
  a.timer.Mark("passes");
  c->inferred = !a.inferred.empty();
  auto timeline = BuildTimeline(*a.tree, a.keys, *a.graph, *a.sizes, a.untracked_live,
                                c->categories, a.diagnostics, a.inferred.category);
  if (!timeline.ok()) return timeline.status().Prefixed(a.name + ": ");
  c->timeline = std::move(timeline.value());
  // Live bytes past 2^63-1 would give negative totals: an error, not a number.
  if (Status s = CheckTimelineSums(a.trace, a.keys, c->timeline, c->categories, a.diagnostics);
      !s.ok())
    return s.Prefixed(a.name + ": ");
  auto device =
      ResolveDevice(a.trace, options.device, PeakPerDevice(c->timeline, a.trace.devices.size()));
  if (!device.ok()) return device.status().Prefixed(a.name + ": ");
  c->device = device.value();
  a.timer.Mark("timeline");
  const InferredCategories* inferred = c->inferred ? &a.inferred : nullptr;
  if (options.explain_peak) {
    c->peak = ExplainPeak(PeakInput{a.trace, a.keys, *a.tree, *a.graph, c->categories, c->timeline,
                                    c->device, nullptr, inferred},
                          *options.explain_peak);
    a.timer.Mark("peak");
  }
  if (options.report) {
    const ExplainInput in{a.trace,     a.keys,    *a.tree, *a.graph, c->categories,
                          c->timeline, c->device, nullptr, inferred};
    // The export device's peak is made once when both ask for it.
    const bool same_peak = options.explain_peak == kReportLargestTensors;
    c->report = MakeReport(in, kReportLargestTensors, same_peak ? &*c->peak : nullptr);
    AddReserved(a.reserved, *c->report);
    a.timer.Mark("report");
    AddWhatWouldHelp(in, *c->report);
    a.timer.Mark("what would help");
  }
  c->analysis = std::move(analysis);
  return c;
}

Expected<std::unique_ptr<Exportable>> CategorizeForExport(std::unique_ptr<Analysis> analysis,
                                                          const PipelineOptions& options) {
  auto c = Categorize(std::move(analysis), options);
  if (!c.ok()) return c.status();
  auto e = std::make_unique<Exportable>();
  static_cast<CategorizedTimeline&>(*e) = std::move(static_cast<CategorizedTimeline&>(*c.value()));
  e->view = ViewOf(*c.value()->analysis);
  return e;  // the rest of the analysis goes with `c`
}

Expected<std::unique_ptr<Exportable>> CategorizeForExport(std::unique_ptr<RawTimelineRead> raw,
                                                          const PipelineOptions& options) {
  auto e = std::make_unique<Exportable>();
  if (Status s = CategorizeRaw(*raw, options, *e); !s.ok()) return s;
  e->view = std::move(raw->view);
  return e;
}

Expected<std::unique_ptr<Exportable>> CategorizeForExport(FileAnalysis file,
                                                          const PipelineOptions& options) {
  return std::visit(
      [&](auto&& read) { return CategorizeForExport(std::forward<decltype(read)>(read), options); },
      std::move(file));
}

PeakReport ExplainPeak(const Categorized& c, size_t top) {
  const Analysis& a = *c.analysis;
  return ExplainPeak(PeakInput{a.trace, a.keys, *a.tree, *a.graph, c.categories, c.timeline,
                               c.device, nullptr, c.inferred ? &a.inferred : nullptr},
                     top);
}

Expected<std::unique_ptr<Categorized>> RunPipeline(const std::string& path,
                                                   const PipelineOptions& options) {
  auto a = AnalyzeFile(path, options.read);
  if (!a.ok()) return a.status();
  return Categorize(std::move(a.value()), options);
}

namespace {

// One read and analysis of a file; AnalyzeTimed's `splits` and `retry`.
Expected<FileAnalysis> AnalyzeFileOnce(const std::string& path, const ReadOptions& options,
                                       const StorageSplits& splits, StorageSplits* retry) {
  PhaseTimer timer;
  timer.Start();
  ReadInfo info;
  // The format decides the reader (core/read/common/format.h); a Kineto trace
  // comes with the reader's diagnostics (its totals checked).
  auto input = OpenInput(path);
  if (!input.ok()) return input.status();
  const InputFormat format = input.value().format;
  Diagnostics read_diagnostics;
  std::vector<ReservedPoint> reserved;
  std::optional<Trace> trace;
  // A Kineto trace alone, or a memory snapshot, records no tensors: their
  // categories are inferred.
  const bool infer = (format == InputFormat::kKineto && options.et_path.empty()) ||
                     format == InputFormat::kSnapshot;
  switch (format) {
    case InputFormat::kKineto: {
      // With --et, joined to the execution trace (core/read/et/et_join.h).
      auto k = options.et_path.empty() ? ReadKinetoInput(std::move(input.value()), options)
                                       : ReadKinetoJoinedInput(std::move(input.value()), options);
      if (!k.ok()) return k.status();
      info = k.value().info;
      read_diagnostics = std::move(k.value().diagnostics);
      trace = std::move(k.value().trace);
      reserved = std::move(k.value().reserved);
      break;
    }
    case InputFormat::kSnapshot: {
      auto snap = ReadSnapshotInput(std::move(input.value()), options);
      if (!snap.ok()) return snap.status();
      info = snap.value().info;
      read_diagnostics = std::move(snap.value().diagnostics);
      trace = std::move(snap.value().trace);
      reserved = std::move(snap.value().reserved);
      break;
    }
    case InputFormat::kRawTimeline: {
      auto raw = ReadRawTimelineInput(std::move(input.value()), options, &info);
      if (!raw.ok()) return raw.status();
      timer.Mark("read");
      std::unique_ptr<RawTimelineRead> r = RawRead(std::move(raw.value()), path);
      r->view.timer = std::move(timer);
      r->view.read_info = info;
      return FileAnalysis(std::move(r));
    }
    case InputFormat::kSizesTimeline:
    case InputFormat::kExecutionTrace:
    case InputFormat::kOtherJson:
      return Status::Error(QuotePath(path) + ": " + FormatAdvice(format));
    default: {
      auto t = ReadTraceInput(std::move(input.value()), options, &info);
      if (!t.ok()) {
        // Refused at its start, it may be no memtl trace at all: the
        // message then also says what memtl reads.
        if (t.status().code() == StatusCode::kNotThisFormat)
          return t.status().Suffixed("; " + FormatAdvice(format));
        return t.status();
      }
      trace = std::move(t.value());
      break;
    }
  }
  timer.Mark("read");
  if (options.progress != nullptr) options.progress->Set("analyzing");
  auto a = AnalyzeTimed(std::move(*trace), path, std::move(timer), options.threaded, infer, splits,
                        retry);
  if (!a.ok()) return a.status();
  a.value()->read_info = info;
  a.value()->diagnostics.Merge(read_diagnostics);
  a.value()->reserved = std::move(reserved);
  return FileAnalysis(std::move(a.value()));
}

}  // namespace

Expected<FileAnalysis> AnalyzeAnyFile(const std::string& path, const ReadOptions& options) {
  // A storage freed without a record whose address is allocated again
  // breaks the graph; the file is then read again with those storages split
  // (the tensor records are gone by the time the graph is built, and
  // keeping them for this rare case would cost every analysis memory).
  StorageSplits splits;
  auto a = AnalyzeFileOnce(path, options, {}, &splits);
  if (a.ok() || splits.empty()) return a;
  // Only a regular file reads the same twice (standard input, which the
  // command reads as /dev/stdin, or a FIFO does not).
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return a.status().Suffixed(
        "; memtl splits them on a second read, which a pipe cannot give: "
        "pass the trace as a file");
  }
  if (options.progress != nullptr) options.progress->Set("reading again");
  return AnalyzeFileOnce(path, options, splits, nullptr);
}

const ReadInfo& ReadInfoOf(const FileAnalysis& file) {
  if (const auto* a = std::get_if<std::unique_ptr<Analysis>>(&file)) return (*a)->read_info;
  return std::get<std::unique_ptr<RawTimelineRead>>(file)->view.read_info;
}

const Diagnostics& DiagnosticsOf(const FileAnalysis& file) {
  if (const auto* a = std::get_if<std::unique_ptr<Analysis>>(&file)) return (*a)->diagnostics;
  return std::get<std::unique_ptr<RawTimelineRead>>(file)->view.diagnostics;
}

Status RawTimelineHasNoStages(const std::string& path) {
  return Status::Error(QuotePath(path) +
                       ": a PyTorch raw memory timeline holds sizes by category only, no op or "
                       "tensor: memtl export, peak, summary, diff and ranks read it");
}

Expected<std::unique_ptr<Analysis>> AnalyzeFile(const std::string& path,
                                                const ReadOptions& options) {
  auto file = AnalyzeAnyFile(path, options);
  if (!file.ok()) return file.status();
  if (auto* a = std::get_if<std::unique_ptr<Analysis>>(&file.value())) return std::move(*a);
  return RawTimelineHasNoStages(path);
}

}  // namespace memtl

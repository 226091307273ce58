// The memtl command: runs the pipeline and the outputs for the command line
// cli/app.h parses. Every failure is one line on stderr and exit status 2;
// `--help` and `--version` exit 0 (docs/reliability.md lists the statuses).
#include <algorithm>
#include <array>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "cli/app.h"
#include "cli/console.h"
#include "cli/output_path.h"
#include "cli/rank_traces.h"
#include "cli/whatif_args.h"
#include "core/explain/events.h"
#include "core/explain/explain.h"
#include "core/explain/folded.h"
#include "core/explain/peak.h"
#include "core/explain/summary.h"
#include "core/model/quote.h"
#include "core/pipeline/analysis.h"
#include "core/plan/runs.h"
#include "core/plan/whatif.h"
#include "core/read/memtl/trace_reader.h"
#include "core/timeline/timeline.h"
#include "export/atomic_file.h"
#include "export/export.h"

namespace {

using memtl::cli::Args;
using memtl::cli::ClearProgress;
using memtl::cli::Command;
using memtl::cli::CommandProgress;
using memtl::cli::Emit;
using memtl::cli::Fail;
using memtl::cli::FlushHelp;
using memtl::cli::Format;
using memtl::cli::ParseCommandLine;
using memtl::cli::Parsed;
using memtl::cli::PrintErrLine;
using memtl::cli::PrintNotes;

// The largest tensors alive at the peak that the HTML report lists.
constexpr size_t kReportPeakTensors = 20;

// The status when a --budget is exceeded (memtl summary): distinct from 2,
// so that CI can tell "over budget" from "could not analyze".
constexpr int kOverBudgetStatus = 3;

// The -o files, opened before the analysis (cli/output_path.h).
memtl::cli::OpenedOutputs outputs;

std::string PartialNote(const memtl::ReadInfo& info) {
  return "the trace is truncated: analyzed up to line " + std::to_string(info.stopped_at_line - 1) +
         ", the last complete record";
}

// --strict: the first diagnostic, as the one-line error.
memtl::Status StrictError(const std::string& path, const memtl::Diagnostics& diagnostics) {
  const auto& [kind, entry] = *diagnostics.entries().begin();
  return memtl::Status::Error(memtl::QuotePath(path) + ": --strict: " + kind + " (" +
                              std::to_string(entry.count) + "x, e.g. " + entry.example + ")");
}

// Reads and analyzes the one TRACE argument (a raw timeline is read only);
// prints notes to stderr.
memtl::Expected<memtl::FileAnalysis> LoadAny(const Args& args) {
  // "-": standard input, through its /dev name (pipes are read as streams).
  const std::string path = args.trace == "-" ? "/dev/stdin" : args.trace;
  memtl::ReadOptions options;
  options.partial = args.partial;
  options.threaded = args.threads > 1;
  options.progress = &CommandProgress();
  options.et_path = args.et;
  // Only these two print shapes; every other command reads without them.
  options.keep_shapes = args.command == Command::kEvents || args.command == Command::kExplain ||
                        args.command == Command::kWhatIf;
  memtl::cli::ShowProgress(args.trace == "-" ? "standard input" : memtl::QuotePath(args.trace),
                           !args.quiet);
  auto file = memtl::AnalyzeAnyFile(path, options);
  if (!file.ok()) return file;
  const memtl::Diagnostics& diagnostics = memtl::DiagnosticsOf(file.value());
  const memtl::ReadInfo& info = memtl::ReadInfoOf(file.value());
  if (args.strict && !diagnostics.empty()) return StrictError(path, diagnostics);
  if (info.stopped_early)
    PrintErrLine("memtl: " + memtl::QuotePath(path) + ": " + PartialNote(info));
  if (!info.note.empty() && !args.quiet) PrintErrLine("memtl: note: " + info.note);
  return file;
}

// LoadAny for the commands that read the stages: a raw timeline has none.
memtl::Expected<std::unique_ptr<memtl::Analysis>> Load(const Args& args) {
  auto file = LoadAny(args);
  if (!file.ok()) return file.status();
  if (auto* a = std::get_if<std::unique_ptr<memtl::Analysis>>(&file.value())) return std::move(*a);
  return memtl::RawTimelineHasNoStages(args.trace == "-" ? "/dev/stdin" : args.trace);
}

void PrintTimings(const Args& args, const memtl::PhaseTimer& timer) {
  if (!args.timings) return;
  ClearProgress();
  std::fputs(memtl::FormatTimings(timer).c_str(), stderr);
}

// A command's whole answer: to -o's file (opened before the analysis,
// replaced atomically now), else to standard output. `what`: said after the
// file's name on the result line, e.g. " (diff of A and B)".
int Output(const Args& args, const std::string& text, const std::string& what = "") {
  if (outputs.files.empty() || outputs.files.front() == nullptr) return Emit(text);
  memtl::AtomicFile& file = *outputs.files.front();
  if (auto s = file.Write(text); !s.ok()) return Fail(s.message());
  if (auto s = file.Commit(); !s.ok()) return Fail(s.message());
  if (!args.quiet) PrintErrLine("memtl: wrote " + memtl::QuotePath(file.path()) + what);
  return 0;
}

int RunGraph(const Args& args) {
  auto analysis = Load(args);
  if (!analysis.ok()) return Fail(analysis.status().message());
  const memtl::Analysis& a = *analysis.value();
  if (int rc = Output(args, memtl::FormatDataFlow(a.trace, a.keys, *a.graph)); rc != 0) return rc;
  PrintTimings(args, a.timer);
  PrintNotes(a.diagnostics);
  return 0;
}

// The options the commands run the pipeline with; `peak_top` adds the
// peak report with that many tensors.
memtl::PipelineOptions OptionsOf(const Args& args, std::optional<size_t> peak_top, bool report) {
  memtl::PipelineOptions options;
  options.device = args.device;
  options.explain_peak = peak_top;
  options.report = report;
  return options;
}

// --strict: a diagnostic is an error (the timeline adds its own: a row
// below zero).
std::optional<memtl::Status> StrictFailure(const Args& args, const memtl::Diagnostics& d) {
  if (!args.strict || d.empty()) return std::nullopt;
  return StrictError(args.trace == "-" ? "/dev/stdin" : args.trace, d);
}

// The whole pipeline through the timeline, every stage kept.
memtl::Expected<std::unique_ptr<memtl::Categorized>> Categorize(
    const Args& args, std::optional<size_t> peak_top = std::nullopt) {
  auto analysis = Load(args);
  if (!analysis.ok()) return analysis.status();
  auto c = memtl::Categorize(std::move(analysis.value()), OptionsOf(args, peak_top, false));
  if (c.ok()) {
    if (auto failed = StrictFailure(args, c.value()->analysis->diagnostics)) return *failed;
  }
  return c;
}

// The pipeline for an export: the peak (`peak_top` tensors) and the report
// are made before the stages go.
memtl::Expected<std::unique_ptr<memtl::Exportable>> CategorizeForExport(
    const Args& args, std::optional<size_t> peak_top, bool report) {
  auto analysis = LoadAny(args);
  if (!analysis.ok()) return analysis.status();
  auto c =
      memtl::CategorizeForExport(std::move(analysis.value()), OptionsOf(args, peak_top, report));
  if (c.ok()) {
    if (auto failed = StrictFailure(args, c.value()->view.diagnostics)) return *failed;
  }
  return c;
}

int RunPeak(const Args& args) {
  // The peak is made before the stages go; folded stacks hold every live
  // tensor.
  const bool folded = args.format == Format::kFolded;
  auto c = CategorizeForExport(args, folded ? std::numeric_limits<size_t>::max() : args.top, false);
  if (!c.ok()) return Fail(c.status().message());
  const memtl::PeakReport& report = *c.value()->peak;
  const std::string text = folded                         ? memtl::FoldedPeak(report)
                           : args.format == Format::kJson ? memtl::PeakJson(report)
                                                          : memtl::FormatPeak(report);
  if (int rc = Output(args, text); rc != 0) return rc;
  PrintNotes(c.value()->view.diagnostics);
  return 0;
}

// What the explaining outputs read, from a pipeline run that kept every
// stage (shapes when the reader kept them).
memtl::ExplainInput ExplainInputOf(const memtl::Categorized& c) {
  const memtl::Analysis& a = *c.analysis;
  return memtl::ExplainInput{a.trace,  a.keys,        *a.tree,
                             *a.graph, c.categories,  c.timeline,
                             c.device, &a.key_shapes, c.inferred ? &a.inferred : nullptr};
}

int RunEvents(const Args& args) {
  auto c = Categorize(args);
  if (!c.ok()) return Fail(c.status().message());
  const memtl::Analysis& a = *c.value()->analysis;
  const memtl::EventsFormat format = args.format == Format::kTsv ? memtl::EventsFormat::kTsv
                                     : args.format == Format::kJson
                                         ? memtl::EventsFormat::kJsonLines
                                         : memtl::EventsFormat::kText;
  const memtl::ExplainInput in = ExplainInputOf(*c.value());
  if (int rc = Output(args, memtl::FormatEvents(in, format)); rc != 0) return rc;
  PrintNotes(a.diagnostics);
  return 0;
}

int RunExplain(const Args& args) {
  const auto ref = memtl::ParseTensorRef(args.tensor);
  const auto alloc = memtl::ParseAllocationRef(args.tensor);
  if (!ref && !alloc) {
    return Fail("not a tensor: " + memtl::Quote(args.tensor) +
                " (write T12 for every version of tensor 12, T12:v1 for one; in a Kineto trace, "
                "A12 for allocation 12)");
  }
  auto c = Categorize(args);
  if (!c.ok()) return Fail(c.status().message());
  const memtl::Analysis& a = *c.value()->analysis;
  const memtl::ExplainInput in = ExplainInputOf(*c.value());
  if (!alloc && in.inferred != nullptr) {
    return Fail(memtl::QuotePath(args.trace) +
                ": the trace records no tensors (a Kineto trace); its categories are inferred "
                "per allocation: name one as A12 (memtl peak lists the largest)");
  }
  auto text =
      alloc ? memtl::ExplainAllocation(in, *alloc, args.format == Format::kJson)
            : memtl::ExplainTensor({in, *a.sizes, &a.schemas}, *ref, args.format == Format::kJson);
  if (!text.ok()) return Fail(memtl::QuotePath(args.trace) + ": " + text.status().message());
  if (int rc = Output(args, text.value()); rc != 0) return rc;
  PrintNotes(a.diagnostics);
  return 0;
}

// The summary of `args.trace` (every stage kept: the tables read the
// records); of a raw timeline, its categories only.
memtl::Expected<memtl::Summary> SummaryOf(const Args& args, size_t top) {
  auto file = LoadAny(args);
  if (!file.ok()) return file.status();
  if (auto* raw = std::get_if<std::unique_ptr<memtl::RawTimelineRead>>(&file.value())) {
    auto e = memtl::CategorizeForExport(std::move(*raw), OptionsOf(args, std::nullopt, false));
    if (!e.ok()) return e.status();
    const memtl::Exportable& x = *e.value();
    if (auto failed = StrictFailure(args, x.view.diagnostics)) return *failed;
    PrintNotes(x.view.diagnostics);
    return memtl::SummarizeTimeline(x.view.trace, x.timeline, x.categories, args.trace);
  }
  auto c = memtl::Categorize(std::move(std::get<std::unique_ptr<memtl::Analysis>>(file.value())),
                             OptionsOf(args, std::nullopt, false));
  if (!c.ok()) return c.status();
  const memtl::Analysis& a = *c.value()->analysis;
  if (auto failed = StrictFailure(args, a.diagnostics)) return *failed;
  PrintNotes(a.diagnostics);
  return memtl::Summarize(ExplainInputOf(*c.value()), args.trace, top);
}

int RunSummary(const Args& args) {
  std::vector<memtl::Budget> budgets;
  for (const std::string& b : args.budgets) {
    auto parsed = memtl::ParseBudget(b);
    if (!parsed.ok()) return Fail(parsed.status().message());
    budgets.push_back(parsed.value());
  }
  auto s = SummaryOf(args, args.summary_top);
  if (!s.ok()) return Fail(s.status().message());
  const std::string text = args.format == Format::kJson ? memtl::SummaryJson(s.value())
                                                        : memtl::FormatSummary(s.value());
  if (int rc = Output(args, text); rc != 0) return rc;
  const std::vector<std::string> over = memtl::CheckBudgets(s.value(), budgets);
  for (const std::string& line : over)
    PrintErrLine("memtl: " + memtl::QuotePath(args.trace) + ": " + line);
  return over.empty() ? 0 : kOverBudgetStatus;
}

int RunDiff(const Args& args) {
  // Enough rows that an op in one run's top rows is found in the other's.
  constexpr size_t kDiffTop = 50;
  auto a = SummaryOf(args, kDiffTop);
  if (!a.ok()) return Fail(a.status().message());
  Args second = args;
  second.trace = args.trace_b;
  second.et = args.et_b;
  auto b = SummaryOf(second, kDiffTop);
  if (!b.ok()) return Fail(b.status().message());
  const std::string text = args.format == Format::kJson   ? memtl::DiffJson(a.value(), b.value())
                           : args.format == Format::kHtml ? memtl::DiffHtml(a.value(), b.value())
                                                          : memtl::FormatDiff(a.value(), b.value());
  return Output(
      args, text,
      " (diff of " + memtl::QuotePath(args.trace) + " and " + memtl::QuotePath(args.trace_b) + ")");
}

int RunRanks(const Args& args) {
  auto paths = memtl::cli::RankTraces(args.traces);
  if (!paths.ok()) return Fail(paths.status().message());
  const Format format = args.format;
  const int jobs = args.jobs > 0
                       ? args.jobs
                       : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  memtl::cli::ShowProgress("", !args.quiet);
  std::vector<memtl::RankRow> rows =
      memtl::cli::AnalyzeRanks(paths.value(), jobs, &CommandProgress());
  memtl::cli::StopProgress();
  auto report = memtl::CompareRanks(std::move(rows));
  if (!report.ok()) return Fail(report.status().message());
  const std::string text = format == Format::kJson   ? memtl::RanksJson(report.value())
                           : format == Format::kHtml ? memtl::RanksHtml(report.value())
                                                     : memtl::FormatRanks(report.value());
  int failed = 0;
  for (const memtl::RankRow& row : report.value().rows) failed += row.error.empty() ? 0 : 1;
  if (int rc = Output(args, text, " (" + std::to_string(report.value().rows.size()) + " ranks)");
      rc != 0)
    return rc;
  // Every rank's row is out; a rank that could not be analyzed at all
  // makes the status that of an error.
  if (failed > 0) {
    PrintErrLine("memtl: " + std::to_string(failed) + " of " +
                 std::to_string(report.value().rows.size()) +
                 " traces could not be analyzed (their rows say why)");
    return 2;
  }
  return 0;
}

int RunFit(const Args& args) {
  const memtl::FitBy by = args.fit_by == "seq" ? memtl::FitBy::kSequence : memtl::FitBy::kBatch;
  memtl::FitQuestion q;
  if (args.fit_at > 0) q.at = args.fit_at;
  if (!args.fit_budget.empty()) {
    auto b = memtl::ParseBudget("total=" + args.fit_budget);
    if (!b.ok())
      return Fail("--budget " + memtl::Quote(args.fit_budget) + ": " + b.status().message());
    q.budget = b.value().bytes;
  }
  auto fit = memtl::FitTraces(args.traces, by, args.scales);
  if (!fit.ok()) return Fail(fit.status().message());
  return Emit(args.format == Format::kJson ? memtl::FitJson(fit.value(), q)
                                           : memtl::FormatFit(fit.value(), q));
}

int RunWhatIf(const Args& args) {
  auto changes = memtl::cli::WhatIfChangesOf(args);
  if (!changes.ok()) return Fail(changes.status().message());
  const Format format = args.format;
  auto c = Categorize(args);
  if (!c.ok()) return Fail(c.status().message());
  auto r = memtl::WhatIf(ExplainInputOf(*c.value()), changes.value(), args.trace);
  if (!r.ok()) return Fail(r.status().message());
  PrintNotes(c.value()->analysis->diagnostics);
  const std::string text = format == Format::kJson   ? memtl::WhatIfJson(r.value())
                           : format == Format::kHtml ? memtl::WhatIfHtml(r.value())
                                                     : memtl::FormatWhatIf(r.value());
  return Output(args, text, " (whatif of " + memtl::QuotePath(args.trace) + ")");
}

int RunCategories(const Args& args) {
  auto c = Categorize(args);
  if (!c.ok()) return Fail(c.status().message());
  const memtl::Analysis& a = *c.value()->analysis;
  if (int rc = Output(
          args, memtl::FormatTimeline(a.trace, a.keys, c.value()->timeline, c.value()->categories));
      rc != 0) {
    return rc;
  }
  PrintNotes(c.value()->analysis->diagnostics);
  return 0;
}

// The analysis is large and about to be freed by process exit anyway; keep
// it alive instead of spending time in destructors (the pointer stays
// reachable, so leak checkers stay quiet).
template <typename T>
void KeepUntilExit(std::unique_ptr<T> p) {
  static std::vector<std::unique_ptr<T>>* kept = new std::vector<std::unique_ptr<T>>();
  kept->push_back(std::move(p));
}

// The result line (without its newline): what was written, and the exported device's peak (all
// categories together, as the plot's stack) and when, from the first row:
// the figures `memtl peak` gives.
std::string ResultLine(const Args& args, const memtl::Trace& trace, const memtl::PeakReport& peak,
                       memtl::DeviceIndex device) {
  std::string written;
  for (const std::string& o : args.outputs)
    written += (written.empty() ? "" : ", ") +
               (o == "-" ? std::string("standard output") : memtl::QuotePath(o));
  // Devices are checked by the reader (a known type and an index); quoted
  // all the same, as any name from the trace.
  const std::string name =
      memtl::QuotePath(device < trace.devices.size() ? trace.devices[device].name : "cpu");
  std::string line = "memtl: wrote " + written + " (" + name;
  if (!peak.any) return line + ": no memory events)";
  char when[48];
  std::snprintf(when, sizeof when, "%.3f ms", static_cast<double>(peak.since_start_us) / 1000.0);
  return line + " peak " + memtl::HumanBytes(peak.bytes) + " at " + when + ")";
}

// The export format of -o -, from --format (checked by the command line).
memtl::Expected<memtl::ExportFormat> StdoutExportFormat(Format format) {
  for (const memtl::ExportSuffix& s : memtl::kExportSuffixes) {
    if (s.name == NameOf(format)) return s.format;
  }
  return memtl::ExportFormat::kHtml;
}

int RunExport(const Args& args) {
  // The HTML report shows who holds the memory at the peak.
  bool html = false;
  for (const std::string& o : args.outputs)
    if (o == "-") {
      html |= args.format == Format::kHtml;
    } else if (auto f = memtl::FormatForPath(o); f.ok()) {
      html |= f.value() == memtl::ExportFormat::kHtml;
    }
  auto c = CategorizeForExport(
      args, html ? std::optional<size_t>(kReportPeakTensors) : std::nullopt, html);
  if (!c.ok()) return Fail(c.status().message());
  memtl::ExportView& a = c.value()->view;
  const memtl::DeviceIndex device = c.value()->device;
  memtl::ExportInput in{a.trace, c.value()->timeline, c.value()->categories, a.diagnostics, a.name,
                        ""};
  if (c.value()->peak) in.peak = &*c.value()->peak;
  if (c.value()->report) in.report = &*c.value()->report;
  if (a.read_info.stopped_early) in.note = PartialNote(a.read_info);
  in.threaded = args.threads > 1;
  CommandProgress().Set("writing");
  // Every output is written in full before any is published: a run that
  // fails leaves none of them (a stream, written in place, excepted).
  for (size_t i = 0; i < outputs.files.size(); ++i) {
    const std::string& o = outputs.paths[i];
    auto format = o != "-" ? memtl::FormatForPath(o) : StdoutExportFormat(args.format);
    if (!format.ok()) return Fail(format.status().message());
    if (auto s = memtl::WriteExport(in, *outputs.files[i], device, format.value()); !s.ok())
      return Fail(s.message());
  }
  for (const auto& file : outputs.files) {
    if (auto s = file->Publish(); !s.ok()) return Fail(s.message());
  }
  a.timer.Mark("export");
  PrintTimings(args, a.timer);
  PrintNotes(a.diagnostics);
  if (!args.quiet) {
    // The report the HTML export asked for has the peak already.
    const memtl::Exportable& cz = *c.value();
    PrintErrLine(ResultLine(
        args, a.trace, cz.peak ? *cz.peak : memtl::FindPeak(cz.timeline, cz.categories, device),
        device));
  }
  KeepUntilExit(std::move(c.value()));
  return 0;
}

// The command the first word named.
int Run(const Args& args) {
  switch (args.command) {
    case Command::kExport:
      return RunExport(args);
    case Command::kPeak:
      return RunPeak(args);
    case Command::kExplain:
      return RunExplain(args);
    case Command::kSummary:
      return RunSummary(args);
    case Command::kDiff:
      return RunDiff(args);
    case Command::kRanks:
      return RunRanks(args);
    case Command::kFit:
      return RunFit(args);
    case Command::kWhatIf:
      return RunWhatIf(args);
    case Command::kEvents:
      return RunEvents(args);
    case Command::kCategories:
      return RunCategories(args);
    case Command::kGraph:
      return RunGraph(args);
  }
  return RunExport(args);
}

}  // namespace

int main(int argc, char** argv) {
#if defined(__GLIBC__)
  // glibc maps blocks from 128 KiB up with mmap, but raises that threshold
  // (up to 32 MiB) each time such a block is freed; from then on arrays
  // that a stage frees stay in malloc's heaps, or in a helper thread's
  // arena, instead of going back to the kernel, and a later stage's arrays
  // come on top of them. A fixed threshold keeps every large array mapped,
  // so freeing it lowers the resident memory (docs/performance.md has the
  // figures). 64 KiB rather than 256: a 10^5-event trace's arrays are
  // 64-256 KiB, and below the threshold they were freed into the heap's
  // holes instead of going back.
  mallopt(M_MMAP_THRESHOLD, 64 << 10);
#endif
  memtl::InstallCleanupOnSignals();  // Ctrl-C leaves no temporary output behind
  // For the Python package (python/memtl/__init__.py): the export's suffix
  // table, in order, so that it refuses a path before it records.
  if (argc == 2 && std::string_view(argv[1]) == "--formats")
    return Emit(memtl::ExportSuffixesJson());
  try {
    Args args;
    const Parsed parsed = ParseCommandLine(argc, argv, args);
    switch (parsed.outcome) {
      case Parsed::Outcome::kRun:
        break;
      case Parsed::Outcome::kPrinted:
        return FlushHelp(parsed.status);
      case Parsed::Outcome::kUsage:
        std::fputs(parsed.message.c_str(), stderr);
        return parsed.status;
      case Parsed::Outcome::kError:
        return Fail(parsed.message);
    }
    // Before any analysis: a --device that names no device (the pipeline
    // checks it again where a raw timeline takes it as its device's name),
    // and an output that names an input, or cannot be written, fail here
    // and leave nothing behind.
    if (auto s = memtl::CheckDeviceOption(args.device); !s.ok()) return Fail(s.message());
    auto opened = memtl::cli::OpenOutputs(args, memtl::cli::InputsOf(args));
    if (!opened.ok()) return Fail(opened.status().message());
    outputs = std::move(opened.value());
    const int rc = Run(args);
    memtl::cli::StopProgress();
    return rc;
  } catch (const std::bad_alloc&) {
    return Fail("out of memory");
  } catch (const std::exception& e) {
    return Fail(std::string("internal error: ") + e.what());
  }
}

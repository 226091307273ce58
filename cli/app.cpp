#include "cli/app.h"

#include <algorithm>

#include <CLI/CLI.hpp>

#include "core/model/quote.h"

namespace memtl::cli {

std::string_view NameOf(Command command) {
  for (const CommandName& c : kCommands) {
    if (c.command == command) return c.name;
  }
  return "export";
}

std::string_view NameOf(Format format) {
  for (const FormatName& f : kFormats) {
    if (f.format == format) return f.name;
  }
  return "text";
}

std::vector<Format> FormatsOf(Command command) {
  switch (command) {
    case Command::kExport:
      return {Format::kJson, Format::kJsonGz, Format::kRaw, Format::kHtml};
    case Command::kEvents:
      return {Format::kText, Format::kTsv, Format::kJson};
    case Command::kPeak:
      return {Format::kText, Format::kJson, Format::kFolded};
    case Command::kExplain:
    case Command::kSummary:
    case Command::kFit:
      return {Format::kText, Format::kJson};
    case Command::kDiff:
    case Command::kRanks:
    case Command::kWhatIf:
      return {Format::kText, Format::kJson, Format::kHtml};
    case Command::kCategories:
    case Command::kGraph:
      return {Format::kText};
  }
  return {Format::kText};
}

namespace {

// --format, with the names of the formats `command` writes.
void AddFormatOption(CLI::App* cmd, Args& args, Command command, const std::string& help) {
  std::vector<std::string> names;
  for (const Format f : FormatsOf(command)) names.emplace_back(NameOf(f));
  cmd->add_option_function<std::string>(
         "--format",
         [&args](const std::string& name) {
           for (const FormatName& f : kFormats) {
             if (f.name == name) args.format = f.format;
           }
         },
         help)
      ->check(CLI::IsMember(names));
}

// The options every command takes.
void AddReadOptions(CLI::App* cmd, Args& args) {
  cmd->add_option("TRACE", args.trace,
                  "the trace (memtl-trace JSON Lines, plain or gzip); - reads standard input")
      ->required();
  cmd->add_flag("--partial", args.partial, "read a truncated trace up to its last complete record");
  cmd->add_flag("--strict", args.strict,
                "treat trace inconsistencies (double frees, free sizes that differ from the "
                "allocation, ops with no end) as errors");
  cmd->add_option("--threads", args.threads,
                  "1: read and write on the calling thread only; 2: inflate and write on a "
                  "second thread, and parse traces of 64 MiB or more on parse workers (one "
                  "per core, 2 to 4); the output bytes are the same")
      ->check(CLI::Range(1, 2))
      ->default_val(2);
}

// The commands that time their stages (export, graph): read, analysis,
// categorization and the outputs.
void AddTimingsOption(CLI::App* cmd, Args& args) {
  cmd->add_flag("--timings", args.timings,
                "print each stage's wall and CPU time, peak memory, page faults and the memory "
                "still resident after it on stderr");
}

// The commands of one trace: an execution trace may go with it.
void AddEtOption(CLI::App* cmd, Args& args) {
  cmd->add_option("--et", args.et,
                  "an execution trace (ExecutionTraceObserver) of the run of a Kineto TRACE: "
                  "joined to it by record function id, it gives tensors and categories")
      ->option_text("FILE");
}

// The commands that print their answer: -o puts it in a file instead, as
// diff and ranks do (output_path.h's OpenOutputs checks its suffix).
void AddPrintedOutputOption(CLI::App* cmd, Args& args, const char* formats) {
  cmd->add_option(
         "-o,--output", args.outputs,
         std::string("write to this file instead of standard output (atomically), ") + formats)
      ->expected(1);
}

// `memtl export`.
void AddExportCommand(CLI::App& app, Args& args) {
  CLI::App* exp = app.add_subcommand(
      "export",
      "write the memory timeline as PyTorch's export_memory_timeline does, chosen by each "
      "output's suffix: .html (report with plot), .raw.json.gz (raw events), .json.gz / .json "
      "([times_us, sizes by category])");
  AddReadOptions(exp, args);
  AddEtOption(exp, args);
  AddTimingsOption(exp, args);
  exp->add_option("-o,--output", args.outputs,
                  "output file, its format chosen by its suffix; - writes standard output in "
                  "the --format given; repeat to write several from one analysis")
      ->required()
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  exp->add_option(
      "--device", args.device,
      "device to export (default: the accelerator whose memory peaks highest, else cpu)");
  AddFormatOption(exp, args, Command::kExport,
                  "the format of -o -: json ([times_us, sizes]), json.gz, raw (raw events, "
                  "gzip) or html");
  exp->add_flag("-q,--quiet", args.quiet, "no result line on stderr");
  exp->callback([&args] { args.command = Command::kExport; });
}

// `memtl events`.
void AddEventsCommand(CLI::App& app, Args& args) {
  CLI::App* events = app.add_subcommand(
      "events",
      "print the timeline with context: time, action, tensor(version), bytes, category, "
      "device, the op that made the change, its modules and phase, and a model's state by name");
  AddReadOptions(events, args);
  AddEtOption(events, args);
  AddFormatOption(events, args, Command::kEvents,
                  "text (for people, the default), tsv (with a header line) or json (JSON Lines)");
  AddPrintedOutputOption(
      events, args,
      "in the --format given, else by its suffix: .json or .jsonl (JSON Lines), .tsv, any "
      "other text");
  events->callback([&args] { args.command = Command::kEvents; });
}

// `memtl categories`.
void AddCategoriesCommand(CLI::App& app, Args& args) {
  CLI::App* cat = app.add_subcommand(
      "categories", "print the timeline: action, tensor(version), bytes, category");
  AddReadOptions(cat, args);
  AddEtOption(cat, args);
  AddPrintedOutputOption(cat, args, "as text");
  cat->callback([&args] { args.command = Command::kCategories; });
}

// `memtl peak`.
void AddPeakCommand(CLI::App& app, Args& args) {
  CLI::App* peak = app.add_subcommand(
      "peak",
      "explain the peak: the exported device's largest total, by category, and the largest "
      "tensors alive then with the op that created each, its modules and phase");
  AddReadOptions(peak, args);
  AddEtOption(peak, args);
  peak->add_option("--device", args.device,
                   "device (default: the accelerator whose memory peaks highest, else cpu)");
  peak->add_option("--top", args.top, "how many of the largest live tensors to list")
      ->default_val(20);
  AddFormatOption(peak, args, Command::kPeak,
                  "text (for people, the default), json (for programs) or folded (the bytes "
                  "alive at the peak as folded stacks, for flame graph tools; every tensor)");
  AddPrintedOutputOption(
      peak, args, "in the --format given, else by its suffix: .json, .folded, any other text");
  peak->callback([&args] { args.command = Command::kPeak; });
}

// `memtl explain`.
void AddExplainCommand(CLI::App& app, Args& args) {
  CLI::App* explain = app.add_subcommand(
      "explain",
      "why a tensor has its category: the passes and rules that decided it, the op that created "
      "it with its modules, phase and call site, what that op read, which ops read it, its size "
      "and its storage's lifetime");
  AddReadOptions(explain, args);
  AddEtOption(explain, args);
  explain->add_option("TENSOR", args.tensor, "the tensor: T12 (every version) or T12:v1")
      ->required();
  AddFormatOption(explain, args, Command::kExplain,
                  "text (the default) or json (an object per version)");
  AddPrintedOutputOption(explain, args,
                         "in the --format given, else by its suffix: .json, any other text");
  explain->callback([&args] { args.command = Command::kExplain; });
}

// `memtl summary`.
void AddSummaryCommand(CLI::App& app, Args& args) {
  CLI::App* summary = app.add_subcommand(
      "summary",
      "a few numbers per device for CI and comparisons: the peak, each category at the peak and "
      "its largest over the run, the ops and modules holding the most at the peak; --budget "
      "fails the run (status 3) when a category or the total goes over");
  AddReadOptions(summary, args);
  AddEtOption(summary, args);
  AddFormatOption(summary, args, Command::kSummary, "text (the default) or json");
  summary->add_option("--top", args.summary_top, "how many ops and modules to list")
      ->default_val(10);
  summary->add_option("--budget", args.budgets,
                      "CATEGORY=SIZE or total=SIZE, e.g. ACTIVATION=2GiB (repeatable): exit "
                      "with status 3 when a device goes over");
  AddPrintedOutputOption(summary, args,
                         "in the --format given, else by its suffix: .json, any other text");
  summary->callback([&args] { args.command = Command::kSummary; });
}

// `memtl diff`.
void AddDiffCommand(CLI::App& app, Args& args) {
  CLI::App* diff = app.add_subcommand(
      "diff",
      "compare two runs or ranks: per device, the peak and each category's largest, and the ops "
      "and modules whose bytes at the peak differ most");
  AddReadOptions(diff, args);
  diff->add_option("B", args.trace_b, "the second trace")->required();
  AddEtOption(diff, args);
  diff->add_option("--et-b", args.et_b,
                   "an execution trace of the run of a Kineto trace B, joined to it as --et is "
                   "to TRACE")
      ->option_text("FILE");
  AddFormatOption(diff, args, Command::kDiff,
                  "text (the default), json, or html (one self-contained page: bars of both "
                  "peaks by category, sortable tables)");
  diff->add_option("-o,--output", args.outputs,
                   "write to this file instead of standard output (atomically), in the "
                   "--format given, else by its suffix: .html, .json, any other text")
      ->expected(1);
  diff->callback([&args] { args.command = Command::kDiff; });
}

// `memtl ranks`.
void AddRanksCommand(CLI::App& app, Args& args) {
  CLI::App* ranks = app.add_subcommand(
      "ranks",
      "compare the ranks of one distributed run: per rank its peak and when, the categories at "
      "the peak and the ProfilerStep it falls in; the skew (largest peak over the median) and "
      "the outlier ranks");
  ranks
      ->add_option("TRACE", args.traces,
                   "the ranks' traces: files, directories (every trace in them) or quoted glob "
                   "patterns")
      ->required();
  AddFormatOption(ranks, args, Command::kRanks,
                  "text (the default), json, or html (a curve per rank and the table)");
  ranks
      ->add_option("-o,--output", args.outputs,
                   "write to this file instead of standard output (atomically), in the --format "
                   "given, else by its suffix: .html (one curve per rank and the table), .json, "
                   "any other text")
      ->expected(1);
  ranks->add_option("-j,--jobs", args.jobs, "traces analyzed at once (default: one per core)")
      ->check(CLI::Range(1, 4096));
  ranks->add_flag("-q,--quiet", args.quiet, "no progress or result line on stderr");
  ranks->callback([&args] { args.command = Command::kRanks; });
}

// `memtl fit`.
void AddFitCommand(CLI::App& app, Args& args) {
  CLI::App* fit = app.add_subcommand(
      "fit",
      "fit each device's peak against the runs' batch size (linear) or sequence length (linear "
      "plus quadratic), from traces of one model at several scales: the peak at --at, the "
      "largest scale within --budget");
  fit->add_option("TRACE", args.traces, "the runs' traces (two or more; three for --by seq)")
      ->required();
  fit->add_option("--by", args.fit_by,
                  "batch (the largest input's first dimension, the default) or seq (its second)")
      ->check(CLI::IsMember({"batch", "seq"}));
  fit->add_option("--scale", args.scales,
                  "each trace's scale, in order, instead of reading it from the inputs' shapes")
      ->delimiter(',');
  fit->add_option("--at", args.fit_at, "the scale to predict the peak at")
      ->check(CLI::PositiveNumber);
  fit->add_option("--budget", args.fit_budget,
                  "the largest scale whose predicted peak fits SIZE (bytes, or with KB, MB, GB, "
                  "KiB, MiB, GiB)")
      ->option_text("SIZE");
  AddFormatOption(fit, args, Command::kFit, "text (the default) or json");
  fit->callback([&args] { args.command = Command::kFit; });
}

// `memtl whatif`.
void AddWhatIfCommand(CLI::App& app, Args& args) {
  CLI::App* whatif = app.add_subcommand(
      "whatif",
      "replay the run with changes (sharding, checkpointing, set-to-none, another optimizer or "
      "dtype) and print each device's peak before and after, by category");
  AddReadOptions(whatif, args);
  AddEtOption(whatif, args);
  whatif
      ->add_option("--shard", args.shards,
                   "KIND=N, KIND optimizer (ZeRO-1), grads (ZeRO-2) or params (ZeRO-3, FSDP; "
                   "needs --wrap): divide those bytes over N ranks (repeatable)")
      ->option_text("KIND=N");
  whatif
      ->add_option("--wrap", args.wrap,
                   "the units --shard params gathers whole while they run, and --shard grads "
                   "reduces at the end of their backward: modules whose name or path matches "
                   "(shell wildcards, e.g. 'TransformerEncoderLayer_*')")
      ->option_text("PATTERN");
  whatif
      ->add_option("--checkpoint", args.checkpoints,
                   "recompute the matched modules' activations in the backward instead of "
                   "keeping them (torch.utils.checkpoint; repeatable)")
      ->option_text("PATTERN");
  whatif->add_flag("--set-to-none", args.set_to_none,
                   "free the gradients at zero_grad (zero_grad(set_to_none=True))");
  whatif->add_flag("--no-set-to-none", args.no_set_to_none,
                   "keep the gradients and zero them in place (set_to_none=False)");
  whatif->add_option("--optimizer", args.optimizer,
                     "replay with this optimizer's state: sgd, sgd-momentum, adam, adamw, "
                     "adam-amsgrad, adamax, nadam, radam, adagrad, rmsprop, rmsprop-momentum, "
                     "adadelta, rprop, asgd");
  whatif
      ->add_option("--dtype", args.dtypes,
                   "KIND=DTYPE, KIND params, grads or optimizer, DTYPE bf16, fp16, fp32, fp64 "
                   "or fp8: those bytes at that element size (repeatable)")
      ->option_text("KIND=DTYPE");
  AddFormatOption(whatif, args, Command::kWhatIf, "text (the default), json or html");
  AddPrintedOutputOption(whatif, args,
                         "in the --format given, else by its suffix: .html, .json, any other text");
  whatif->callback([&args] { args.command = Command::kWhatIf; });
}

// `memtl graph`.
void AddGraphCommand(CLI::App& app, Args& args) {
  CLI::App* graph = app.add_subcommand(
      "graph",
      "print the versioned data-flow graph over top-level ops, in the layout of PyTorch's "
      "memory-profiler tests");
  AddReadOptions(graph, args);
  AddEtOption(graph, args);
  AddTimingsOption(graph, args);
  AddPrintedOutputOption(graph, args, "as text");
  graph->callback([&args] { args.command = Command::kGraph; });
}

// Builds the command line; `args` receives the values.
std::unique_ptr<CLI::App> MakeApp(Args& args) {
  auto app = std::make_unique<CLI::App>(
      "memtl: the memory timeline of a profiled PyTorch run, every byte categorized "
      "(parameter, optimizer state, input, activation, gradient, autograd detail, temporary, "
      "unknown)",
      "memtl");
  app->set_version_flag("-V,--version", "memtl " MEMTL_VERSION, "print memtl's version");
  app->require_subcommand(1);
  app->fallthrough(false);
  AddExportCommand(*app, args);
  AddEventsCommand(*app, args);
  AddCategoriesCommand(*app, args);
  AddPeakCommand(*app, args);
  AddExplainCommand(*app, args);
  AddSummaryCommand(*app, args);
  AddDiffCommand(*app, args);
  AddRanksCommand(*app, args);
  AddFitCommand(*app, args);
  AddWhatIfCommand(*app, args);
  AddGraphCommand(*app, args);
  return app;
}

}  // namespace

Parsed ParseCommandLine(int argc, char** argv, Args& args) {
  if (argc > 1 && argv[1][0] != '-') {
    const std::string first = argv[1];
    if (std::none_of(kCommands.begin(), kCommands.end(),
                     [&](const CommandName& c) { return c.name == first; })) {
      std::string names;
      for (const CommandName& c : kCommands)
        names += (names.empty() ? "" : ", ") + std::string(c.name);
      return {Parsed::Outcome::kError, 2,
              "unknown command " + Quote(first) + " (commands: " + names + "; see memtl --help)"};
    }
  }
  std::unique_ptr<CLI::App> app = MakeApp(args);
  try {
    app->parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return {Parsed::Outcome::kPrinted, app->exit(e), {}};  // the named command's help
  } catch (const CLI::CallForAllHelp& e) {
    return {Parsed::Outcome::kPrinted, app->exit(e), {}};
  } catch (const CLI::CallForVersion& e) {
    return {Parsed::Outcome::kPrinted, app->exit(e), {}};
  } catch (const CLI::ParseError& e) {
    if (argc == 1) return {Parsed::Outcome::kUsage, 2, app->help()};
    // The command's own help, where the first word names it.
    const std::string where = argv[1][0] != '-' ? std::string(" ") + argv[1] : std::string();
    return {Parsed::Outcome::kError, 2, std::string(e.what()) + " (see memtl" + where + " --help)"};
  }
  return {};
}

}  // namespace memtl::cli

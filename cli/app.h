// The memtl command's command line: its commands, their options and the
// values parsed into Args (CLI11, which only cli/app.cpp includes: its
// header-only code is the most expensive part of a build to compile).
// cli/memtl.cpp runs what it says.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace memtl::cli {

enum class Command : uint8_t {
  kExport,
  kPeak,
  kExplain,
  kSummary,
  kDiff,
  kRanks,
  kFit,
  kWhatIf,
  kEvents,
  kCategories,
  kGraph,
};

struct CommandName {
  Command command;
  std::string_view name;
};
inline constexpr std::array<CommandName, 11> kCommands = {{
    {Command::kExport, "export"},
    {Command::kPeak, "peak"},
    {Command::kExplain, "explain"},
    {Command::kSummary, "summary"},
    {Command::kDiff, "diff"},
    {Command::kRanks, "ranks"},
    {Command::kFit, "fit"},
    {Command::kWhatIf, "whatif"},
    {Command::kEvents, "events"},
    {Command::kCategories, "categories"},
    {Command::kGraph, "graph"},
}};
std::string_view NameOf(Command command);

// What a command writes: --format's names, or -o's suffix (FormatOfSuffix).
enum class Format : uint8_t {
  kUnset,   // neither given: the command's default (text; export: -o's suffix)
  kText,    // for people
  kTsv,     // events: a header line, then tab-separated rows
  kJson,    // an object (events: JSON Lines; export: [times_us, sizes])
  kJsonGz,  // export: the same, gzip
  kRaw,     // export: the raw events, gzip
  kHtml,    // one self-contained page
  kFolded,  // peak: folded stacks, for flame graph tools
};

struct FormatName {
  Format format;
  std::string_view name;
};
inline constexpr std::array<FormatName, 7> kFormats = {{
    {Format::kText, "text"},
    {Format::kTsv, "tsv"},
    {Format::kJson, "json"},
    {Format::kJsonGz, "json.gz"},
    {Format::kRaw, "raw"},
    {Format::kHtml, "html"},
    {Format::kFolded, "folded"},
}};
std::string_view NameOf(Format format);
// The formats `command` writes: --format's names, and what -o's suffix may
// choose (output_path.cpp).
std::vector<Format> FormatsOf(Command command);

struct Args {
  Command command = Command::kExport;  // set by the command line's first word
  std::string trace;
  std::vector<std::string> outputs;
  std::string device;
  Format format = Format::kUnset;        // --format, or -o's suffix (output_path.h)
  size_t top = 20;                       // peak: how many tensors
  size_t summary_top = 10;               // summary: how many ops and modules (a field of its own:
                                         // CLI11 sets every command's default, the last one wins)
  std::string tensor;                    // explain: "T12" or "T12:v1"
  std::string trace_b;                   // diff: the second trace
  std::string et;                        // an execution trace to join to a Kineto TRACE
  std::string et_b;                      // diff: one to join to a Kineto B
  std::vector<std::string> budgets;      // summary: CATEGORY=SIZE
  std::vector<std::string> traces;       // ranks: files, directories or glob patterns
  int jobs = 0;                          // ranks: traces analyzed at once (0: one per core)
  std::string fit_by = "batch";          // fit: batch or seq
  std::vector<double> scales;            // fit: each trace's scale, in order (empty: from inputs)
  double fit_at = 0;                     // fit: the scale to predict at (0: none)
  std::string fit_budget;                // fit: SIZE, as --budget's sizes
  std::vector<std::string> shards;       // whatif: KIND=N (optimizer, grads, params)
  std::string wrap;                      // whatif: the units of --shard params (a module pattern)
  std::vector<std::string> checkpoints;  // whatif: module patterns
  bool set_to_none = false;              // whatif: --set-to-none
  bool no_set_to_none = false;           // whatif: --no-set-to-none
  std::string optimizer;                 // whatif: the optimizer to replay with
  std::vector<std::string> dtypes;       // whatif: KIND=DTYPE (params, grads, optimizer)
  bool partial = false;
  bool strict = false;
  bool timings = false;
  bool quiet = false;
  int threads = 2;
};

// What parsing a command line came to.
struct Parsed {
  enum class Outcome {
    kRun,      // `args` holds a command to run
    kPrinted,  // --help or --version printed on std::cout; exit with `status`
    kUsage,    // no arguments: `message` is the help, for stderr; exit with 2
    kError,    // `message` is the one-line error, without "memtl: "
  };
  Outcome outcome = Outcome::kRun;
  int status = 0;
  std::string message;
};

// Parses argv into `args`. A first word that is no option and no command is
// an error of its own (CLI11 would call it an unexpected argument).
Parsed ParseCommandLine(int argc, char** argv, Args& args);

}  // namespace memtl::cli

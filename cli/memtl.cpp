// The memtl command: parses flags and runs the pipeline stages in order.
// Every failure is one line on stderr and exit status 2.
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "core/pipeline/analysis.h"

namespace {

constexpr const char* kUsage =
    "usage: memtl graph TRACE [--partial]\n"
    "\n"
    "commands:\n"
    "  graph TRACE   print the versioned data-flow graph over top-level ops, in the\n"
    "                layout of PyTorch's memory-profiler tests\n"
    "\n"
    "options:\n"
    "  --partial     read a truncated trace up to its last complete record\n"
    "  -h, --help    show this help\n";

int Fail(const std::string& message) {
  std::cerr << "memtl: " << message << "\n";
  return 2;
}

struct Args {
  std::string command;
  std::vector<std::string> positional;
  bool partial = false;
};

bool ParseArgs(int argc, char** argv, Args* args, std::string* error) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--partial") {
      args->partial = true;
    } else if (!a.empty() && a[0] == '-' && a != "-") {
      *error = "unknown option " + a + " (see memtl --help)";
      return false;
    } else if (args->command.empty()) {
      args->command = a;
    } else {
      args->positional.push_back(a);
    }
  }
  return true;
}

int RunGraph(const Args& args) {
  if (args.positional.size() != 1) return Fail("graph takes exactly one TRACE (see memtl --help)");
  const std::string& path = args.positional[0];
  memtl::ReadOptions options;
  options.partial = args.partial;
  auto analysis = memtl::AnalyzeFile(path, options);
  if (!analysis.ok()) return Fail(analysis.status().message());
  const memtl::Analysis& a = *analysis.value();
  if (a.read_info.stopped_early) {
    std::cerr << "memtl: " << path << ": truncated; analyzed up to line " << a.read_info.stopped_at_line - 1
              << "\n";
  }
  const std::string text = memtl::FormatDataFlow(a.trace, *a.graph);
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (std::fflush(stdout) != 0) return Fail("cannot write to standard output");
  for (const auto& [kind, entry] : a.diagnostics.entries()) {
    std::cerr << "memtl: note: " << kind << " (" << entry.count << "x, e.g. " << entry.example << ")\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args args;
    std::string error;
    if (!ParseArgs(argc, argv, &args, &error)) return Fail(error);
    for (int i = 1; i < argc; ++i) {
      if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
        std::cout << kUsage;
        return 0;
      }
    }
    if (args.command.empty()) {
      std::cerr << kUsage;
      return 2;
    }
    if (args.command == "graph") return RunGraph(args);
    return Fail("unknown command \"" + args.command + "\" (see memtl --help)");
  } catch (const std::bad_alloc&) {
    return Fail("out of memory");
  } catch (const std::exception& e) {
    return Fail(std::string("internal error: ") + e.what());
  }
}

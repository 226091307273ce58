// The memtl command: parses flags and runs the pipeline stages in order.
// Every failure is one line on stderr and exit status 2.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "core/pipeline/analysis.h"
#include "core/timeline/timeline.h"
#include "export/export.h"
#include "passes/pass.h"

namespace {

constexpr const char* kUsage =
    "usage: memtl export TRACE -o PATH [--device DEV] [--partial] [--strict]\n"
    "       memtl categories TRACE [--partial] [--strict]\n"
    "       memtl graph TRACE [--partial] [--strict]\n"
    "\n"
    "commands:\n"
    "  export TRACE -o PATH  write the memory timeline as PyTorch's\n"
    "                        export_memory_timeline does, by PATH's suffix:\n"
    "                        .html (report with plot), .raw.json.gz (raw events),\n"
    "                        .json.gz / .json ([times_us, sizes by category])\n"
    "  categories TRACE      print the timeline: action, tensor(version), bytes, category\n"
    "  graph TRACE           print the versioned data-flow graph over top-level ops,\n"
    "                        in the layout of PyTorch's memory-profiler tests\n"
    "\n"
    "options:\n"
    "  -o, --output PATH     output file (export)\n"
    "  --device DEV          device to export (default: cuda:0 if the trace has CUDA\n"
    "                        memory, else cpu)\n"
    "  --partial             read a truncated trace up to its last complete record\n"
    "  --strict              treat trace inconsistencies (double frees, free sizes that\n"
    "                        differ from the allocation, ops with no end) as errors\n"
    "  --timings             print the wall time, peak memory, page faults (first\n"
    "                        touches of memory) and the memory still resident after\n"
    "                        each stage on stderr\n"
    "  --threads N           1: read and write on the calling thread only; 2 (default):\n"
    "                        inflate and write on a second thread (same output bytes)\n"
    "  -h, --help            show this help\n"
    "  -V, --version         print memtl's version\n";

// Messages go through stdio, not iostreams: with libstdc++ linked in, <iostream>
// would construct the standard streams and every locale facet at start-up,
// which maps about 0.5 MB more of the binary (docs/performance.md).
void PrintErr(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stderr); }

int Fail(const std::string& message) {
  PrintErr("memtl: " + message + "\n");
  return 2;
}

struct Args {
  std::string command;
  std::vector<std::string> positional;
  std::string output;
  std::string device;
  bool partial = false;
  bool strict = false;
  bool timings = false;
  int threads = 2;
  bool help = false;
  bool version = false;
};

// False with the first problem in *error, unless -h/--help or --version is
// on the line (outside an option's value): they win over everything else.
bool ParseArgs(int argc, char** argv, Args* args, std::string* error) {
  auto problem = [&](const std::string& what) {
    if (error->empty()) *error = what;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      args->help = true;
    } else if (a == "--version" || a == "-V") {
      args->version = true;
    } else if (a == "--partial") {
      args->partial = true;
    } else if (a == "--strict") {
      args->strict = true;
    } else if (a == "--timings") {
      args->timings = true;
    } else if (a == "--threads") {
      if (i + 1 >= argc || (std::string(argv[i + 1]) != "1" && std::string(argv[i + 1]) != "2")) {
        problem("--threads needs 1 or 2");
        continue;
      }
      args->threads = argv[++i][0] - '0';
    } else if (a == "-o" || a == "--output" || a == "--device") {
      if (i + 1 >= argc) {
        problem(a + " needs a value");
        continue;
      }
      (a == "--device" ? args->device : args->output) = argv[++i];
    } else if (!a.empty() && a[0] == '-' && a != "-") {
      problem("unknown option " + a + " (see memtl --help)");
    } else if (args->command.empty()) {
      args->command = a;
    } else {
      args->positional.push_back(a);
    }
  }
  return args->help || args->version || error->empty();
}

std::string PartialNote(const memtl::Analysis& a) {
  return "the trace is truncated: analyzed up to line " +
         std::to_string(a.read_info.stopped_at_line - 1) + ", the last complete record";
}

// Reads and analyzes the one TRACE argument; prints notes to stderr.
memtl::Expected<std::unique_ptr<memtl::Analysis>> Load(const Args& args) {
  if (args.positional.size() != 1) {
    return memtl::Status::Error(args.command + " takes exactly one TRACE (see memtl --help)");
  }
  const std::string& path = args.positional[0];
  memtl::ReadOptions options;
  options.partial = args.partial;
  options.threaded = args.threads > 1;
  auto analysis = memtl::AnalyzeFile(path, options);
  if (!analysis.ok()) return analysis;
  const memtl::Analysis& a = *analysis.value();
  if (args.strict && !a.diagnostics.empty()) {
    const auto& [kind, entry] = *a.diagnostics.entries().begin();
    return memtl::Status::Error(path + ": --strict: " + kind + " (" + std::to_string(entry.count) +
                                "x, e.g. " + entry.example + ")");
  }
  if (a.read_info.stopped_early) {
    PrintErr("memtl: " + path + ": " + PartialNote(a) + "\n");
  }
  return analysis;
}

void PrintTimings(const Args& args, const memtl::PhaseTimer& timer) {
  if (!args.timings) return;
  double total = 0;
  int64_t peak = 0, faults = 0;
  char buf[200];
  for (const auto& p : timer.phases()) {
    std::snprintf(buf, sizeof buf,
                  "memtl: timing: %-10s %.3f s  peak RSS %.1f MiB  page faults %lld  resident "
                  "after %.1f MiB\n",
                  p.name, p.seconds, static_cast<double>(p.peak_rss) / (1 << 20),
                  static_cast<long long>(p.minor_faults), static_cast<double>(p.rss) / (1 << 20));
    std::fputs(buf, stderr);
    total += p.seconds;
    peak = std::max(peak, p.peak_rss);
    faults += p.minor_faults;
  }
  std::snprintf(buf, sizeof buf,
                "memtl: timing: %-10s %.3f s  peak RSS %.1f MiB  page faults %lld\n", "total",
                total, static_cast<double>(peak) / (1 << 20), static_cast<long long>(faults));
  std::fputs(buf, stderr);
}

void PrintNotes(const memtl::Diagnostics& diag) {
  for (const auto& [kind, entry] : diag.entries()) {
    PrintErr("memtl: note: " + kind + " (" + std::to_string(entry.count) + "x, e.g. " +
             entry.example + ")\n");
  }
}

int WriteStdout(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (std::fflush(stdout) != 0) return Fail("cannot write to standard output");
  return 0;
}

int RunGraph(const Args& args) {
  auto analysis = Load(args);
  if (!analysis.ok()) return Fail(analysis.status().message());
  const memtl::Analysis& a = *analysis.value();
  if (int rc = WriteStdout(memtl::FormatDataFlow(a.trace, *a.graph)); rc != 0) return rc;
  PrintTimings(args, a.timer);
  PrintNotes(a.diagnostics);
  return 0;
}

struct Categorized {
  std::unique_ptr<memtl::Analysis> analysis;
  memtl::CategoryDict categories;
  std::vector<memtl::TimelineEvent> timeline;
};

memtl::Expected<std::unique_ptr<Categorized>> Categorize(const Args& args) {
  auto analysis = Load(args);
  if (!analysis.ok()) return analysis.status();
  auto c = std::make_unique<Categorized>();
  c->analysis = std::move(analysis.value());
  memtl::Analysis& a = *c->analysis;
  const bool no_memory_events = a.allocations.allocations + a.allocations.frees == 0;
  if (a.trace.header.profile_memory == 0 ||
      (no_memory_events && a.trace.header.profile_memory != 1)) {
    // As PyTorch's _memory_profile: without memory events there is no timeline.
    return memtl::Status::Error(
        a.name +
        ": the trace has no memory events (it was recorded without profile_memory=True?); "
        "record with torch.profiler.profile(record_shapes=True, profile_memory=True, "
        "with_stack=True)");
  }
  memtl::ReleaseAfterGraph(a);  // the passes read none of it
  const memtl::PassInput in{a.trace, *a.tree, *a.graph, *a.sizes};
  memtl::RunAllPasses(in, c->categories);
  memtl::ReleaseAfterPasses(a);  // the timeline reads none of it
  a.timer.Mark("passes");
  c->timeline = memtl::BuildTimeline(*a.tree, *a.graph, *a.sizes, c->categories, a.diagnostics);
  a.timer.Mark("timeline");
  return c;
}

int RunCategories(const Args& args) {
  auto c = Categorize(args);
  if (!c.ok()) return Fail(c.status().message());
  const memtl::Trace& trace = c.value()->analysis->trace;
  if (int rc =
          WriteStdout(memtl::FormatTimeline(trace, c.value()->timeline, c.value()->categories));
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

int RunExport(const Args& args) {
  if (args.output.empty()) return Fail("export needs -o PATH (see memtl --help)");
  // Check the output name before the (possibly long) analysis.
  auto format = memtl::FormatForPath(args.output);
  if (!format.ok()) return Fail(format.status().message());
  auto c = Categorize(args);
  if (!c.ok()) return Fail(c.status().message());
  const memtl::Analysis& a = *c.value()->analysis;
  auto device = memtl::ResolveDevice(a.trace, args.device);
  if (!device.ok()) return Fail(a.name + ": " + device.status().message());
  // The export reads the timeline, the categories and the trace's devices:
  // the rest goes before the export adds its own (the plot's libraries and
  // canvas, the output buffers).
  memtl::ReleaseAfterTimeline(*c.value()->analysis, c.value()->categories);
  memtl::ExportInput in{a.trace, c.value()->timeline, c.value()->categories, a.diagnostics, a.name,
                        ""};
  if (a.read_info.stopped_early) in.note = PartialNote(a);
  in.threaded = args.threads > 1;
  if (auto s = memtl::ExportMemoryTimeline(in, args.output, device.value()); !s.ok())
    return Fail(s.message());
  c.value()->analysis->timer.Mark("export");
  PrintTimings(args, a.timer);
  PrintNotes(a.diagnostics);
  KeepUntilExit(std::move(c.value()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
#if defined(__GLIBC__)
  // glibc maps blocks from 128 KiB up with mmap, but raises that threshold
  // (up to 32 MiB) each time such a block is freed; from then on arrays
  // that a stage frees stay in malloc's heaps, or in a helper thread's
  // arena, instead of going back to the kernel, and a later stage's arrays
  // come on top of them. A fixed threshold keeps every large array mapped,
  // so freeing it lowers the resident memory. Measured (export -o .json):
  // peak RSS 10^5 events 17.2 -> 14.5 MB, 10^6 92.2 -> 84.1 MiB, 10^7
  // 826 -> 789 MiB, times within run-to-run noise (docs/performance.md).
  // 64 KiB rather than 256: a 10^5-event trace's arrays are 64-256 KiB, and
  // below the threshold they were freed into the heap's holes instead of
  // going back (peak 5440-5712 -> 5380-5672 KiB on the resnet18 input,
  // 5964-6188 -> 5748-5976 KiB on the transformer one, 8 alternating runs;
  // 10^6 times alike).
  mallopt(M_MMAP_THRESHOLD, 64 << 10);
#endif
  try {
    Args args;
    std::string error;
    if (!ParseArgs(argc, argv, &args, &error)) return Fail(error);
    if (args.help) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (args.version) {
      std::fputs("memtl " MEMTL_VERSION "\n", stdout);
      return 0;
    }
    if (args.command.empty()) {
      std::fputs(kUsage, stderr);
      return 2;
    }
    if (args.command == "graph") return RunGraph(args);
    if (args.command == "categories") return RunCategories(args);
    if (args.command == "export") return RunExport(args);
    return Fail("unknown command \"" + args.command + "\" (see memtl --help)");
  } catch (const std::bad_alloc&) {
    return Fail("out of memory");
  } catch (const std::exception& e) {
    return Fail(std::string("internal error: ") + e.what());
  }
}

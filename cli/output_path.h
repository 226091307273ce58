// The -o paths of a command, checked and opened before the analysis, so
// that an output that cannot be written, or that names an input, fails
// before any work and leaves nothing behind (docs/reliability.md, "Outputs").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cli/app.h"
#include "core/model/status.h"
#include "export/atomic_file.h"

namespace memtl::cli {

// True when `out` names the file `input` reads, through symbolic or hard
// links and /proc/self/fd; an input "-" is standard input's descriptor.
bool SameFile(const std::string& out, const std::string& input);

// Every file the command reads: TRACE ("-" for standard input), B, --et,
// --et-b and the traces of `ranks` (the files its patterns name, looked up
// only when there is an -o to check them against).
std::vector<std::string> InputsOf(const Args& args);

// The outputs of one run, opened (AtomicFile) in the order of -o; "-" of a
// printing command is standard output, written by the command itself, and
// has no entry.
struct OpenedOutputs {
  std::vector<std::string> paths;
  std::vector<std::unique_ptr<AtomicFile>> files;  // null for a printed "-"
};

// Checks every -o of `args` (named once, no input, a format the command
// writes, which sets `args.format` from the suffix) and opens each: a
// missing directory, a read-only one, a directory, standard output closed
// fail here. `inputs`: InputsOf(args).
Expected<OpenedOutputs> OpenOutputs(Args& args, const std::vector<std::string>& inputs);

}  // namespace memtl::cli

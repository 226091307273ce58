// The checks on an -o path that need no analysis: whether it names a file
// being read, and whether a printing command can write the format its
// suffix names.
#pragma once

#include <string>

#include "cli/app.h"

namespace memtl::cli {

// True when `a` and `b` name one file (through links or other paths).
bool SameFile(const std::string& a, const std::string& b);

// The commands that print their answer (graph, categories, events, peak,
// explain, summary) write it to -o's file instead when given one, in the
// --format given, else in the one its suffix names. Checked before the
// analysis: a suffix naming a format the command does not write is refused
// (writing text into x.html would hand the user a broken page), with what
// writes it; so is the trace itself. Empty when the output is fine; sets
// `args.format` from the suffix.
std::string PrintedOutputError(Args& args);

}  // namespace memtl::cli

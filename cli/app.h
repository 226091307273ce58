// The memtl command's command line: its commands, their options and the
// values parsed into Args (CLI11). cli/memtl.cpp runs what it says.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace memtl::cli {

inline constexpr std::array<std::string_view, 8> kCommands = {
    "export", "peak", "explain", "summary", "diff", "events", "categories", "graph"};

struct Args {
  std::string command;
  std::string trace;
  std::vector<std::string> outputs;
  std::string device;
  std::string format;                // peak: text or json; export: the format of -o -
  size_t top = 20;                   // peak: how many tensors
  std::string tensor;                // explain: "T12" or "T12:v1"
  std::string trace_b;               // diff: the second trace
  std::string et;                    // an execution trace to join to a Kineto TRACE
  std::string et_b;                  // diff: one to join to a Kineto B
  std::vector<std::string> budgets;  // summary: CATEGORY=SIZE
  bool partial = false;
  bool strict = false;
  bool timings = false;
  bool quiet = false;
  int threads = 2;
};

// Builds the command line; `args` receives the values.
std::unique_ptr<CLI::App> MakeApp(Args& args);

}  // namespace memtl::cli

// memtl summary and memtl diff: a trace's memory in a few numbers per
// device, for CI gates (budgets) and for comparing two runs or ranks.
// Per device: the peak (the largest total, as the exports' rows give it),
// each category's bytes at that peak and each category's own largest value
// over the run, and the ops, modules and Python call sites holding the most
// at the peak (the memory tables, tables.h).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/explain/context.h"
#include "core/explain/peak.h"
#include "core/explain/tables.h"
#include "core/model/status.h"

namespace memtl {

struct DeviceSummary {
  std::string device;
  int64_t peak_bytes = 0;
  int64_t peak_time_us = 0;                     // the row's time, as the .json export has it
  int64_t since_start_us = 0;                   // from the first row
  std::array<int64_t, 8> at_peak{};             // by category, the export's order
  std::array<int64_t, 8> largest{};             // each category's largest over the run
  std::vector<MemoryRow> top_ops, top_modules;  // by self bytes at the peak
  // Likewise; empty when the trace names no call site (HasCallSites).
  std::vector<MemoryRow> top_call_sites;
  // The allocator's largest reserved total, in a trace without tensors that
  // reports it (a Kineto trace's "Total Reserved"); 0 otherwise.
  int64_t max_reserved = 0;
  // The reserved total when the allocated total peaked (a memory
  // snapshot's segments: PeakReport::reserved_at_peak); 0 otherwise.
  int64_t reserved_at_peak = 0;
  // That free memory by what holds each segment (PeakReport::segment_free).
  SegmentFree segment_free;
};

struct Summary {
  std::string trace;
  std::vector<DeviceSummary> devices;  // those with memory events, in device order
  bool inferred = false;               // the categories are inferred (ExplainInput::inferred)
};

// Reads the stages up to the timeline (Categorize keeps them); `top` rows of each table.
Summary Summarize(const ExplainInput& in, const std::string& trace_name, size_t top);
// The same of a timeline with no stages behind it (a raw timeline, which
// names no op, module or call site): the peaks and categories, no tables.
Summary SummarizeTimeline(const Trace& trace, const std::vector<TimelineEvent>& timeline,
                          const CategoryDict& categories, const std::string& trace_name);
std::string FormatSummary(const Summary& s);
std::string SummaryJson(const Summary& s);

// --budget CATEGORY=SIZE: a category's largest value (or, for "total", the
// peak) on any device may not exceed SIZE. Categories by their export names
// in any case (activation, optimizer_state, unknown, ...); sizes in bytes
// or with a unit (KB, MB, GB: powers of 1000; KiB, MiB, GiB: of 1024).
struct Budget {
  std::optional<int> category;  // export index; none: the total
  int64_t bytes = 0;
  std::string text;  // as given
};
Expected<Budget> ParseBudget(std::string_view text);
// One line per budget exceeded on a device; empty when all hold.
std::vector<std::string> CheckBudgets(const Summary& s, const std::vector<Budget>& budgets);

// The summary of the device named `name`, or null.
const DeviceSummary* FindDevice(const Summary& s, const std::string& name);
// The devices of either summary: A's in order, then those only B has.
std::vector<std::string> DiffDevices(const Summary& a, const Summary& b);
// Bytes at the peak per name in two tables (ops or modules; a name missing
// from one counts 0 there), the largest difference first, equal ones left
// out, at most `top`.
std::vector<std::pair<std::string, std::array<int64_t, 2>>> TableDiff(
    const std::vector<MemoryRow>& a, const std::vector<MemoryRow>& b, size_t top);

// Two summaries side by side: per device both have (matched by name), the
// peak and each category's largest with their difference, and the ops and
// modules whose bytes at the peak differ most.
std::string FormatDiff(const Summary& a, const Summary& b);
std::string DiffJson(const Summary& a, const Summary& b);

}  // namespace memtl

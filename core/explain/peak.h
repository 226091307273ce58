// Who holds the memory at the peak: the exported device's largest total in
// the timeline (the top of the plot's stack), what it is made of by
// category, and the largest tensors alive then, each with the op that
// created it, the modules around that op, the phase (forward, backward,
// optimizer step, other), the step (ProfilerStep#N) and the Python call
// site. It reads the stages up to the timeline: the graph gives each tensor
// version's creating node, the trace's parent links the modules (python
// tracer `nn.Module: Class_n` calls), the optimizer step and the user's
// frames around it, the op tree whether it ran in backward, the
// ProfilerStep#N scopes' start times its step. The report refers to
// none of them, so an export can show it after they are gone.
//
// Known limits: those of context.h; a tensor created before the profile
// started has no creator ("before the profile").
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/explain/context.h"

namespace memtl {

struct LiveTensor {
  int64_t tensor = 0;  // tensor id (T<id> in the other outputs)
  // In a trace without tensors (categories inferred): the allocation
  // record alive (A<n>, memtl explain's name); kNone32 for a tensor.
  uint32_t alloc = kNone32;
  int32_t version = 0;  // the version alive at the peak
  int64_t bytes = 0;
  std::optional<Category> category;
  uint32_t creator = kNone32;  // event of the node that allocated it; kNone32: before the profile
  std::string creator_name;    // that event's name, or "before the profile"
  std::string module;          // "Sequential_0 > Linear_1"; empty when none
  std::string phase;           // "forward", "backward", "optimizer", "other"
  std::string step;            // the creator's ProfilerStep#N (context.h StepAt); empty: none
  std::string call_site;  // the creator's Python call site ("train.py(42): forward"); empty: none
  // The ops around the creator and the creator itself when it is an op,
  // outermost first (aten::linear, aten::addmm): the op frames of the
  // folded stacks (folded.h).
  // A model's state by the name users know (names.h): "Sequential_0 >
  // Linear_1 .weight", "... .weight grad", "... .weight exp_avg"; empty when
  // no module or optimizer reports the tensor. The outputs show it in place
  // of the module.
  std::string name;
  std::vector<std::string> ops;
};

// What is free inside a device's segments at the peak
// (DeviceInfo::segments_at_peak: a memory snapshot's), by the category
// holding the most bytes of each segment (the export's order; the
// categories inferred per allocation record), and in segments holding
// nothing (the allocator's cache). `any`: the trace names its segments.
struct SegmentFree {
  bool any = false;
  std::array<int64_t, 8> by_holder{};
  int64_t in_empty = 0;
};

struct PeakReport {
  bool any = false;            // the device has memory events
  std::string device;          // its name
  int64_t bytes = 0;           // the largest total, all categories together
  int64_t time_us = 0;         // the row where it is first reached (PyTorch's times)
  int64_t since_start_us = 0;  // from the first row
  size_t row = 0;              // its ordinal among the exports' rows
  // Bytes by category at the peak, in the export's order (PARAMETER,
  // OPTIMIZER_STATE, INPUT, TEMPORARY, ACTIVATION, GRADIENT,
  // AUTOGRAD_DETAIL, unknown).
  std::array<int64_t, 8> by_category{};
  size_t live_tensors = 0;          // tensors alive at the peak
  int64_t untracked_bytes = 0;      // allocations with no tensor identity, alive then
  std::vector<LiveTensor> largest;  // the `top` largest live tensors, largest first
  // The categories are inferred (a trace without tensors: `largest` lists
  // allocations); the outputs say so.
  bool inferred = false;
  // The allocator's largest reserved total on the device, where the trace
  // reports it (a Kineto trace's "Total Reserved"); 0 when not.
  int64_t max_reserved = 0;
  // The reserved total when the allocated total peaked, where the trace
  // says (a memory snapshot's segments: DeviceInfo::reserved_at_peak); 0
  // when not. Less the peak's bytes: free memory inside the segments.
  int64_t reserved_at_peak = 0;
  // That free memory by what holds each segment.
  SegmentFree segment_free;
};

// A category's name as the explaining outputs print it: "ACTIVATION", or
// "ACTIVATION (inferred)" when `inferred` (unknown stays "unknown").
std::string CategoryLabel(std::optional<Category> c, bool inferred);
std::string ExportCategoryLabel(int index, bool inferred);

using PeakInput = ExplainInput;

// The peak row alone, from one walk of the rows the exports write
// (CoalescedRows): `any`, `bytes`, the times, `row` and `by_category`.
PeakReport FindPeak(const std::vector<TimelineEvent>& timeline, const CategoryDict& categories,
                    DeviceIndex device);

// The peak of `in.device` and the `top` largest tensors alive at it.
PeakReport ExplainPeak(const PeakInput& in, size_t top);

// A trace without tensors (`inferred`, the inference's pairing): the
// allocation records of `device` alive at the end of the row at `time_us`
// (the timeline's rows, in PyTorch's microseconds), in record order. A free
// of memory from before the profile stands for that memory until it is
// freed. The peak's table of allocations and the memory tables read it.
std::vector<uint32_t> AllocationsAliveAt(const Trace& trace, const InferredCategories& inferred,
                                         DeviceIndex device, int64_t time_us);

// A live entry's name: "T12(v0)" for a tensor, "A7" for an allocation.
// What the module column shows for a tensor: its name when it has one
// (a parameter, gradient or optimizer state), else its creator's modules.
const std::string& ModuleCell(const LiveTensor& t);
std::string LiveName(const LiveTensor& t);
// For people: a summary, the categories and a table of the largest tensors
// (the step and call site columns only when some tensor has one).
std::string FormatPeak(const PeakReport& report);
// For programs: one JSON object (docs/categories.md describes its fields).
std::string PeakJson(const PeakReport& report);
// Bytes in the largest binary unit that keeps the number at least 1 ("12.3 MiB").
std::string HumanBytes(int64_t bytes);
// "at the peak the allocator reserved R, of which F free inside its
// segments (fragmentation)\n" for a reserved total at the peak of
// `peak_bytes`; empty when `reserved_at_peak` is 0 (not known).
std::string FragmentationLine(int64_t reserved_at_peak, int64_t peak_bytes);
SegmentFree FreeInSegments(const DeviceInfo& device, const InferredCategories& inferred);
// "free inside segments, by what holds each most: ACTIVATION (inferred)
// 1.2 MiB, ...; in segments holding nothing 300.0 KiB\n"; empty when
// nothing is free or the segments are not known.
std::string SegmentFreeLine(const SegmentFree& f, bool inferred);
// The same as a JSON object ("segment_free"), with "empty_segments".
std::string SegmentFreeJson(const SegmentFree& f);
// A difference of bytes with its sign ("+1.5 KiB", "-512 B", "0 B").
std::string SignedBytes(int64_t bytes);
// `after` against `before` in percent ("+12.5%"); "new" from nothing, ""
// when both are nothing.
std::string RelativeChange(int64_t before, int64_t after);

}  // namespace memtl

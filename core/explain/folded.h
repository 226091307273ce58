// The bytes alive at the peak as folded stacks ("frame;frame;... bytes"
// per line), the input of flame graph tools (flamegraph.pl, speedscope,
// inferno): memtl peak --format folded, and the HTML report's flame graph,
// which reads the same stacks (FoldPeak) rather than parsing the text.
//
// A tensor's stack is where it was made, outermost first: the modules
// around its creator (Sequential_0, Linear_1), the ops around it
// (aten::linear, aten::addmm), then its category (ACTIVATION) as the leaf.
// A model's parameter, gradient or optimizer state stands under its module
// and its name (Linear_1 .weight exp_avg; with the model's names, the
// modules of its qualified name), wherever it was made; memory
// from before the profile with no such name under "(before the profile)",
// allocations with no tensor identity under "(no tensor identity)"; a
// raw timeline, which has no tensors, gives a line per category. Equal
// stacks are summed, so the lines add up to the peak's bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/explain/peak.h"

namespace memtl {

struct FoldedStack {
  // Outermost first; the last is the category's label ("ACTIVATION", or
  // "ACTIVATION (inferred)"). No frame holds ';' or a line end (the folded
  // format's separators: they become ',' and ' ').
  std::vector<std::string> frames;
  int category = kUnknownIndex;  // the leaf's category, by export index
  int64_t bytes = 0;             // > 0
};

// The stacks of `report` (from ExplainPeak), equal stacks summed, in the
// order of their folded lines (by their text); their bytes add up to
// report.bytes. memtl peak lists every live tensor (top: all); a report
// of the largest only gives the bytes of the others by category, under
// "(N smaller tensors)" ("allocations" where the categories are inferred).
std::vector<FoldedStack> FoldPeak(const PeakReport& report);

// The stacks as folded lines, "frame;...;frame bytes\n" each.
std::string FormatFolded(const std::vector<FoldedStack>& stacks);

// FormatFolded(FoldPeak(report)): memtl peak --format folded.
std::string FoldedPeak(const PeakReport& report);

}  // namespace memtl

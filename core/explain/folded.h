// The bytes alive at the peak as folded stacks ("frame;frame;... bytes"
// per line), the input of flame graph tools (flamegraph.pl, speedscope,
// inferno): memtl peak --format folded.
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

#include <string>

#include "core/explain/peak.h"

namespace memtl {

// `report` from ExplainPeak with every live tensor listed (top: all).
std::string FoldedPeak(const PeakReport& report);

}  // namespace memtl

// The report's "What would help": a few standard changes replayed with
// memtl whatif (whatif.h) on every device of the report, each kept when it
// lowers the device's peak, the most bytes saved first:
// - gradients set to none at zero_grad, where the trace zeroes them in
//   place;
// - checkpointing each repeated block (the shallowest module class called
//   at least twice under one parent, e.g. "TransformerEncoderLayer_*");
// - ZeRO-1, ZeRO-2 and ZeRO-3 (units: those blocks) at 8 ranks;
// - parameters in bf16.
// Each row says how far that kind of prediction was checked against real
// runs (docs/planning.md) and what it leaves out.
#pragma once

#include "core/explain/context.h"
#include "core/explain/report.h"

namespace memtl {

void AddWhatWouldHelp(const ExplainInput& in, Report& report);

}  // namespace memtl

// The report's "What would help": a few standard changes replayed with
// memtl whatif (whatif.h) on every device of the report, each kept when it
// lowers the device's peak, the most bytes saved first:
// - gradients set to none at zero_grad, where the trace zeroes them in
//   place;
// - checkpointing each repeated block (a module class called at least
//   twice under one parent, e.g. "TransformerEncoderLayer_*"; at most two,
//   from the shallowest two depths that have one: ResNet's layers and
//   their BasicBlocks);
// - ZeRO-1 and ZeRO-2 at 8 ranks, and ZeRO-3 with each of those blocks as
//   the units;
// - parameters in bf16.
// Each row says how far that kind of prediction was checked against real
// runs (docs/planning.md) and what it leaves out.
#pragma once

#include "core/explain/context.h"
#include "core/explain/report.h"

namespace memtl {

void AddWhatWouldHelp(const ExplainInput& in, Report& report);

}  // namespace memtl

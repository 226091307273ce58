// The timeline with context (`memtl events`): one row per timeline event, as
// `memtl categories` prints them, plus when (milliseconds from the first
// event), the device, the op that made the change (the node that allocated
// the tensor, wrote the new version or freed it) and where it ran (its
// modules and phase, context.h). For people (aligned text) and programs
// (TSV with a header line, or JSON Lines).
//
// Known limits: those of context.h; allocations with no tensor identity
// ("[memory]") have no op; tensor shapes are not kept past the size map.
#pragma once

#include <string>

#include "core/explain/context.h"

namespace memtl {

enum class EventsFormat { kText, kTsv, kJsonLines };

// Every timeline event of every device; `in.device` is not used.
std::string FormatEvents(const ExplainInput& in, EventsFormat format);

}  // namespace memtl

// The timeline with context (`memtl events`): one row per timeline event, as
// `memtl categories` prints them, plus when (milliseconds from the first
// event), the tensor's shape and dtype (ShapeOf: its first observation's,
// when the reader kept shapes), the device, the op that made the change (the
// node that allocated the tensor, wrote the new version or freed it) and
// where it ran (its modules and phase, context.h). For people (aligned text)
// and programs (TSV with a header line, or JSON Lines).
//
// Known limits: those of context.h; allocations with no tensor identity
// ("[memory]") have no op and no shape, nor do tensors no op argument or
// module parameter shows (and traces other than memtl's own: Kineto's name
// no tensor).
#pragma once

#include <string>

#include "core/explain/context.h"

namespace memtl {

enum class EventsFormat { kText, kTsv, kJsonLines };

// Every timeline event of every device; `in.device` is not used.
std::string FormatEvents(const ExplainInput& in, EventsFormat format);

}  // namespace memtl

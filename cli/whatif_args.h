// memtl whatif's changes, from its command line (whatif.h has their rules).
#pragma once

#include "cli/app.h"
#include "core/model/status.h"
#include "core/plan/whatif.h"

namespace memtl::cli {

// The changes `args` asks for. Errors (one line): a --shard or --dtype
// that is not KIND=VALUE with a known kind, a rank count that is not a
// whole number from 2 to 65536, a dtype memtl does not know, both
// --set-to-none and --no-set-to-none, or no change at all.
Expected<WhatIfChanges> WhatIfChangesOf(const Args& args);

}  // namespace memtl::cli

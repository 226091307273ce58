// memtl ranks: the traces named on the command line, and their analysis,
// a rank per core at a time (core/explain/ranks.h makes each row and
// compares them).
#pragma once

#include <string>
#include <vector>

#include "core/explain/ranks.h"
#include "core/model/progress.h"
#include "core/model/status.h"

namespace memtl::cli {

// The files the TRACE arguments name, sorted, each once: a file; every
// regular file in a directory (not below it) whose name ends in .json,
// .json.gz, .jsonl or .jsonl.gz; a glob pattern (quoted, for memtl to
// expand). An error names an argument that names nothing.
Expected<std::vector<std::string>> RankTraces(const std::vector<std::string>& args);

// Each trace's row, in `paths` order: `jobs` traces analyzed at once, each
// on one thread, so that memory is bounded by `jobs` analyses whatever the
// number of traces. A trace cut off is analyzed up to its last complete
// record and marked truncated; one that cannot be analyzed gets its error.
// `progress` counts the traces done (Progress::done of Progress::total).
std::vector<RankRow> AnalyzeRanks(const std::vector<std::string>& paths, int jobs,
                                  Progress* progress);

}  // namespace memtl::cli

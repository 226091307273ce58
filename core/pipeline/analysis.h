// Wires the core stages in their fixed order for one trace: read, schemas,
// identity, op tree, data-flow graph. The CLI, tests and fuzzers share it so
// that every caller runs exactly the same pipeline.
#pragma once

#include <memory>
#include <string>

#include "core/checks/allocation_checks.h"
#include "core/graph/data_flow.h"
#include "core/graph/op_tree.h"
#include "core/graph/size_map.h"
#include "core/identity/identity.h"
#include "core/model/diagnostics.h"
#include "core/read/trace_reader.h"
#include "core/schema/schema.h"

namespace memtl {

struct Analysis {
  std::string name;  // file name used in messages
  Trace trace;
  ReadInfo read_info;
  SchemaRegistry schemas;
  Diagnostics diagnostics;
  AllocationSummary allocations;
  IdentityStats identity;
  std::unique_ptr<OpTree> tree;
  std::unique_ptr<SizeMap> sizes;
  std::unique_ptr<DataFlowGraph> graph;
};

// Runs the core stages on a trace already read. Errors name `name`.
Expected<std::unique_ptr<Analysis>> Analyze(Trace trace, const std::string& name);
Expected<std::unique_ptr<Analysis>> AnalyzeFile(const std::string& path, const ReadOptions& options = {});

}  // namespace memtl

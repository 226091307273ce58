// memtl explain: why one tensor version has its category. For each key of
// the tensor id asked (a tensor can have several storages or devices) and
// each version asked: its category, the passes that set or changed it with
// their rules (passes.def), the creating op with its modules, phase and
// Python call site, the values that op read (the evidence a flood or a
// data-flow rule reasons from), the ops that read the version, its size and
// its storage's lifetime. No peer says why a tensor got its label.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/explain/context.h"
#include "core/graph/size_map.h"
#include "core/model/status.h"

namespace memtl {

struct TensorRef {
  int64_t id = 0;
  std::optional<int32_t> version;  // none: every version
};

// "T12", "T12:v1", "T12(v1)", "12", "12:1"; nullopt when it is none of these.
std::optional<TensorRef> ParseTensorRef(std::string_view text);

struct ExplainTensorInput {
  const ExplainInput& in;  // the stages up to the timeline, kept (Categorize)
  const SizeMap& sizes;
  // The operator schemas the analysis used: with them, the creating op's
  // matched overloads are named (none: not named).
  const SchemaRegistry* schemas = nullptr;
};

// The explanation as text, or as one JSON object per line (`json`); an
// error when the trace has no such tensor or version.
Expected<std::string> ExplainTensor(const ExplainTensorInput& in, const TensorRef& ref, bool json);

// A trace without tensors (a Kineto trace: categories inferred, core/infer/)
// names its allocation records A0, A1, ... (memtl peak lists them).
// "A12" -> 12; nullopt when the text is not such a name.
std::optional<uint32_t> ParseAllocationRef(std::string_view text);
// Why allocation record `alloc` has its inferred category: the rule, the
// op that made it and the one that freed it (explain_inferred.cpp). A free
// is explained as its allocation. An error when the trace has categories
// proven (in.inferred is null) or no such record.
Expected<std::string> ExplainAllocation(const ExplainInput& in, uint32_t alloc, bool json);

}  // namespace memtl

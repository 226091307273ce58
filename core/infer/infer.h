// Categories inferred for a trace that records no tensors (a Kineto trace
// read alone, core/read/kineto/kineto_reader.h): every allocation there is
// untracked, so the passes, which reason over tensors, leave every byte
// unknown. This stage reads the evidence such a trace has instead (the op
// each allocation and free happens in, the scopes around them: autograd's
// backward functions, optimizer steps and zero_grad, nn.Module calls,
// module construction frames; and each allocation's lifetime) and infers a
// category per allocation with the rules of infer.cpp, each stated there
// with where it is known to be wrong. Where no rule applies, the
// allocation stays unknown: unknown is better than wrong.
//
// It takes the trace and op tree read-only and returns its own result,
// which the timeline reads (BuildTimeline stamps each allocation with no
// tensor with its inferred category) and the explaining outputs label
// "inferred". It runs only on traces without tensors and before the
// pipeline frees the allocations' addresses (it pairs allocations with
// their frees by address). memtl's own traces and execution-trace joins
// are categorized by the passes, never here.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/categories/category.h"
#include "core/graph/op_tree.h"
#include "core/model/status.h"

namespace memtl {

// The rule that inferred an allocation's category (infer.cpp states each).
enum class InferRule : uint8_t {
  kNone,              // no rule applied: unknown
  kBeforeProfile,     // memory from before the profile, never freed in it: unknown
  kTemporary,         // freed inside the op that allocated it
  kParameter,         // made by module construction (__init__, reset_parameters, .to()), kept
  kGradient,          // made in backward and outliving the backward pass
  kGradientFreed,     // memory from before the profile freed by zero_grad
  kAutogradDetail,    // made in backward and freed within it
  kOptimizerState,    // made in an optimizer step and outliving it
  kActivationSaved,   // made outside backward and freed during backward
  kActivationModule,  // made inside an nn.Module's forward
  kActivationLoss,    // made between the forward's last module and the backward
  kInput,             // made before the forward and alive when it starts
  kLeavesBefore,      // from before the profile: the leaves backward accumulates into
  kStateBefore,       // from before the profile: the optimizer's state for those leaves
};
inline constexpr int kNumInferRules = 14;

// The rules for memory the allocator held when profiling began (rule 1,
// whatever part of it the allocation stands for).
constexpr bool FromBeforeProfile(InferRule rule) {
  return rule == InferRule::kBeforeProfile || rule == InferRule::kLeavesBefore ||
         rule == InferRule::kStateBefore;
}

// What one rule says, for memtl explain: a short name and its statement.
std::string_view InferRuleName(InferRule rule);
std::string_view InferRuleText(InferRule rule);

// Per allocation record (Trace::allocs: allocations and frees alike).
struct InferredCategories {
  static constexpr uint8_t kNoCategory = 0xff;
  // The category code (Category) inferred for the record, kNoCategory when
  // none; a free, and an allocation at an address still live (which the
  // timeline counts as a version bump), carry the allocation's they pair with.
  std::vector<uint8_t> category;
  std::vector<InferRule> rule;
  // The allocation record this one pairs with: a free's allocation, an
  // allocation at a live address's live allocation; kNone32 for an
  // allocation that pairs with none, and for a free of memory from before
  // the profile.
  std::vector<uint32_t> pair;
  // Bytes allocated per rule (by InferRule), for the coverage line.
  std::array<int64_t, kNumInferRules> bytes_by_rule{};

  bool empty() const { return category.empty(); }
  std::optional<Category> Get(uint32_t alloc) const {
    if (alloc >= category.size() || category[alloc] == kNoCategory) return std::nullopt;
    return static_cast<Category>(category[alloc]);
  }
};

// Infers the categories of a trace's allocations. Reads their addresses
// (records.alloc_ptrs: an error when they are missing) and the op tree's
// backward flags. The pipeline calls it for a Kineto trace read without an
// execution trace.
Expected<InferredCategories> InferCategories(const OpTree& tree, const TensorRecords& records);

}  // namespace memtl

// The inference rules (infer.h), over the evidence of evidence.h. Each
// allocation A (with F its free, if the trace has it) gets the first rule
// that holds, in this order; scopes are evidence.h's (backward, optimizer,
// zero_grad, forward, other), "the node" is the op A was made in
// (Evidence::node), and a free's phase is its scope, or for a free in no
// scope the scope of the last event that started before it.
//
//  1. before the profile: the allocations the Kineto reader adds for the
//     memory the allocator held when profiling began (kPreProfileAddress).
//     Where the reader split off the leaves a backward pass accumulates
//     into and the optimizer state kept for them (PreProfilePart, by the
//     rules and limits of core/read/kineto/kineto_pre_profile.h), the
//     leaves are PARAMETER unless the profile builds parameters itself
//     (rule 3 finds one on that device: the leaves are those), and the
//     state OPTIMIZER_STATE unless a step makes state (rule 5 finds some on
//     that device: the state is that). The rest stays unknown: gradients,
//     buffers, inputs and the like of earlier steps together.
//  2. TEMPORARY: F is inside the node A was made in. PyTorch's rule
//     (intermediates of a data-flow node), with the node found by nesting.
//     Wrong where Kineto's nesting puts a free into the op that just
//     returned (a trace in whole microseconds rounds an op's end onto its
//     last frees), and where PyTorch's node is smaller than the outermost
//     op (an op whose schema it cannot match is split into its children).
//  3. PARAMETER: A was made under a torch/nn/ construction frame (__init__,
//     reset_parameters, _apply) and never freed. Needs with_stack. Wrong for
//     buffers (BatchNorm's running statistics), which PyTorch does not call
//     parameters, and for a model built but dropped after the profile.
//  4. GRADIENT / AUTOGRAD_DETAIL: A was made in backward. Never freed, or
//     freed outside the backward pass (by zero_grad, in the optimizer step,
//     in a later step): GRADIENT, what autograd leaves behind is the
//     parameters' .grad. Freed during backward: AUTOGRAD_DETAIL, PyTorch's
//     name for what backward functions return and consume. Wrong for
//     tensors a backward hook keeps, for retain_graph buffers and
//     create_graph's graph (GRADIENT), and for gradients freed in the same
//     backward pass (set_to_none inside a hook: AUTOGRAD_DETAIL).
//  5. OPTIMIZER_STATE: A was made in an optimizer step and F is not in that
//     step (or never comes): the step's state (Adam's exp_avg, SGD's
//     momentum_buffer, the step count) is what a step keeps. What it makes
//     and frees itself stays unknown (PyTorch too leaves it uncategorized).
//     Wrong for other tensors a step keeps (a closure's loss, a GradScaler's
//     found_inf, a parameter replaced rather than updated in place).
//  6. ACTIVATION (saved for backward): A was made outside backward,
//     optimizer and zero_grad, and F is during backward: what backward
//     frees is what the forward saved for it (or the loss's gradient seed).
//     Wrong for an input freed by the backward pass that held the last
//     reference to it.
//  7. ACTIVATION (module): A was made inside an nn.Module call (with_stack).
//     PyTorch calls the outputs of forward ops activations under no_grad
//     too. Wrong for tensors a module keeps as state (a KV cache, running
//     statistics made out of place).
//  8. INPUT: A was made in no scope, with no forward or only a finished
//     step before it, and the next event in a module comes before the next
//     backward and optimizer step, with A still alive then: made for the
//     forward that follows (the batch and its targets). Needs with_stack.
//     Wrong for tensors made before the forward that it does not read.
//  9. ACTIVATION (loss): A was made in no scope after a forward and before
//     the backward that follows it: the loss and what computes it. Needs
//     with_stack. Wrong for metrics computed there and kept.
// A free of memory from before the profile inside zero_grad is a GRADIENT
// (set_to_none frees the gradients of the step before). Everything else
// stays unknown. A free carries its allocation's category, and an
// allocation at an address still live (a version bump in PyTorch's
// timeline) the live allocation's.
#include "core/infer/infer.h"

#include <climits>
#include <string>

#include "core/infer/evidence.h"
#include "core/model/records.h"

namespace memtl {

using infer::Evidence;
using infer::Pairing;
using infer::Scope;

std::string_view InferRuleName(InferRule rule) {
  switch (rule) {
    case InferRule::kNone:
      return "none";
    case InferRule::kBeforeProfile:
      return "before the profile";
    case InferRule::kTemporary:
      return "freed in its op";
    case InferRule::kParameter:
      return "module construction";
    case InferRule::kGradient:
      return "outlives backward";
    case InferRule::kGradientFreed:
      return "freed by zero_grad";
    case InferRule::kAutogradDetail:
      return "within backward";
    case InferRule::kOptimizerState:
      return "outlives the optimizer step";
    case InferRule::kActivationSaved:
      return "freed during backward";
    case InferRule::kActivationModule:
      return "made in a module";
    case InferRule::kActivationLoss:
      return "made for the loss";
    case InferRule::kInput:
      return "made for the forward";
    case InferRule::kLeavesBefore:
      return "leaves from before the profile";
    case InferRule::kStateBefore:
      return "optimizer state from before the profile";
  }
  return "?";
}

std::string_view InferRuleText(InferRule rule) {
  switch (rule) {
    case InferRule::kNone:
      return "no rule applies (the trace records no tensors), so it stays unknown";
    case InferRule::kBeforeProfile:
      return "memory the allocator held when profiling began, never freed in the profile: "
             "nothing in the trace says what it is";
    case InferRule::kTemporary:
      return "freed inside the op that allocated it";
    case InferRule::kParameter:
      return "allocated while a module was built or moved (__init__, reset_parameters, _apply) "
             "and never freed";
    case InferRule::kGradient:
      return "allocated in backward and still alive after the backward pass";
    case InferRule::kGradientFreed:
      return "memory from before the profile freed by zero_grad (the previous step's gradient)";
    case InferRule::kAutogradDetail:
      return "allocated in backward and freed within the backward pass";
    case InferRule::kOptimizerState:
      return "allocated in an optimizer step and still alive after it";
    case InferRule::kActivationSaved:
      return "allocated outside backward and freed during backward (saved for it)";
    case InferRule::kActivationModule:
      return "allocated inside an nn.Module's forward";
    case InferRule::kActivationLoss:
      return "allocated after the forward's last module and before the backward (the loss)";
    case InferRule::kInput:
      return "allocated before the forward and alive when it starts";
    case InferRule::kLeavesBefore:
      return "memory the allocator held when profiling began, as large as the leaves a "
             "backward pass accumulates gradients into (their AccumulateGrad ops' sizes)";
    case InferRule::kStateBefore:
      return "memory the allocator held when profiling began, as large as the state the "
             "optimizer keeps for the leaves (so many tensors of each leaf's size per its class)";
  }
  return "?";
}

namespace {

std::optional<Category> CategoryOf(InferRule rule) {
  switch (rule) {
    case InferRule::kNone:
    case InferRule::kBeforeProfile:
      return std::nullopt;
    case InferRule::kTemporary:
      return Category::kTemporary;
    case InferRule::kParameter:
    case InferRule::kLeavesBefore:
      return Category::kParameter;
    case InferRule::kGradient:
    case InferRule::kGradientFreed:
      return Category::kGradient;
    case InferRule::kAutogradDetail:
      return Category::kAutogradDetail;
    case InferRule::kOptimizerState:
    case InferRule::kStateBefore:
      return Category::kOptimizerState;
    case InferRule::kActivationSaved:
    case InferRule::kActivationModule:
    case InferRule::kActivationLoss:
      return Category::kActivation;
    case InferRule::kInput:
      return Category::kInput;
  }
  return std::nullopt;
}

// The rule for allocation record `a` (an allocation that pairs with no
// live one), in the order of the file's comment.
InferRule RuleFor(const Trace& t, const std::vector<uint64_t>& alloc_ptrs, const Evidence& ev,
                  const Pairing& p, uint32_t a) {
  if (const auto part = PreProfilePartOf(alloc_ptrs[a], t.devices.size())) {
    switch (*part) {
      case PreProfilePart::kRest:
        return InferRule::kBeforeProfile;
      case PreProfilePart::kLeaves:
        return InferRule::kLeavesBefore;
      case PreProfilePart::kOptimizerState:
        return InferRule::kStateBefore;
    }
  }
  const uint32_t e = p.event_of[a];
  const int64_t time = t.event_t0[e];
  const uint32_t f = p.free_of[a];
  const uint32_t fe = f == kNone32 ? kNone32 : p.event_of[f];
  const int64_t free_time = fe == kNone32 ? INT64_MAX : t.event_t0[fe];
  if (fe != kNone32 && ev.node[e] != kNone32 && ev.node[fe] == ev.node[e])
    return InferRule::kTemporary;
  if (ev.module_init[e] && fe == kNone32) return InferRule::kParameter;
  const Scope free_phase = fe == kNone32 ? Scope::kOther : ev.PhaseOf(fe, free_time);
  switch (ev.scope[e]) {
    case Scope::kBackward:
      return fe != kNone32 && free_phase == Scope::kBackward ? InferRule::kAutogradDetail
                                                             : InferRule::kGradient;
    case Scope::kOptimizer:
      return fe == kNone32 || ev.step[fe] != ev.step[e] ? InferRule::kOptimizerState
                                                        : InferRule::kNone;
    case Scope::kZeroGrad:
      return InferRule::kNone;
    case Scope::kForward:
    case Scope::kOther:
      break;
  }
  if (fe != kNone32 && free_phase == Scope::kBackward) return InferRule::kActivationSaved;
  if (ev.scope[e] == Scope::kForward) return InferRule::kActivationModule;
  if (!ev.has_modules) return InferRule::kNone;
  const Scope before = ev.LastDecisiveBefore(time);
  if (before != Scope::kForward) {
    const int64_t forward = ev.NextStart(Scope::kForward, time);
    if (forward != INT64_MAX && forward < ev.NextStart(Scope::kBackward, time) &&
        forward < ev.NextStart(Scope::kOptimizer, time) && free_time > forward)
      return InferRule::kInput;
    return InferRule::kNone;
  }
  return ev.NextDecisiveAfter(time) == Scope::kBackward ? InferRule::kActivationLoss
                                                        : InferRule::kNone;
}

// Rule 1's conditions: on a device where the profile builds parameters
// (rule 3) or makes optimizer state (rule 5), the leaves, or the state,
// from before the profile are not what the reader took them for.
void KeepMadeInProfile(const Trace& t, InferredCategories& out) {
  std::vector<bool> built(t.devices.size(), false), made(t.devices.size(), false);
  for (uint32_t a = 0; a < out.rule.size(); ++a) {
    if (out.rule[a] == InferRule::kParameter) built[t.allocs[a].device] = true;
    if (out.rule[a] == InferRule::kOptimizerState) made[t.allocs[a].device] = true;
  }
  for (uint32_t a = 0; a < out.rule.size(); ++a) {
    const InferRule r = out.rule[a];
    const bool drop = (r == InferRule::kLeavesBefore && built[t.allocs[a].device]) ||
                      (r == InferRule::kStateBefore && made[t.allocs[a].device]);
    if (!drop) continue;
    out.bytes_by_rule[static_cast<int>(r)] -= t.allocs[a].bytes;
    out.bytes_by_rule[static_cast<int>(InferRule::kBeforeProfile)] += t.allocs[a].bytes;
    out.rule[a] = InferRule::kBeforeProfile;
    out.category[a] = InferredCategories::kNoCategory;
  }
}

}  // namespace

Expected<InferredCategories> InferCategories(const OpTree& tree, const TensorRecords& records) {
  const Trace& t = tree.trace();
  if (records.alloc_ptrs.size() != t.allocs.size()) {
    return Status::Error(
        "internal error: the allocations' addresses are missing; categories cannot be inferred");
  }
  const Evidence ev = infer::GatherEvidence(tree);
  const Pairing p = infer::PairAllocations(tree, records.alloc_ptrs);
  InferredCategories out;
  const size_t n = t.allocs.size();
  out.category.assign(n, InferredCategories::kNoCategory);
  out.rule.assign(n, InferRule::kNone);
  out.pair = p.pair;
  auto set = [&](uint32_t a, InferRule rule) {
    out.rule[a] = rule;
    if (const auto c = CategoryOf(rule)) out.category[a] = static_cast<uint8_t>(*c);
  };
  // Allocations that start a lifetime first, then the records that pair
  // with one (frees, allocations at a live address) take its answer.
  for (uint32_t a = 0; a < n; ++a) {
    const AllocInfo& info = t.allocs[a];
    if (p.event_of[a] == kNone32) continue;
    if (info.bytes > 0 && p.pair[a] == kNone32) {
      set(a, RuleFor(t, records.alloc_ptrs, ev, p, a));
      out.bytes_by_rule[static_cast<int>(out.rule[a])] += info.bytes;
    } else if (info.bytes < 0 && p.pair[a] == kNone32) {
      const uint32_t e = p.event_of[a];
      const InferRule rule = ev.PhaseOf(e, t.event_t0[e]) == Scope::kZeroGrad
                                 ? InferRule::kGradientFreed
                                 : InferRule::kNone;
      set(a, rule);
      out.bytes_by_rule[static_cast<int>(rule)] -= info.bytes;
    }
  }
  KeepMadeInProfile(t, out);
  for (uint32_t a = 0; a < n; ++a) {
    if (p.pair[a] == kNone32) continue;
    out.rule[a] = out.rule[p.pair[a]];
    out.category[a] = out.category[p.pair[a]];
  }
  return out;
}

}  // namespace memtl

// The evidence the inference rules read (evidence.h): scopes from names,
// nodes from the op nesting, markers in time order, and the pairing of
// allocations with their frees.
#include "core/infer/evidence.h"

#include <algorithm>
#include <climits>
#include <string_view>

#include "core/model/ptr_dev_map.h"

namespace memtl::infer {

namespace {

constexpr std::string_view kEvaluate = "autograd::engine::evaluate_function: ";

// What a name says of the scope it opens. kInherit: nothing (the event is
// in its parent's scope).
enum class Own : uint8_t { kInherit, kOther, kForward, kBackward, kOptimizer, kZeroGrad };

// The function of a python tracer frame "FILE(LINE): FUNC"; empty for a
// name of another form.
std::string_view FrameFunction(std::string_view name) {
  const auto colon = name.find("): ");
  return colon == std::string_view::npos ? std::string_view() : name.substr(colon + 3);
}

// By the name alone (a backward function's scope is the op's own, apart).
Own OwnScopeOfOpName(std::string_view name) {
  if (name.starts_with(kEvaluate)) return Own::kBackward;
  if (name.starts_with("Optimizer.step#")) return Own::kOptimizer;
  if (name.starts_with("Optimizer.zero_grad#")) return Own::kZeroGrad;
  return Own::kInherit;
}

Own OwnScopeOfPy(std::string_view name) {
  if (name.starts_with("nn.Module: ")) return Own::kForward;
  if (name.find("torch/optim/") == std::string_view::npos) return Own::kInherit;
  // A learning-rate scheduler's step keeps no optimizer state.
  if (name.find("torch/optim/lr_scheduler") != std::string_view::npos) return Own::kOther;
  return FrameFunction(name) == "zero_grad" ? Own::kZeroGrad : Own::kOptimizer;
}

// Module construction: torch/nn/ frames that make parameters and buffers
// (a layer's __init__, reset_parameters) or move them (_apply, under .to(),
// .cuda(), .half()).
bool IsModuleInitFrame(std::string_view name) {
  if (name.find("torch/nn/") == std::string_view::npos) return false;
  const std::string_view f = FrameFunction(name);
  return f == "__init__" || f == "reset_parameters" || f == "_apply";
}

Scope ToScope(Own o) {
  switch (o) {
    case Own::kForward:
      return Scope::kForward;
    case Own::kBackward:
      return Scope::kBackward;
    case Own::kOptimizer:
      return Scope::kOptimizer;
    case Own::kZeroGrad:
      return Scope::kZeroGrad;
    case Own::kInherit:
    case Own::kOther:
      break;
  }
  return Scope::kOther;
}

}  // namespace

Scope Evidence::PhaseOf(uint32_t event, int64_t time) const {
  if (scope[event] != Scope::kOther) return scope[event];
  const auto it = std::upper_bound(marker_time.begin(), marker_time.end(), time);
  if (it == marker_time.begin()) return Scope::kOther;
  return marker_scope[static_cast<size_t>(std::prev(it) - marker_time.begin())];
}

int64_t Evidence::NextStart(Scope s, int64_t time) const {
  const std::vector<int64_t>& v = starts[static_cast<int>(s)];
  const auto it = std::upper_bound(v.begin(), v.end(), time);
  return it == v.end() ? INT64_MAX : *it;
}

Scope Evidence::LastDecisiveBefore(int64_t time) const {
  const auto it = std::upper_bound(decisive_time.begin(), decisive_time.end(), time);
  if (it == decisive_time.begin()) return Scope::kOther;
  return decisive_scope[static_cast<size_t>(std::prev(it) - decisive_time.begin())];
}

Scope Evidence::NextDecisiveAfter(int64_t time) const {
  const auto it = std::upper_bound(decisive_time.begin(), decisive_time.end(), time);
  if (it == decisive_time.end()) return Scope::kOther;
  return decisive_scope[static_cast<size_t>(it - decisive_time.begin())];
}

Evidence GatherEvidence(const OpTree& tree) {
  const Trace& t = tree.trace();
  const auto n = static_cast<uint32_t>(t.events.size());
  Evidence ev;
  ev.scope.assign(n, Scope::kOther);
  ev.node.assign(n, kNone32);
  ev.step.assign(n, kNone32);
  ev.module_init.assign(n, false);
  // What each name says, once per string: names repeat.
  constexpr uint8_t kUnseen = 0xff;
  std::vector<uint8_t> py_own(t.strings.size(), kUnseen), py_init(t.strings.size(), kUnseen);
  std::vector<uint8_t> op_own(t.strings.size(), kUnseen);
  // Parents come before their children in the event array (the format's
  // pre-order), so one pass in index order sees every parent first.
  for (uint32_t e = 0; e < n; ++e) {
    const Event& x = t.events[e];
    const uint32_t p = x.parent;
    Scope scope = p == kNone32 ? Scope::kOther : ev.scope[p];
    uint32_t node = p == kNone32 ? kNone32 : ev.node[p];
    uint32_t step = p == kNone32 ? kNone32 : ev.step[p];
    bool init = p != kNone32 && ev.module_init[p];
    Own own = Own::kInherit;
    if (x.kind == EventKind::kOp) {
      const OpInfo& op = t.ops[x.payload];
      if (op_own[op.name] == kUnseen)
        op_own[op.name] = static_cast<uint8_t>(OwnScopeOfOpName(t.strings.Get(op.name)));
      own = static_cast<Own>(op_own[op.name]);
      // autograd's evaluate_function wrapper is in backward but no node.
      const bool wrapper = own == Own::kBackward;
      if (op.scope == RecordScope::kBackwardFunction) own = Own::kBackward;
      // A backward function is a node of its own; other ops are the node
      // of everything under them unless an op around them is one already.
      const bool annotation = op.scope == RecordScope::kUserScope;
      const bool own_node = op.scope == RecordScope::kBackwardFunction ||
                            (node == kNone32 && !wrapper && !annotation);
      if (own_node) node = e;
    } else if (x.kind == EventKind::kPy) {
      const uint32_t name = t.py_names[x.payload];
      if (py_own[name] == kUnseen) {
        const std::string& s = t.strings.Get(name);
        py_own[name] = static_cast<uint8_t>(OwnScopeOfPy(s));
        py_init[name] = IsModuleInitFrame(s) ? 1 : 0;
      }
      own = static_cast<Own>(py_own[name]);
      init = init || py_init[name] == 1;
      if (own == Own::kForward) ev.has_modules = true;
    }
    if (own != Own::kInherit) scope = ToScope(own);
    if (own == Own::kOptimizer && step == kNone32) step = e;
    ev.scope[e] = scope;
    ev.node[e] = node;
    ev.step[e] = step;
    ev.module_init[e] = init;
  }
  for (const uint32_t e : tree.sorted()) {
    if (t.events[e].kind == EventKind::kAlloc) continue;
    const int64_t time = t.event_t0[e];
    const Scope s = ev.scope[e];
    ev.marker_time.push_back(time);
    ev.marker_scope.push_back(s);
    ev.starts[static_cast<int>(s)].push_back(time);
    if (s != Scope::kOther) {
      ev.decisive_time.push_back(time);
      ev.decisive_scope.push_back(s);
    }
  }
  return ev;
}

Pairing PairAllocations(const OpTree& tree, const std::vector<uint64_t>& alloc_ptrs) {
  const Trace& t = tree.trace();
  Pairing p;
  p.pair.assign(t.allocs.size(), kNone32);
  p.free_of.assign(t.allocs.size(), kNone32);
  p.event_of.assign(t.allocs.size(), kNone32);
  PtrDevMap<uint32_t> live;
  const EventOrder order = t.header.pairs_in_time_order ? tree.sorted() : tree.preorder();
  for (const uint32_t e : order) {
    const Event& x = t.events[e];
    if (x.kind != EventKind::kAlloc) continue;
    const uint32_t a = x.payload;
    p.event_of[a] = e;
    const AllocInfo& info = t.allocs[a];
    const uint64_t ptr = alloc_ptrs[a];
    if (info.bytes > 0) {
      auto [slot, inserted] = live.try_emplace(ptr, info.device, a);
      if (!inserted) p.pair[a] = *slot;  // a version bump of the live one
    } else if (uint32_t* slot = live.find(ptr, info.device); slot != nullptr) {
      p.pair[a] = *slot;
      p.free_of[*slot] = a;
      live.erase(ptr, info.device);
    }
  }
  return p;
}

}  // namespace memtl::infer

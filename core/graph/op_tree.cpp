// Builds the traversal orders and schema facts of the op tree. Traversals are
// iterative: event trees can be deeper than any call stack.
#include "core/graph/op_tree.h"

#include <algorithm>
#include <string>
#include <unordered_map>

namespace memtl {

OpTree::OpTree(const Trace& trace, const KeyTable& keys, const SchemaRegistry& schemas)
    : OpTree(trace) {
  AddFacts(keys, schemas);
}

namespace {

// Whether the events, in index order, are a depth-first pre-order of the
// tree their parent links describe (children in index order): every event's
// parent is on the path from the root to the event before it.
bool IsPreorder(const std::vector<Event>& events) {
  std::vector<uint32_t> path;
  for (uint32_t i = 0; i < events.size(); ++i) {
    const uint32_t parent = events[i].parent;
    while (!path.empty() && path.back() != parent) path.pop_back();
    if (parent != kNone32 && path.empty()) return false;
    path.push_back(i);
  }
  return true;
}

}  // namespace

void ObservedArgs(const Trace& trace, const KeyTable& keys, uint32_t op,
                  std::vector<Observed>& observed) {
  observed.clear();
  for (const Arg arg : trace.ArgsOf(op)) {
    switch (arg.kind) {
      case ArgKind::kNone:
        observed.push_back(Observed::kNone);
        break;
      case ArgKind::kTensor:
        observed.push_back(keys.SlotOfTensor(arg.begin).valid() ? Observed::kTensor
                                                                : Observed::kNone);
        break;
      case ArgKind::kTensorList: {
        bool all = true;
        for (uint32_t k = 0; k < arg.count; ++k)
          all &= keys.SlotOfTensor(trace.list_items[arg.begin + k]).valid();
        observed.push_back(all ? Observed::kTensorList : Observed::kBadTensorList);
        break;
      }
      case ArgKind::kBool:
        observed.push_back(Observed::kBool);
        break;
      case ArgKind::kInt:
        observed.push_back(Observed::kInt);
        break;
      case ArgKind::kFloat:
        observed.push_back(Observed::kFloat);
        break;
      case ArgKind::kComplex:
        observed.push_back(Observed::kComplex);
        break;
      case ArgKind::kString:
        observed.push_back(Observed::kOther);
        break;
    }
  }
}

OpTree::OpTree(const Trace& trace) : trace_(trace) {
  const auto n = static_cast<uint32_t>(trace.events.size());
  n_ = n;
  in_index_order_ = IsPreorder(trace.events);
  if (!in_index_order_) {
    // Parents precede their children (the reader checks it) but subtrees
    // interleave: walk a children index, built here and dropped.
    std::vector<uint32_t> child_begin(n + 1, 0), roots;
    for (uint32_t i = 0; i < n; ++i) {
      if (trace.events[i].parent == kNone32) {
        roots.push_back(i);
      } else {
        ++child_begin[trace.events[i].parent + 1];
      }
    }
    for (uint32_t i = 0; i < n; ++i) child_begin[i + 1] += child_begin[i];
    std::vector<uint32_t> child_list(child_begin[n]);
    std::vector<uint32_t> fill(child_begin.begin(), child_begin.end() - 1);
    for (uint32_t i = 0; i < n; ++i) {
      if (trace.events[i].parent != kNone32) child_list[fill[trace.events[i].parent]++] = i;
    }
    preorder_.reserve(n);
    position_.assign(n, uint32_t{0});
    std::vector<uint32_t> stack(roots.rbegin(), roots.rend());
    while (!stack.empty()) {
      const uint32_t e = stack.back();
      stack.pop_back();
      position_[e] = static_cast<uint32_t>(preorder_.size());
      preorder_.push_back(e);
      for (uint32_t c = child_begin[e + 1]; c != child_begin[e];) stack.push_back(child_list[--c]);
    }
  }
  const EventOrder pre = preorder();
  // Pre-order of a well-nested trace is nearly always sorted by start
  // time already; check before paying for the sort.
  auto by_start = [&](uint32_t a, uint32_t b) { return trace.event_t0[a] < trace.event_t0[b]; };
  sorted_is_preorder_ = true;
  for (uint32_t p = 1; p < n && sorted_is_preorder_; ++p)
    sorted_is_preorder_ = !by_start(pre[p], pre[p - 1]);
  if (!sorted_is_preorder_) {
    sorted_.assign(n, uint32_t{0});
    for (uint32_t p = 0; p < n; ++p) sorted_[p] = pre[p];
    std::stable_sort(sorted_.begin(), sorted_.end(), by_start);
  }
}

void OpTree::AddFacts(const KeyTable& keys, const SchemaRegistry& schemas) {
  const Trace& trace = trace_;
  const uint32_t n = n_;
  // Backward flags, parents before children (true of index order too).
  in_backward_.assign(n, false);
  for (uint32_t e = 0; e < n; ++e) {
    const Event& ev = trace.events[e];
    const bool self_bwd =
        ev.kind == EventKind::kOp && trace.ops[ev.payload].scope == RecordScope::kBackwardFunction;
    in_backward_[e] = self_bwd || (ev.parent != kNone32 && in_backward_[ev.parent]);
  }
  // Schema facts, computed once per distinct (op name, argument kinds).
  facts_of_op_.assign(trace.ops.size(), uint32_t{0});
  facts_.clear();
  mutability_pool_.clear();
  std::vector<Observed> observed;
  std::unordered_map<std::string, uint32_t> known;  // (name id, observed kinds) -> facts_ index
  std::string key;
  for (uint32_t e = 0; e < n; ++e) {
    const Event& ev = trace.events[e];
    if (ev.kind != EventKind::kOp) continue;
    ObservedArgs(trace, keys, ev.payload, observed);
    // The facts depend only on the op's name and the kinds observed, and a
    // trace repeats the same few hundred such pairs (every training step
    // runs the same ops): each pair is matched once.
    const uint32_t name = trace.ops[ev.payload].name;
    key.assign(reinterpret_cast<const char*>(&name), sizeof name);
    key.append(reinterpret_cast<const char*>(observed.data()), observed.size());
    auto [it, inserted] = known.try_emplace(key, static_cast<uint32_t>(facts_.size()));
    if (inserted) {
      const auto matches = MatchSchemas(schemas.Lookup(trace.Name(ev)), observed);
      const auto mut = InputsAreMutable(matches, observed.size());
      SchemaFacts f;
      f.num_matches = static_cast<uint8_t>(std::min<size_t>(matches.size(), 255));
      f.mutability_begin = static_cast<uint32_t>(mutability_pool_.size());
      f.mutability_count = static_cast<uint32_t>(mut.size());
      mutability_pool_.insert(mutability_pool_.end(), mut.begin(), mut.end());
      facts_.push_back(f);
    }
    facts_of_op_[ev.payload] = it->second;
  }
}

}  // namespace memtl

// Builds the traversal orders and schema facts of the op tree. Traversals are
// iterative: event trees can be deeper than any call stack.
#include "core/graph/op_tree.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "core/model/large_array.h"

namespace memtl {

OpTree::OpTree(const Trace& trace, const SchemaRegistry& schemas) : OpTree(trace) {
  AddSchemaFacts(schemas);
}

OpTree::OpTree(const Trace& trace) : trace_(trace) {
  const auto n = static_cast<uint32_t>(trace.events.size());
  ReserveLarge(preorder_, n);
  AssignLarge(position_, n, uint32_t{0});
  AssignLarge(subtree_size_, n, uint32_t{1});
  in_backward_.assign(n, false);
  std::vector<uint32_t> stack(trace.roots.rbegin(), trace.roots.rend());
  while (!stack.empty()) {
    const uint32_t e = stack.back();
    stack.pop_back();
    position_[e] = static_cast<uint32_t>(preorder_.size());
    preorder_.push_back(e);
    const Event& ev = trace.events[e];
    const bool self_bwd = ev.kind == EventKind::kOp && ev.scope == RecordScope::kBackwardFunction;
    in_backward_[e] = self_bwd || (ev.parent != kNone32 && in_backward_[ev.parent]);
    auto [begin, end] = trace.Children(e);
    for (auto it = end; it != begin;) stack.push_back(*--it);
  }
  // Subtree sizes, children after parents in pre-order: accumulate backwards.
  for (uint32_t p = n; p-- > 0;) {
    const uint32_t e = preorder_[p];
    if (trace.events[e].parent != kNone32)
      subtree_size_[trace.events[e].parent] += subtree_size_[e];
  }
  // Pre-order of a well-nested trace is nearly always sorted by start
  // time already; check before paying for the sort.
  auto by_start = [&](uint32_t a, uint32_t b) { return trace.events[a].t0 < trace.events[b].t0; };
  sorted_is_preorder_ = std::is_sorted(preorder_.begin(), preorder_.end(), by_start);
  if (!sorted_is_preorder_) {
    sorted_ = preorder_;
    std::stable_sort(sorted_.begin(), sorted_.end(), by_start);
  }
}

void OpTree::AddSchemaFacts(const SchemaRegistry& schemas) {
  const Trace& trace = trace_;
  const auto n = static_cast<uint32_t>(trace.events.size());
  // Schema facts, computed once per op.
  AssignLarge(num_matches_, n, uint8_t{0});
  AssignLarge(mutability_begin_, n + 1, uint32_t{0});
  ReserveLarge(mutability_pool_, trace.args.size());
  std::vector<Observed> observed;
  struct Facts {
    uint8_t num_matches = 0;
    uint32_t mutability_begin = 0, mutability_end = 0;  // into known_mutability
  };
  std::unordered_map<std::string, Facts> known;  // (name id, observed kinds) -> facts
  std::vector<int8_t> known_mutability;
  std::string key;
  for (uint32_t e = 0; e < n; ++e) {
    const Event& ev = trace.events[e];
    mutability_begin_[e] = static_cast<uint32_t>(mutability_pool_.size());
    if (ev.kind != EventKind::kOp) continue;
    const OpInfo& op = trace.ops[ev.payload];
    observed.clear();
    for (uint32_t a = 0; a < op.args_count; ++a) {
      const Arg& arg = trace.args[op.args_begin + a];
      switch (arg.kind) {
        case ArgKind::kNone:
          observed.push_back(Observed::kNone);
          break;
        case ArgKind::kTensor:
          observed.push_back(SlotOfTensor(trace, arg.begin) != kNone32 ? Observed::kTensor
                                                                       : Observed::kNone);
          break;
        case ArgKind::kTensorList: {
          bool all = true;
          for (uint32_t k = 0; k < arg.count; ++k)
            all &= SlotOfTensor(trace, trace.list_items[arg.begin + k]) != kNone32;
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
    // The facts depend only on the op's name and the kinds observed, and a
    // trace repeats the same few hundred such pairs (every training step
    // runs the same ops): each pair is matched once.
    key.assign(reinterpret_cast<const char*>(&ev.name), sizeof ev.name);
    key.append(reinterpret_cast<const char*>(observed.data()), observed.size());
    auto [it, inserted] = known.try_emplace(key, Facts{});
    if (inserted) {
      const auto matches = MatchSchemas(schemas.Lookup(trace.Name(ev)), observed);
      const auto mut = InputsAreMutable(matches, observed.size());
      it->second.num_matches = static_cast<uint8_t>(std::min<size_t>(matches.size(), 255));
      it->second.mutability_begin = static_cast<uint32_t>(known_mutability.size());
      known_mutability.insert(known_mutability.end(), mut.begin(), mut.end());
      it->second.mutability_end = static_cast<uint32_t>(known_mutability.size());
    }
    const Facts& f = it->second;
    num_matches_[e] = f.num_matches;
    mutability_pool_.insert(mutability_pool_.end(), known_mutability.begin() + f.mutability_begin,
                            known_mutability.begin() + f.mutability_end);
  }
  mutability_begin_[n] = static_cast<uint32_t>(mutability_pool_.size());
}

}  // namespace memtl

// Queries over the op tree and data-flow graph shared by several passes.
#include <unordered_map>

#include "passes/pass.h"

namespace memtl {

void ForEachParameterAndGradient(
    const PassInput& in, uint32_t event,
    const std::function<void(std::optional<TensorKey>, std::optional<TensorKey>)>& fn) {
  const Trace& t = in.trace;
  const Event& e = t.events[event];
  if (e.kind == EventKind::kOp) {
    // AccumulateGrad either detaches a new gradient or adds into the old one
    // in place; its first child shows which, and that child's first input is
    // the gradient.
    if (e.scope != RecordScope::kBackwardFunction || t.Name(e) != "torch::autograd::AccumulateGrad")
      return;
    auto [begin, end] = t.Children(event);
    if (begin == end) return;
    const Event& child = t.events[*begin];
    if (child.kind != EventKind::kOp) return;
    const std::string& name = t.Name(child);
    if (name != "aten::detach" && name != "aten::add_") return;
    const OpInfo& op = t.ops[child.payload];
    if (op.args_count == 0) return;
    const Arg& first = t.args[op.args_begin];
    if (first.kind != ArgKind::kTensor) return;
    fn(std::nullopt, KeyOfTensor(t, first.begin));
    return;
  }
  if (e.kind != EventKind::kPy) return;
  const PyInfo& py = t.pys[e.payload];
  auto params = [&](uint32_t begin, uint32_t count) {
    for (uint32_t p = begin; p < begin + count; ++p) {
      fn(KeyOfTensor(t, t.params[p].tensor), KeyOfTensor(t, t.params[p].grad));
    }
  };
  if (py.module != kNone32)
    params(t.modules[py.module].params_begin, t.modules[py.module].params_count);
  if (py.optimizer != kNone32)
    params(t.optimizers[py.optimizer].params_begin, t.optimizers[py.optimizer].params_count);
}

std::unordered_set<int64_t> AnyVersionDependsOnGradient(const PassInput& in,
                                                        const CategoryWriter& cats) {
  const DataFlowGraph& g = in.graph;
  const auto& nodes = g.nodes();
  // Which nodes read each id.
  std::unordered_map<int64_t, std::vector<uint32_t>> readers;
  std::unordered_set<int64_t> depends;
  std::vector<int64_t> work;
  std::vector<bool> fired(nodes.size(), false);
  auto fire = [&](uint32_t n) {
    if (fired[n]) return;
    fired[n] = true;
    for (const FlowEdge* e = g.begin(nodes[n]); e != g.end(nodes[n]); ++e) {
      if (e->is_output() && depends.insert(e->key.id.value()).second)
        work.push_back(e->key.id.value());
    }
  };
  for (uint32_t n = 0; n < nodes.size(); ++n) {
    for (const FlowEdge* e = g.begin(nodes[n]); e != g.end(nodes[n]); ++e) {
      if (!e->is_input()) continue;
      readers[e->key.id.value()].push_back(n);
    }
  }
  // Seeds: inputs that are gradients or parameters themselves.
  for (uint32_t n = 0; n < nodes.size(); ++n) {
    for (const FlowEdge* e = g.begin(nodes[n]); e != g.end(nodes[n]); ++e) {
      if (!e->is_input()) continue;
      const auto c = cats.Get(e->key, e->input_version);
      if (c == Category::kGradient || c == Category::kParameter) {
        if (depends.insert(e->key.id.value()).second) work.push_back(e->key.id.value());
      }
    }
  }
  // A node that reads any id in the set adds all its outputs' ids.
  while (!work.empty()) {
    const int64_t id = work.back();
    work.pop_back();
    auto it = readers.find(id);
    if (it == readers.end()) continue;
    for (uint32_t n : it->second) fire(n);
  }
  return depends;
}

}  // namespace memtl

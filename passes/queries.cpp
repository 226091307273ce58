// Queries over the op tree and data-flow graph shared by several passes.
#include "passes/pass.h"

#include <algorithm>

namespace memtl {

std::vector<std::pair<KeySlot, Version>> AllTensorVersions(const DataFlowGraph& graph,
                                                           const CategoryDict& cats) {
  // Versions of a key are contiguous from v0: every key starts at v0 and
  // each bump is an edge from v to v+1. So the set is, per key the graph
  // mentions, 0..its latest version, plus v0 of keys set by id.
  std::vector<std::pair<KeySlot, Version>> all;
  if (graph.value_begin().empty()) return all;
  const auto num_keys = static_cast<uint32_t>(graph.value_begin().size() - 1);
  all.reserve(graph.num_values());
  for (const KeySlot k : KeyTable::SlotRange(num_keys)) {
    // In PyTorch's snapshot: the graph mentions the key, or a pass
    // categorized it by id (the timeline's InSnapshot, the same rule).
    if (!graph.last_version(k).valid() && !cats.set_by_id(k)) continue;
    const Version last = std::max(graph.last_version(k), Version(0));
    for (Version v(0); v <= last; v = v.next()) all.emplace_back(k, v);
  }
  return all;
}

void ForEachParameterAndGradientSlow(const PassInput& in, uint32_t event,
                                     const std::function<void(KeySlot, KeySlot)>& fn) {
  const Trace& t = in.trace;
  const Event& e = t.events[event];
  if (e.kind == EventKind::kOp) {
    // AccumulateGrad either detaches a new gradient or adds into the old one
    // in place; its first child shows which, and that child's first input is
    // the gradient.
    // A backward op (ForEachParameterAndGradient lets no other op through).
    if (t.Name(e) != "torch::autograd::AccumulateGrad") return;
    const uint32_t first_child = in.tree.first_child(event);
    if (first_child == kNone32) return;
    const Event& child = t.events[first_child];
    if (child.kind != EventKind::kOp) return;
    const std::string& name = t.Name(child);
    if (name != "aten::detach" && name != "aten::add_") return;
    const ArgList args = t.ArgsOf(child.payload);
    if (args.empty()) return;
    const Arg first = *args.begin();
    if (first.kind != ArgKind::kTensor) return;
    fn(KeySlot(), in.keys.SlotOfTensor(first.begin));
    return;
  }
  if (e.kind != EventKind::kPy) return;
  const PyInfo py = t.Py(e.payload);
  auto params = [&](uint32_t begin, uint32_t count) {
    for (uint32_t p = begin; p < begin + count; ++p) {
      fn(in.keys.SlotOfTensor(t.params[p].tensor), in.keys.SlotOfTensor(t.params[p].grad));
    }
  };
  if (py.module() != kNone32)
    params(t.modules[py.module()].params_begin, t.modules[py.module()].params_count);
  if (py.optimizer() != kNone32)
    params(t.optimizers[py.optimizer()].params_begin, t.optimizers[py.optimizer()].params_count);
}

std::vector<bool> AnyVersionDependsOnGradient(const PassInput& in, const CategoryWriter& cats) {
  const DataFlowGraph& g = in.graph;
  const auto& nodes = g.nodes();
  const uint32_t num_ids = in.keys.num_ids;
  // Which nodes read each tensor id, as CSR over id slots.
  std::vector<uint32_t> begin(static_cast<size_t>(num_ids) + 1, 0);
  for (const auto& e : g.edges()) {
    if (e.is_input()) ++begin[in.keys.IdIndex(e.key()) + 1];
  }
  for (size_t i = 0; i < num_ids; ++i) begin[i + 1] += begin[i];
  std::vector<uint32_t> readers(begin.back());
  std::vector<uint32_t> fill(begin.begin(), begin.end() - 1);
  for (uint32_t n = 0; n < nodes.size(); ++n) {
    for (const FlowEdge* e = g.begin(nodes[n]); e != g.end(nodes[n]); ++e) {
      if (e->is_input()) readers[fill[in.keys.IdIndex(e->key())]++] = n;
    }
  }

  std::vector<bool> depends(num_ids, false);
  std::vector<uint32_t> work;
  std::vector<bool> fired(nodes.size(), false);
  auto add = [&](uint32_t id) {
    if (depends[id]) return;
    depends[id] = true;
    work.push_back(id);
  };
  // Seeds: inputs that are gradients or parameters themselves.
  for (const auto& e : g.edges()) {
    if (!e.is_input()) continue;
    const auto c = cats.Get(e.key(), e.input());
    if (c == Category::kGradient || c == Category::kParameter) add(in.keys.IdIndex(e.key()));
  }
  // A node that reads any id in the set adds all its outputs' ids.
  while (!work.empty()) {
    const uint32_t id = work.back();
    work.pop_back();
    for (uint32_t r = begin[id]; r < begin[id + 1]; ++r) {
      const uint32_t n = readers[r];
      if (fired[n]) continue;
      fired[n] = true;
      for (const FlowEdge* e = g.begin(nodes[n]); e != g.end(nodes[n]); ++e) {
        if (e->is_output()) add(in.keys.IdIndex(e->key()));
      }
    }
  }
  return depends;
}

}  // namespace memtl

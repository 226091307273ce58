// Data-flow graph construction and validation, ported from PyTorch's
// DataFlowNode/DataFlowGraph, with every assertion turned into an error.
#include "core/graph/data_flow.h"

#include <algorithm>
#include "core/model/flat_map.h"
#include "core/model/large_array.h"

namespace memtl {

namespace {

std::string Describe(const Trace& trace, uint32_t event) {
  const Event& e = trace.events[event];
  return "\"" + trace.Name(e).substr(0, 80) + "\" (event " + std::to_string(event) +
         ", t=" + std::to_string(trace.event_t0[event]) + ")";
}

std::string KeyText(const KeyTable& keys, KeySlot key, Version v) {
  return "T" + std::to_string(keys[key].id.value()) + "(v" + std::to_string(v.value()) + ")";
}

// Calls fn(event, first, last) for the topmost ops that match a schema or
// are backward functions, and the allocations outside them, in pre-order;
// the event's subtree is pre-order positions [first, last).
template <typename Fn>
void ForEachLeaf(const OpTree& tree, Fn&& fn) {
  const Trace& trace = tree.trace();
  const EventOrder pre = tree.preorder();
  for (uint32_t p = 0; p < pre.size();) {
    const uint32_t e = pre[p];
    const Event& ev = trace.events[e];
    const bool leaf_op =
        ev.kind == EventKind::kOp &&
        (trace.ops[ev.payload].scope == RecordScope::kBackwardFunction || tree.num_matches(e) > 0);
    if (leaf_op || ev.kind == EventKind::kAlloc) {
      const uint32_t end = tree.subtree_end(p);
      fn(e, p, end);
      p = end;
    } else {
      ++p;
    }
  }
}

struct Pending {
  FlowEdge edge;
  bool has_true = false, has_false = false, has_none = false;
};

// Makes the graph's nodes one leaf at a time, keeping every key slot's
// current version between them; the nodes and their edges go to the
// graph's arrays.
class NodeBuilder {
 public:
  NodeBuilder(const OpTree& tree, const KeyTable& keys, std::vector<KeySlot>* reused,
              std::vector<FlowNode>& nodes, std::vector<FlowEdge>& edges)
      : tree_(tree),
        trace_(tree.trace()),
        keys_(keys),
        pre_(tree.preorder()),
        reused_(reused),
        nodes_(nodes),
        edges_(edges),
        active_(keys.size(), -1),
        position_(keys.size(), kNone32) {}

  // Adds the node of one leaf, whose subtree is pre-order [first, last).
  Status AddNode(uint32_t leaf, uint32_t first, uint32_t last) {
    for (const auto& p : pending_) position_[p.edge.key()] = kNone32;
    pending_.clear();
    NoteInputs(first, last);
    if (Status s = NoteFrees(leaf, first, last); !s.ok()) return s;
    NoteAllocations(first, last);
    // Slot order is TensorKey order.
    std::sort(pending_.begin(), pending_.end(),
              [](const Pending& a, const Pending& b) { return a.edge.slot < b.edge.slot; });
    return Emit(leaf);
  }

  // What only the build read goes before validation adds its own array.
  void FreeScratch() {
    position_.clear();
    FreeArray(pending_);
  }

  // Every key slot's last version (-1: no node mentions the key).
  PerKey<int32_t>& active() { return active_; }

 private:
  // The current version of a key slot (PyTorch's _active_version); -1
  // until a node mentions the key.
  int32_t Lookup(KeySlot k) {
    if (active_[k] < 0) active_[k] = 0;
    return active_[k];
  }

  // A node's edges, with each key's position among them (kNone32: absent).
  Pending& Slot(KeySlot k) {
    if (position_[k] != kNone32) return pending_[position_[k]];
    position_[k] = static_cast<uint32_t>(pending_.size());
    pending_.emplace_back();
    pending_.back().edge.slot = k.value();
    return pending_.back();
  }

  // Inputs of every op in the subtree, with how each may be written.
  void NoteInputs(uint32_t first, uint32_t last) {
    for (uint32_t p = first; p < last; ++p) {
      const uint32_t e = pre_[p];
      const Event& ev = trace_.events[e];
      if (ev.kind != EventKind::kOp) continue;
      const ArgList args = trace_.ArgsOf(ev.payload);
      const auto [mut, mut_count] = tree_.mutability(e);
      const size_t n = std::min<size_t>(mut_count, args.size());
      auto note = [&](uint32_t tensor, int8_t m) {
        const KeySlot key = keys_.SlotOfTensor(tensor);
        if (!key.valid()) return;
        Pending& s = Slot(key);
        if (m == 1) s.has_true = true;
        if (m == 0) s.has_false = true;
        if (m == -1) s.has_none = true;
      };
      size_t i = 0;  // the argument's position
      for (auto it = args.begin(); i < n; ++it, ++i) {
        const Arg arg = *it;
        if (arg.kind == ArgKind::kTensor) note(arg.begin, mut[i]);
        if (arg.kind == ArgKind::kTensorList) {
          for (uint32_t k = 0; k < arg.count; ++k) note(trace_.list_items[arg.begin + k], mut[i]);
        }
      }
    }
    for (auto& s : pending_) {
      s.edge.input_version = Lookup(s.edge.key());
      // Written if any matching overload writes it, or if it was only ever
      // seen where no overload matched.
      s.edge.mutated = (s.has_true || (s.has_none && !s.has_false)) ? 1 : 0;
    }
  }

  // Frees: deleting a tensor reads its current version.
  Status NoteFrees(uint32_t leaf, uint32_t first, uint32_t last) {
    for (uint32_t p = first; p < last; ++p) {
      const Event& ev = trace_.events[pre_[p]];
      if (ev.kind != EventKind::kAlloc || trace_.allocs[ev.payload].bytes >= 0) continue;
      const KeySlot key = keys_.SlotOfAlloc(ev.payload);
      if (!key.valid()) continue;
      Pending& s = Slot(key);
      if (s.edge.mutated == -1) {
        return Status::Error("double free of T" + std::to_string(keys_[key].id.value()) +
                             " inside " + Describe(trace_, leaf));
      }
      s.edge.mutated = -1;
      s.edge.input_version = Lookup(key);
    }
    return Status();
  }

  // Allocations last: they override the input edges added before them.
  void NoteAllocations(uint32_t first, uint32_t last) {
    for (uint32_t p = first; p < last; ++p) {
      const Event& ev = trace_.events[pre_[p]];
      if (ev.kind != EventKind::kAlloc || trace_.allocs[ev.payload].bytes <= 0) continue;
      const KeySlot key = keys_.SlotOfAlloc(ev.payload);
      if (!key.valid()) continue;
      Slot(key).edge.input_version = FlowEdge::kAllocated;
    }
  }

  // The node with its sorted edges; the versions they write become current.
  Status Emit(uint32_t leaf) {
    FlowNode node;
    node.event = leaf;
    node.edges_begin = static_cast<uint32_t>(edges_.size());
    for (const auto& s : pending_) {
      if (s.edge.mutated == 1 && !s.edge.is_allocation()) ++active_[s.edge.key()];
      edges_.push_back(s.edge);
    }
    for (const auto& s : pending_) {
      if (!s.edge.is_output()) continue;
      if (s.edge.output_version() > Version(kMaxVersion)) {
        return Status::Error("at " + Describe(trace_, leaf) + ": " +
                             KeyText(keys_, s.edge.key(), s.edge.output_version()) +
                             " is past the most versions of one tensor memtl keeps (2^28-1)");
      }
      const int32_t now = Lookup(s.edge.key());
      if (reused_ != nullptr && s.edge.is_allocation() && now > 0) {
        reused_->push_back(s.edge.key());
        active_[s.edge.key()] = 0;  // on, to find the others
        continue;
      }
      if (Version(now) != s.edge.output_version()) {
        return Status::Error("data-flow invariant broken at " + Describe(trace_, leaf) +
                             ": it creates " +
                             KeyText(keys_, s.edge.key(), s.edge.output_version()) +
                             " but the tensor is at v" + std::to_string(now));
      }
    }
    nodes_.push_back(node);
    return Status();
  }

  const OpTree& tree_;
  const Trace& trace_;
  const KeyTable& keys_;
  const EventOrder pre_;
  std::vector<KeySlot>* reused_;
  std::vector<FlowNode>& nodes_;
  std::vector<FlowEdge>& edges_;
  PerKey<int32_t> active_;
  std::vector<Pending> pending_;
  PerKey<uint32_t> position_;
};

// The graph's nodes are the leaves in start-time order. Pre-order nearly
// always is that order already: then the leaves are visited as they are
// found, with no array of them (4 bytes a node); otherwise they are
// collected and stably sorted, as PyTorch sorts them.
Status AddLeavesInStartOrder(const OpTree& tree, NodeBuilder& builder, std::vector<FlowNode>& nodes,
                             std::vector<FlowEdge>& edges) {
  const Trace& trace = tree.trace();
  auto by_start = [&](uint32_t a, uint32_t b) { return trace.event_t0[a] < trace.event_t0[b]; };
  uint32_t num_leaves = 0;
  bool in_start_order = true;
  uint32_t prev = kNone32;
  ForEachLeaf(tree, [&](uint32_t e, uint32_t, uint32_t) {
    if (prev != kNone32 && by_start(e, prev)) in_start_order = false;
    prev = e;
    ++num_leaves;
  });
  nodes.reserve(num_leaves);
  // An upper bound (every tensor argument and allocation event an edge): the
  // untouched part is address space only, and the array is never regrown.
  edges.reserve(trace.arg_kinds.size() + trace.list_items.size() + trace.allocs.size());
  Status built;
  if (in_start_order) {
    ForEachLeaf(tree, [&](uint32_t e, uint32_t first, uint32_t last) {
      if (built.ok()) built = builder.AddNode(e, first, last);
    });
    return built;
  }
  std::vector<uint32_t> leaves;
  leaves.reserve(num_leaves);
  ForEachLeaf(tree, [&](uint32_t e, uint32_t, uint32_t) { leaves.push_back(e); });
  std::stable_sort(leaves.begin(), leaves.end(), by_start);
  for (uint32_t leaf : leaves) {
    const uint32_t first = tree.position(leaf);
    built = builder.AddNode(leaf, first, tree.subtree_end(first));
    if (!built.ok()) break;
  }
  return built;
}

// Validation, as PyTorch's DataFlowGraph.validate: each (tensor, version)
// is created once, inputs read the latest version, versions never go
// back. Versions of a key are created in increasing order, so the latest
// version per key checks all three (no set of every pair).
Status Validate(const DataFlowGraph& g, const Trace& trace, const KeyTable& keys) {
  PerKey<int32_t> latest(keys.size(), -1);
  for (const auto& node : g.nodes()) {
    for (const FlowEdge* e = g.begin(node); e != g.end(node); ++e) {
      if (!e->is_input()) continue;
      const int32_t expected = std::max(latest[e->key()], 0);
      if (expected != e->input_version) {
        return Status::Error("data-flow invariant broken at " + Describe(trace, node.event) +
                             ": it reads " + KeyText(keys, e->key(), e->input()) +
                             " but the latest version is v" + std::to_string(expected));
      }
    }
    for (const FlowEdge* e = g.begin(node); e != g.end(node); ++e) {
      if (!e->is_output()) continue;
      int32_t& v = latest[e->key()];
      if (v >= 0 && e->output_version() <= Version(v)) {
        return Status::Error("data-flow invariant broken at " + Describe(trace, node.event) + ": " +
                             KeyText(keys, e->key(), e->output_version()) +
                             (e->output_version() == Version(v)
                                  ? " is created twice"
                                  : " comes after v" + std::to_string(v)));
      }
      v = e->output_version().value();
    }
  }
  return Status();
}

// Numbers every (key, version): versions 0..max(last, 0) of each slot.
Expected<std::vector<uint32_t>> NumberValues(const KeyTable& keys,
                                             const PerKey<int32_t>& last_version) {
  const uint32_t num_keys = keys.size();
  std::vector<uint32_t> value_begin(static_cast<size_t>(num_keys) + 1);
  uint64_t values = 0;
  for (const KeySlot k : keys.slots()) {
    value_begin[k.value()] = static_cast<uint32_t>(values);
    values += static_cast<uint64_t>(std::max(last_version[k], 0)) + 1;
    if (values > 0xfffffff0u) return Status::Error("more than 2^32 tensor versions");
  }
  value_begin[num_keys] = static_cast<uint32_t>(values);
  return value_begin;
}

}  // namespace

Expected<DataFlowGraph> DataFlowGraph::Build(const OpTree& tree, const KeyTable& keys,
                                             std::vector<KeySlot>* reused) {
  DataFlowGraph g;
  NodeBuilder builder(tree, keys, reused, g.nodes_, g.edges_);
  if (Status built = AddLeavesInStartOrder(tree, builder, g.nodes_, g.edges_); !built.ok()) {
    return built;
  }
  if (reused != nullptr && !reused->empty()) {
    std::sort(reused->begin(), reused->end());
    reused->erase(std::unique(reused->begin(), reused->end()), reused->end());
    return Status::Error(std::to_string(reused->size()) +
                         " storages allocated again while live by the trace's records");
  }
  builder.FreeScratch();
  if (Status valid = Validate(g, tree.trace(), keys); !valid.ok()) return valid;
  auto value_begin = NumberValues(keys, builder.active());
  if (!value_begin.ok()) return value_begin.status();
  g.value_begin_ = std::move(value_begin.value());
  g.last_version_ = std::move(builder.active());
  return g;
}

namespace {

size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

void PadTo(std::string& out, const std::string& s, size_t width) {
  out += s;
  for (size_t n = CodePoints(s); n < width; ++n) out += ' ';
}

}  // namespace

std::string FormatDataFlow(const Trace& trace, const KeyTable& keys, const DataFlowGraph& graph) {
  std::string out;
  for (const auto& node : graph.nodes()) {
    std::string inputs, outputs;
    for (const FlowEdge* e = graph.begin(node); e != graph.end(node); ++e) {
      if (e->is_input()) {
        if (!inputs.empty()) inputs += ", ";
        inputs += "T" + std::to_string(keys[e->key()].id.value()) + "(v" +
                  std::to_string(e->input_version) + (e->is_deletion() ? "*" : "") + ")";
      }
      if (e->is_output()) {
        if (!outputs.empty()) outputs += ", ";
        outputs += KeyText(keys, e->key(), e->output_version());
      }
    }
    if (inputs.empty() && outputs.empty()) continue;
    std::string name = trace.Name(trace.events[node.event]);
    static const std::string kPrefix = "torch::autograd::";
    for (size_t p; (p = name.find(kPrefix)) != std::string::npos;) name.erase(p, kPrefix.size());
    std::string line;
    PadTo(line, name, 25);
    line += ' ';
    PadTo(line, inputs, 15);
    line += "  ->  " + outputs;
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace memtl

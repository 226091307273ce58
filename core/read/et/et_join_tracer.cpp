// The python tracer's module and optimizer records, rebuilt from the two
// files (et_join_impl.h, Join::TracerRecords): where the Kineto trace was
// recorded with the python tracer, PyTorch's memory profiler reads the
// parameters of every module call and the parameters and state of every
// optimizer step from it, which neither file holds; the ops of the
// execution trace show which tensors they were.
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/read/et/et_join_impl.h"
#include "core/schema/schema.h"

namespace memtl::et_join_detail {

namespace {

// A schema argument that takes a module's parameter: `weight`, `bias` and
// the fused layers' `qkv_weight`, `proj_bias`, `in_proj_weight`...
bool ParameterArgument(std::string_view name) {
  return name == "weight" || name == "bias" || name.ends_with("_weight") || name.ends_with("_bias");
}

// A storage id in one lifetime of its address (Join::BlockAt).
struct BlockKey {
  uint64_t storage = 0;
  uint32_t lifetime = 0;
  bool operator==(const BlockKey&) const = default;
};
struct BlockHash {
  size_t operator()(const BlockKey& k) const {
    return std::hash<uint64_t>()(k.storage * 0x9E3779B97F4A7C15ull ^ k.lifetime);
  }
};

struct PairHash {
  size_t operator()(const std::pair<uint64_t, uint32_t>& p) const {
    return std::hash<uint64_t>()(p.first * 0x9E3779B97F4A7C15ull ^ p.second);
  }
};

// "nn.Module: Linear_0" -> "Linear".
std::string ModuleClass(std::string_view call) {
  call.remove_prefix(std::string_view("nn.Module: ").size());
  if (const size_t under = call.rfind('_'); under != std::string_view::npos)
    call = call.substr(0, under);
  return std::string(call);
}

}  // namespace

// What TracerRecords reads from the joined ops.
struct TracerEvidence {
  // The innermost optimizer step (its Optimizer.step# annotation) and
  // module call around each event, and the _optimizer_step_code calls
  // inside a step, where the tracer reads the optimizer.
  std::vector<uint32_t> step_of, module_of, step_code;
  // Each storage block's tensor (the first seen), whether ops inside
  // optimizer steps and outside them touch it, and whether one outside
  // writes it (an argument its schema marks written, Tensor(a!):
  // AccumulateGrad's add_, zero_grad's zero_). A block: a storage id in
  // one lifetime of its address, since the execution trace names data
  // pointers, and a step's state can take the address of a tensor that
  // the forward freed (e2e_adam: a step counter at the gradient seed's).
  struct Touch {
    uint32_t tensor = kNone32;
    // The last step that listed it in in_step. A step's events are one run
    // of the pre-order, so a block is listed once per step, unless a step
    // nested in it (ZeroRedundancyOptimizer's inner optimizer) splits the
    // run: a repeat in a record names the same tensor again, which changes
    // no category.
    uint32_t last_step = kNone32;
    bool outside = false, written_outside = false;
  };
  std::unordered_map<BlockKey, Touch, BlockHash> touch;
  // The blocks each step touches, in order.
  std::unordered_map<uint32_t, std::vector<BlockKey>> in_step;
  // Each module call's parameters: (argument name, tensor).
  std::unordered_map<uint32_t, std::vector<std::pair<std::string, uint32_t>>> params_of;
  bool has_modules = false;
};

void Join::TracerRecords() {
  TracerEvidence evidence;
  TracerScopes(evidence);
  if (evidence.step_code.empty() && !evidence.has_modules) return;
  TracerTouches(evidence);
  ModuleRecords(evidence);
  OptimizerRecords(evidence);
}

void Join::TracerScopes(TracerEvidence& evidence) const {
  const size_t n = t_.events.size();
  evidence.step_of.assign(n, kNone32);
  evidence.module_of.assign(n, kNone32);
  for (uint32_t e = 0; e < n; ++e) {
    const Event& ev = t_.events[e];
    if (ev.parent != kNone32 && ev.parent < e) {  // a parent comes before its children
      evidence.step_of[e] = evidence.step_of[ev.parent];
      evidence.module_of[e] = evidence.module_of[ev.parent];
    }
    if (ev.kind == EventKind::kOp &&
        t_.strings.Get(t_.ops[ev.payload].name).starts_with("Optimizer.step#")) {
      evidence.step_of[e] = e;
    } else if (ev.kind == EventKind::kPy) {
      const std::string& name = t_.Name(ev);
      if (name.starts_with("nn.Module: ")) {
        evidence.module_of[e] = e;
        evidence.has_modules = true;
      }
      if (name.ends_with(": _optimizer_step_code") && evidence.step_of[e] != kNone32)
        evidence.step_code.push_back(e);
    }
  }
}

void Join::TracerTouches(TracerEvidence& evidence) const {
  struct Argument {
    std::string name;
    bool written = false;
  };
  std::unordered_map<uint32_t, std::vector<Argument>> arguments_of;  // by schema string
  std::unordered_set<std::pair<uint64_t, uint32_t>, PairHash> in_module;
  for (uint32_t e = 0; e < t_.events.size(); ++e) {
    const Event& ev = t_.events[e];
    if (ev.kind != EventKind::kOp || node_of_op_[ev.payload] == kNone32) continue;
    const EtNode& node = et_.nodes[node_of_op_[ev.payload]];
    const uint32_t step = evidence.step_of[e];
    auto arguments = arguments_of.find(node.schema);
    if (arguments == arguments_of.end()) {
      std::vector<Argument> list;
      if (node.schema != 0)
        if (auto parsed = ParseSchema(et_.strings.Get(node.schema)); parsed.ok())
          for (const SchemaArgument& a : parsed.value().arguments)
            list.push_back({a.name, a.is_write});
      arguments = arguments_of.emplace(node.schema, std::move(list)).first;
    }
    const std::vector<Argument>& args = arguments->second;
    // An output is allocated inside the op: its block is the one at the
    // op's last event.
    auto visit = [&](uint32_t index, bool written, bool output) {
      const EtTensor& tensor = et_.tensors[index];
      if (!HasData(tensor)) return;
      const BlockKey block{tensor.storage_id, BlockAt(tensor, output ? end_[e] - 1 : e)};
      if (block.lifetime == kNone32) return;
      TracerEvidence::Touch& t = evidence.touch[block];
      if (t.tensor == kNone32) t.tensor = index;
      if (step == kNone32) {
        t.outside = true;
        t.written_outside |= written;
      } else {
        if (t.last_step != step) evidence.in_step[step].push_back(block);
        t.last_step = step;
      }
    };
    read::ForEachTensor(
        et_, node,
        [&](uint32_t index, uint32_t i) {
          visit(index, i < args.size() && args[i].written, false);
        },
        [&](uint32_t index) { visit(index, false, true); });
    // A module's parameters: tensors that no op of the profile creates,
    // that an op inside the call takes at a weight or bias argument.
    const uint32_t module = evidence.module_of[e];
    if (module == kNone32) continue;
    for (uint32_t i = 0; i < node.args_count && i < args.size(); ++i) {
      const EtArg& arg = et_.args[node.args_begin + i];
      if (arg.kind != EtArgKind::kTensor || !ParameterArgument(args[i].name)) continue;
      const EtTensor& tensor = et_.tensors[arg.begin];
      if (!HasData(tensor) || creations_.contains(tensor.storage_id)) continue;
      if (in_module.insert({tensor.storage_id, module}).second)
        evidence.params_of[module].emplace_back(args[i].name, arg.begin);
    }
  }
}

void Join::ModuleRecords(const TracerEvidence& evidence) {
  for (const auto& [module, params] : evidence.params_of) {
    TracerRecord& record = py_records_[module];
    record.cls = ModuleClass(t_.Name(t_.events[module]));
    record.module_params = params;
  }
}

void Join::OptimizerRecords(const TracerEvidence& evidence) {
  for (const uint32_t call : evidence.step_code) {
    TracerRecord record;
    record.optimizer = true;
    const auto blocks = evidence.in_step.find(evidence.step_of[call]);
    if (blocks == evidence.in_step.end()) continue;
    for (const BlockKey& block : blocks->second) {
      const TracerEvidence::Touch& t = evidence.touch.at(block);
      if (t.outside) {
        if (t.written_outside || addr_of_.contains(block.storage)) continue;
        record.params.push_back(t.tensor);
      } else if (BlockAt(et_.tensors[t.tensor], call) == block.lifetime) {
        record.state.push_back(t.tensor);
      } else {
        continue;
      }
      // The optimizer object, which the files do not name: one optimizer's
      // steps touch the same parameters, another's others, so the first
      // storage listed stands for it (identity reads each optimizer's first
      // call, as PyTorch's does, by this).
      if (record.self == 0) record.self = kSyntheticStorage | block.storage;
    }
    py_records_[call] = std::move(record);
  }
}

uint32_t Join::BlockAt(const EtTensor& tensor, uint32_t e) const {
  const auto addr = addr_of_.find(tensor.storage_id);
  if (addr == addr_of_.end()) return 0;  // from before the profile: one block
  const std::string& name = et_.strings.Get(tensor.device);
  for (size_t d = 0; d < t_.devices.size(); ++d) {
    if (t_.devices[d].name != (name.empty() ? "cpu" : name)) continue;
    const auto lifetimes = lifetimes_.find(AddrKey{addr->second, static_cast<DeviceIndex>(d)});
    if (lifetimes == lifetimes_.end()) return kNone32;
    const size_t at = LifetimeAt(time_pos_[e], lifetimes->second);
    return at == lifetimes->second.size() ? kNone32 : static_cast<uint32_t>(at);
  }
  return kNone32;
}

}  // namespace memtl::et_join_detail

// The split of the memory from before the profile (kineto_pre_profile.h).
#include "core/read/kineto/kineto_pre_profile.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "core/model/checked.h"

namespace memtl::read {

namespace {

constexpr std::string_view kStep = "Optimizer.step#";
constexpr std::string_view kZeroGrad = "Optimizer.zero_grad#";
constexpr std::string_view kProfilerStep = "ProfilerStep#";
constexpr std::string_view kEvaluate = "autograd::engine::evaluate_function: ";
constexpr std::string_view kAccumulate = "torch::autograd::AccumulateGrad";

std::string_view NameOf(const KinetoEvent& e, const StringTable& strings) {
  return e.ref < strings.size() ? std::string_view(strings.Get(e.ref)) : std::string_view();
}

// The leaves' bytes of the backward pass with the most: passes are the
// AccumulateGrad ops between two cuts (an optimizer step, zero_grad or a
// profiler step starting), in time order.
int64_t LeavesOfOnePass(const KinetoParser& p, const StringTable& strings) {
  std::vector<std::pair<int64_t, int64_t>> marks;  // (time, bytes; -1: a cut)
  marks.reserve(p.leaves.size());
  for (const KinetoParser::Leaf& leaf : p.leaves)
    marks.emplace_back(p.events[leaf.event].ts, leaf.bytes);
  for (const KinetoEvent& e : p.events) {
    if (e.kind != KinetoKind::kAnnotation) continue;
    const std::string_view name = NameOf(e, strings);
    if (name.starts_with(kStep) || name.starts_with(kZeroGrad) || name.starts_with(kProfilerStep))
      marks.emplace_back(e.ts, -1);
  }
  std::stable_sort(marks.begin(), marks.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  int64_t pass = 0, most = 0;
  for (const auto& [time, bytes] : marks) {
    pass = bytes < 0 ? 0 : CheckedAdd<int64_t>(pass, bytes).value_or(kMaxAllocBytes);
    most = std::max(most, pass);
  }
  return most;
}

// What one optimizer step shows of its class's state.
struct Step {
  std::string_view cls;  // "Adam" of "Optimizer.step#Adam.step"
  bool maximum = false;  // an op of it takes a maximum (Adam's amsgrad)
  bool mul = false;      // an op of it scales a tensor in place (SGD's momentum)
};

// Tensors of a parameter's size the optimizer keeps per parameter, as
// torch.optim's classes keep their state; -1: not known.
int StatePerLeaf(const Step& s) {
  if (s.cls == "SGD") return s.mul ? 1 : 0;
  if (s.cls == "Adam" || s.cls == "AdamW") return s.maximum ? 3 : 2;
  if (s.cls == "Adamax" || s.cls == "RAdam" || s.cls == "NAdam" || s.cls == "Adadelta") return 2;
  if (s.cls == "Adagrad") return 1;
  return -1;
}

// What one walk of the nesting finds: per device, the bytes allocated
// inside AccumulateGrad ops and inside backward functions, and the steps.
struct Walk {
  std::vector<int64_t> in_accumulate, in_backward;
  std::vector<Step> steps;
};

Walk WalkNesting(const KinetoParser& p, const StringTable& strings, const Nesting& n,
                 size_t num_devices) {
  Walk w;
  w.in_accumulate.assign(num_devices, 0);
  w.in_backward.assign(num_devices, 0);
  // Per position, in 4 bytes (a trace holds up to 2^30 events): the low two
  // bits 2 inside an AccumulateGrad op, 1 inside a backward function, else
  // 0; above them, one more than the step it is inside (0: none).
  std::vector<uint32_t> around(n.order.size(), 0);
  for (uint32_t pos = 0; pos < n.order.size(); ++pos) {
    const KinetoEvent& e = p.events[n.order[pos]];
    const uint32_t parent = n.parent[pos];
    const uint32_t inherited = parent != kNone32 ? around[parent] : 0;
    uint32_t where = inherited & 3;
    uint32_t step = (inherited >> 2) - 1;  // kNone32 when none
    auto keep = [&] { around[pos] = where | ((step + 1) << 2); };
    if (e.kind == KinetoKind::kMemory) {
      const KinetoMemory& m = p.memory[e.ref];
      if (m.bytes > 0 && m.device < num_devices && where > 0)
        (where == 2 ? w.in_accumulate : w.in_backward)[m.device] += m.bytes;
      continue;
    }
    if (e.kind == KinetoKind::kPython) {
      keep();
      continue;
    }
    const std::string_view name = NameOf(e, strings);
    if (name == kAccumulate) {
      where = 2;
    } else if (name.starts_with(kEvaluate)) {
      where = std::max<uint32_t>(where, 1);
    } else if (e.kind == KinetoKind::kAnnotation && name.starts_with(kStep)) {
      std::string_view cls = name.substr(kStep.size());
      cls = cls.substr(0, cls.rfind(".step"));
      step = static_cast<uint32_t>(w.steps.size());
      w.steps.push_back({cls});
    } else if (step != kNone32 && e.kind == KinetoKind::kOp) {
      Step& s = w.steps[step];
      s.maximum |= name.find("maximum") != std::string_view::npos;
      s.mul |= name == "aten::mul_" || name == "aten::_foreach_mul_";
    }
    keep();
  }
  return w;
}

// The device with the most bytes in `bytes`; -1 when none has any.
int Busiest(const std::vector<int64_t>& bytes) {
  int best = -1;
  for (size_t d = 0; d < bytes.size(); ++d)
    if (bytes[d] > 0 && (best < 0 || bytes[d] > bytes[static_cast<size_t>(best)]))
      best = static_cast<int>(d);
  return best;
}

}  // namespace

PreProfileSplit SplitPreProfile(const KinetoParser& p, const StringTable& strings, const Nesting& n,
                                const std::vector<int64_t>& unseen) {
  PreProfileSplit split;
  split.leaves.assign(unseen.size(), 0);
  split.state.assign(unseen.size(), 0);
  if (p.leaves.empty()) return split;
  const int64_t leaves = LeavesOfOnePass(p, strings);
  const Walk w = WalkNesting(p, strings, n, unseen.size());
  int device = Busiest(w.in_accumulate);
  if (device < 0) device = Busiest(w.in_backward);
  if (device < 0) return split;
  const auto d = static_cast<size_t>(device);
  if (unseen[d] <= 0) return split;
  split.leaves[d] = std::min(leaves, unseen[d]);
  // A class's steps differ only where a first step makes what later ones
  // update (SGD's momentum buffer): their ops together show its state.
  Step all = w.steps.empty() ? Step{} : w.steps.front();
  bool one_class = !w.steps.empty();
  for (const Step& s : w.steps) {
    one_class &= s.cls == all.cls;
    all.maximum |= s.maximum;
    all.mul |= s.mul;
  }
  const int per_leaf = one_class ? StatePerLeaf(all) : -1;
  if (per_leaf > 0) {
    const int64_t state = CheckedMul<int64_t>(leaves, per_leaf).value_or(kMaxAllocBytes);
    split.state[d] = std::min(state, unseen[d] - split.leaves[d]);
  }
  return split;
}

}  // namespace memtl::read

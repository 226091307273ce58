// Modules and phases from the event tree (context.h).
#include "core/explain/context.h"

#include <algorithm>
#include <cstdio>
#include <iterator>

namespace memtl {

namespace {

// "nn.Module: Linear_1" -> "Linear_1"; empty for any other event.
std::string_view ModuleName(const Trace& trace, uint32_t event) {
  const Event& e = trace.events[event];
  if (e.kind != EventKind::kPy) return {};
  constexpr std::string_view kPrefix = "nn.Module: ";
  const std::string& name = trace.Name(e);
  if (name.compare(0, kPrefix.size(), kPrefix) != 0) return {};
  return std::string_view(name).substr(kPrefix.size());
}

}  // namespace

namespace {

// The file of a python call "FILE(LINE): FUNC", or empty.
std::string_view FrameFile(std::string_view name) {
  const auto paren = name.find('(');
  if (name.empty() || name[0] == '<' || paren == std::string_view::npos || paren == 0) return {};
  if (name.find("): ", paren) == std::string_view::npos) return {};
  return name.substr(0, paren);
}

}  // namespace

std::string ModulePath(const Trace& trace, uint32_t event) {
  std::vector<std::string_view> modules;
  for (uint32_t p = event; p != kNone32; p = trace.events[p].parent) {
    if (const auto m = ModuleName(trace, p); !m.empty()) modules.push_back(m);
  }
  std::string path;
  for (auto it = modules.rbegin(); it != modules.rend(); ++it)
    path += (path.empty() ? "" : " > ") + std::string(*it);
  return path;
}

std::string CallSiteLabel(std::string_view frame, uint32_t line, bool at_line) {
  const std::string_view file = FrameFile(frame);
  if (file.empty()) return std::string(frame);
  const size_t close = frame.find("): ", file.size());
  const std::string_view defined = frame.substr(file.size() + 1, close - file.size() - 1);
  const std::string_view function = frame.substr(close + 3);
  std::string out(file);
  if (line == 0 && at_line) {
    out += ":";
    out += defined;
    out += " in ";
    out += function;
    out += "()";
  } else if (line != 0) {
    out += ":" + std::to_string(line) + " in ";
    out += function;
    out += "()";
  } else {
    out += ": ";
    out += function;
    out += "(), defined at line ";
    out += defined;
  }
  return out;
}

bool IsGeneratedFrame(std::string_view name) {
  return FrameFile(name).find("torchinductor_") != std::string_view::npos;
}

bool IsUserFrame(std::string_view name) {
  const std::string_view file = FrameFile(name);
  if (file.empty() || file.find("torchinductor_") != std::string_view::npos) return false;
  return !file.starts_with("torch/") && file.find("/torch/") == std::string_view::npos;
}

StepStarts ProfilerSteps(const Trace& trace) {
  constexpr std::string_view kStep = "ProfilerStep#";
  // Per string id, whether it names a step: one test per name, not per op.
  std::vector<bool> is_step(trace.strings.size());
  for (uint32_t i = 0; i < trace.strings.size(); ++i)
    is_step[i] = trace.strings.Get(i).starts_with(kStep);
  StepStarts steps;
  for (uint32_t e = 0; e < trace.events.size(); ++e) {
    const Event& ev = trace.events[e];
    if (ev.kind != EventKind::kOp || !is_step[trace.ops[ev.payload].name]) continue;
    steps.emplace_back(trace.event_t0[e], trace.strings.Get(trace.ops[ev.payload].name));
  }
  std::stable_sort(steps.begin(), steps.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  return steps;
}

std::string StepAt(const StepStarts& steps, int64_t t_ns) {
  const auto it = std::upper_bound(steps.begin(), steps.end(), t_ns,
                                   [](int64_t x, const auto& s) { return x < s.first; });
  return it == steps.begin() ? std::string() : std::prev(it)->second;
}

// The optimizer phase is an enclosing python call into torch/optim/ (the
// step, its state's set-up, zero_grad): PyTorch's own markers do not nest
// over the step's ops (the "Optimizer.step#Adam.step" record_function is
// their sibling in the event tree, and the python tracer's optimizer call
// is an empty marker).
std::string_view ShapeOf(const ExplainInput& in, KeySlot key) {
  if (in.key_shapes == nullptr || !key.valid() || key.value() >= in.key_shapes->size()) return {};
  const uint32_t shape = (*in.key_shapes)[key.value()];
  return shape == kNone32 ? std::string_view() : std::string_view(in.trace.shapes.Get(shape));
}

EventContext ContextOf(const Trace& trace, const OpTree& tree, uint32_t event) {
  if (event == kNone32) return {"", "other", ""};
  constexpr std::string_view kOptim = "torch/optim/";
  bool optimizer = false;
  std::string_view call_site;
  uint32_t line = 0;         // of the call the event is under, in the call site
  bool compiled = false;     // inside generated code below the call site
  uint32_t below = kNone32;  // the event on the path just below `p`
  for (uint32_t p = event; p != kNone32; below = p, p = trace.events[p].parent) {
    const Event& e = trace.events[p];
    if (e.kind != EventKind::kPy) continue;
    const std::string& name = trace.Name(e);
    if (name.find(kOptim) != std::string::npos) optimizer = true;
    if (call_site.empty() && IsGeneratedFrame(name)) compiled = true;
    if (call_site.empty() && IsUserFrame(name)) {
      call_site = name;
      if (below != kNone32 && trace.events[below].kind == EventKind::kPy)
        line = trace.PyLine(trace.events[below].payload);
    }
  }
  EventContext c;
  if (!call_site.empty())
    c.call_site = CallSiteLabel(call_site, line, trace.header.py_names_at_line);
  if (compiled) c.call_site += c.call_site.empty() ? "compiled region" : " (compiled region)";
  c.module = ModulePath(trace, event);
  c.phase = tree.in_backward(event) ? "backward"
            : optimizer             ? "optimizer"
            : !c.module.empty()     ? "forward"
                                    : "other";
  return c;
}

PerValue<uint32_t> CreatorOfValues(const DataFlowGraph& g) {
  PerValue<uint32_t> creator(g.num_values(), kNone32);
  for (const FlowNode& n : g.nodes()) {
    for (const FlowEdge* e = g.begin(n); e != g.end(n); ++e) {
      // An intermediate (allocated and freed inside the node) is made there too.
      if (e->is_output() || e->is_intermediate())
        creator[g.value(e->key(), e->output_version())] = n.event;
    }
  }
  return creator;
}

std::string MsAfter(int64_t ns, int64_t first) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", static_cast<double>(ns - first) / 1e6);
  return buf;
}

}  // namespace memtl

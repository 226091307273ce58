// Frames into event-tree levels (snapshot_frames.h).
#include "core/read/snapshot/snapshot_frames.h"

#include <string>
#include <string_view>

namespace memtl::read {

namespace {

bool IsPythonFile(std::string_view file) { return file.ends_with(".py"); }

// nn.Module.__call__'s own frames, which the python tracer shows as the
// module's call.
bool IsModuleCall(std::string_view file, std::string_view func) {
  return file.ends_with("torch/nn/modules/module.py") &&
         (func == "_call_impl" || func == "_wrapped_call_impl");
}

// "a/b/linear.py" -> "linear".
std::string_view Stem(std::string_view file) {
  const size_t slash = file.find_last_of("/\\");
  if (slash != std::string_view::npos) file.remove_prefix(slash + 1);
  const size_t dot = file.rfind('.');
  return dot == std::string_view::npos ? file : file.substr(0, dot);
}

// The class of an autograd function's apply frame:
// "torch::autograd::generated::MmBackward0::apply(...)" -> "MmBackward0";
// empty when the name is no such frame.
std::string_view AppliedFunction(std::string_view name) {
  if (name.find("torch::autograd::") == std::string_view::npos) return {};
  const size_t apply = name.find("::apply(");
  if (apply == std::string_view::npos) return {};
  const std::string_view cls = name.substr(0, apply);
  const size_t colon = cls.rfind("::");
  return colon == std::string_view::npos ? cls : cls.substr(colon + 2);
}

// "at::_ops::addmm::call(...)" -> "addmm"; empty for another name.
std::string_view AtenOp(std::string_view name) {
  constexpr std::string_view kOps = "at::_ops::";
  if (!name.starts_with(kOps)) return {};
  const std::string_view rest = name.substr(kOps.size());
  const size_t end = rest.find("::");
  if (end == std::string_view::npos || !rest.substr(end).starts_with("::call(")) return {};
  return rest.substr(0, end);
}

}  // namespace

uint32_t FrameStacks::Of(uint32_t frames) {
  if (!doc_.IsList(frames) || doc_.Items(frames).empty()) return 0;
  const auto [it, inserted] = by_value_.try_emplace(frames, 0);
  if (!inserted) return it->second;
  stacks_.push_back(Build(frames));
  it->second = static_cast<uint32_t>(stacks_.size() - 1);
  return it->second;
}

std::vector<StackLevel> FrameStacks::Build(uint32_t frames) {
  const std::span<const uint32_t> items = doc_.Items(frames);
  std::vector<StackLevel> levels;
  uint32_t caller_line = 0;  // the line of the last python frame, outermost first
  bool module_call = false;  // a module's __call__ frame is waiting for the frame it calls
  bool in_op = false;        // an aten op is open: the ops it calls are its own
  bool in_backward = false;  // an evaluate_function is waiting for the function it applies
  // Innermost first in the snapshot: walked from the end.
  for (size_t i = items.size(); i-- > 0;) {
    const uint32_t f = items[i];
    if (doc_.kind(f) != pickle::Kind::kDict) {
      ++bad_frames_;
      continue;
    }
    const std::string_view file = doc_.Str(doc_.Get(f, "filename"));
    const std::string_view func = doc_.Str(doc_.Get(f, "name"));
    const int64_t line = doc_.Int(doc_.Get(f, "line")).value_or(0);
    const auto line32 = static_cast<uint32_t>(line > 0 && line < (int64_t{1} << 31) ? line : 0);
    if (IsPythonFile(file)) {
      if (IsModuleCall(file, func)) {
        module_call = true;
        continue;
      }
      if (module_call) {
        module_call = false;
        std::string name = "nn.Module: ";
        name += Stem(file);
        name += '.';
        name += func;
        levels.push_back(
            {EventKind::kPy, RecordScope::kFunction, trace_.strings.Intern(name), caller_line});
      }
      std::string name(file);
      name += '(' + std::to_string(line32) + "): ";
      name += func;
      levels.push_back(
          {EventKind::kPy, RecordScope::kFunction, trace_.strings.Intern(name), caller_line});
      caller_line = line32;
      continue;
    }
    if (func.find("torch::autograd::Engine::evaluate_function") != std::string_view::npos) {
      in_backward = true;
      continue;
    }
    const std::string_view applied = AppliedFunction(func);
    if (in_backward && !applied.empty()) {
      in_backward = false;
      std::string wrapper = "autograd::engine::evaluate_function: ";
      wrapper += applied;
      levels.push_back({EventKind::kOp, RecordScope::kFunction, trace_.strings.Intern(wrapper), 0});
      levels.push_back(
          {EventKind::kOp, RecordScope::kBackwardFunction, trace_.strings.Intern(applied), 0});
      in_op = false;
      continue;
    }
    const std::string_view op = AtenOp(func);
    if (!op.empty() && !in_op) {
      in_op = true;
      levels.push_back({EventKind::kOp, RecordScope::kFunction,
                        trace_.strings.Intern("aten::" + std::string(op)), 0});
    }
  }
  // An evaluate_function whose function was not found is still backward.
  if (in_backward) {
    levels.push_back({EventKind::kOp, RecordScope::kBackwardFunction,
                      trace_.strings.Intern("autograd::engine::evaluate_function"), 0});
  }
  return levels;
}

}  // namespace memtl::read

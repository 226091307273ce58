#include "core/explain/folded.h"

#include <map>
#include <string_view>

namespace memtl {

namespace {

// A frame as the folded format takes it: ';' separates frames and a line
// ends at its newline, so neither may be in one.
void AppendFrame(std::string& stack, std::string_view frame) {
  if (!stack.empty()) stack += ';';
  for (const char c : frame) stack += c == ';' ? ',' : (c == '\n' || c == '\r') ? ' ' : c;
}

// A model's name ("layer1.0.conv1.weight grad", memtl.save's model=) as
// frames: its modules, then the tensor's name in its module.
void AppendQualname(std::string& stack, std::string_view name) {
  const size_t space = name.find(' ');
  std::string_view path = name.substr(0, space);
  for (size_t dot = path.find('.'); dot != std::string_view::npos; dot = path.find('.')) {
    AppendFrame(stack, path.substr(0, dot));
    path.remove_prefix(dot + 1);
  }
  AppendFrame(stack, std::string(path) +
                         std::string(space == std::string_view::npos ? "" : name.substr(space)));
}

// A tensor's name (names.h) as frames: "Sequential_0 > Linear_1 .weight
// grad" as the modules, then the tensor's name in its module (".weight
// grad"); a model's name by its dots.
void AppendPath(std::string& stack, std::string_view path) {
  static constexpr std::string_view kSep = " > ";
  if (path.find(kSep) == std::string_view::npos && path.find(" .") == std::string_view::npos) {
    AppendQualname(stack, path);
    return;
  }
  while (!path.empty()) {
    const size_t at = path.find(kSep);
    std::string_view module = path.substr(0, at);
    const size_t attribute = at == std::string_view::npos ? module.find(" .") : module.npos;
    AppendFrame(stack, module.substr(0, attribute));
    if (attribute != module.npos) AppendFrame(stack, module.substr(attribute + 1));
    if (at == std::string_view::npos) break;
    path.remove_prefix(at + kSep.size());
  }
}

}  // namespace

std::string FoldedPeak(const PeakReport& r) {
  std::map<std::string, int64_t> stacks;
  for (const LiveTensor& t : r.largest) {
    std::string stack;
    if (!t.name.empty()) {
      AppendPath(stack, t.name);
    } else if (t.creator == kNone32) {
      AppendFrame(stack, "(before the profile)");
    } else {
      AppendPath(stack, t.module);
      // Made outside any op: the event that made it names it ("[memory]").
      if (t.ops.empty()) AppendFrame(stack, t.creator_name);
      for (const std::string& op : t.ops) AppendFrame(stack, op);
    }
    AppendFrame(stack, CategoryLabel(t.category, r.inferred));
    stacks[stack] += t.bytes;
  }
  // A trace with tensors: what no tensor holds. (Without tensors the
  // allocations listed are all there is.)
  if (!r.inferred && r.untracked_bytes > 0)
    stacks["(no tensor identity);unknown"] += r.untracked_bytes;
  // A raw timeline has categories and no tensors: a line per category.
  if (r.largest.empty() && r.untracked_bytes == 0) {
    for (size_t i = 0; i < r.by_category.size(); ++i)
      if (r.by_category[i] > 0)
        stacks[ExportCategoryLabel(static_cast<int>(i), r.inferred)] += r.by_category[i];
  }
  std::string out;
  for (const auto& [stack, bytes] : stacks) {
    if (bytes <= 0) continue;
    out += stack;
    out += ' ';
    out += std::to_string(bytes);
    out += '\n';
  }
  return out;
}

}  // namespace memtl

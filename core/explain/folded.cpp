#include "core/explain/folded.h"

#include <array>
#include <map>
#include <string_view>
#include <utility>

namespace memtl {

namespace {

// A stack as it is built: its frames and its folded text, the key that sums
// equal stacks and orders the lines. The text skips frames while they are
// all empty (no separator before the first frame with text), and so do the
// frames, so that the two always agree.
struct StackBuilder {
  std::vector<std::string> frames;
  std::string text;

  // A frame as the folded format takes it: ';' separates frames and a line
  // ends at its newline, so neither may be in one.
  void Add(std::string_view frame) {
    if (text.empty()) {
      frames.clear();
    } else {
      text += ';';
    }
    std::string f;
    f.reserve(frame.size());
    for (const char c : frame) f += c == ';' ? ',' : (c == '\n' || c == '\r') ? ' ' : c;
    text += f;
    frames.push_back(std::move(f));
  }

  // A model's name ("layer1.0.conv1.weight grad", memtl.save's model=) as
  // frames: its modules, then the tensor's name in its module.
  void AddQualname(std::string_view name) {
    const size_t space = name.find(' ');
    std::string_view path = name.substr(0, space);
    for (size_t dot = path.find('.'); dot != std::string_view::npos; dot = path.find('.')) {
      Add(path.substr(0, dot));
      path.remove_prefix(dot + 1);
    }
    Add(std::string(path) + std::string(space == std::string_view::npos ? "" : name.substr(space)));
  }

  // A tensor's name (names.h) as frames: "Sequential_0 > Linear_1 .weight
  // grad" as the modules, then the tensor's name in its module (".weight
  // grad"); a model's name by its dots.
  void AddPath(std::string_view path) {
    static constexpr std::string_view kSep = " > ";
    if (path.find(kSep) == std::string_view::npos && path.find(" .") == std::string_view::npos) {
      AddQualname(path);
      return;
    }
    while (!path.empty()) {
      const size_t at = path.find(kSep);
      std::string_view module = path.substr(0, at);
      const size_t attribute = at == std::string_view::npos ? module.find(" .") : module.npos;
      Add(module.substr(0, attribute));
      if (attribute != module.npos) Add(module.substr(attribute + 1));
      if (at == std::string_view::npos) break;
      path.remove_prefix(at + kSep.size());
    }
  }
};

}  // namespace

std::vector<FoldedStack> FoldPeak(const PeakReport& r) {
  std::map<std::string, FoldedStack> stacks;
  auto add = [&](StackBuilder&& b, int category, int64_t bytes) {
    FoldedStack& s = stacks[b.text];
    if (s.frames.empty()) s.frames = std::move(b.frames);
    s.category = category;
    s.bytes += bytes;
  };
  std::array<int64_t, 8> listed{};
  for (const LiveTensor& t : r.largest) {
    listed[static_cast<size_t>(ExportIndex(t.category))] += t.bytes;
    StackBuilder b;
    if (!t.name.empty()) {
      b.AddPath(t.name);
    } else if (t.creator == kNone32) {
      b.Add("(before the profile)");
    } else {
      b.AddPath(t.module);
      // Made outside any op: the event that made it names it ("[memory]").
      if (t.ops.empty()) b.Add(t.creator_name);
      for (const std::string& op : t.ops) b.Add(op);
    }
    b.Add(CategoryLabel(t.category, r.inferred));
    add(std::move(b), ExportIndex(t.category), t.bytes);
  }
  // A trace with tensors: what no tensor holds. (Without tensors the
  // allocations listed are all there is.)
  if (!r.inferred && r.untracked_bytes > 0) {
    listed[kUnknownIndex] += r.untracked_bytes;
    StackBuilder b;
    b.Add("(no tensor identity)");
    b.Add(CategoryLabel(std::nullopt, false));
    add(std::move(b), kUnknownIndex, r.untracked_bytes);
  }
  // A report of the largest only: the others by category, what the peak's
  // categories hold beyond the listed (each live tensor's category is the
  // one the peak row counts it in).
  if (r.largest.size() < r.live_tensors) {
    const std::string frame = "(" + std::to_string(r.live_tensors - r.largest.size()) +
                              (r.inferred ? " smaller allocations)" : " smaller tensors)");
    for (size_t i = 0; i < r.by_category.size(); ++i) {
      if (r.by_category[i] - listed[i] <= 0) continue;
      StackBuilder b;
      b.Add(frame);
      b.Add(ExportCategoryLabel(static_cast<int>(i), r.inferred));
      add(std::move(b), static_cast<int>(i), r.by_category[i] - listed[i]);
    }
  }
  // A raw timeline has categories and no tensors: a line per category.
  if (r.live_tensors == 0 && r.untracked_bytes == 0) {
    for (size_t i = 0; i < r.by_category.size(); ++i) {
      if (r.by_category[i] <= 0) continue;
      StackBuilder b;
      b.Add(ExportCategoryLabel(static_cast<int>(i), r.inferred));
      add(std::move(b), static_cast<int>(i), r.by_category[i]);
    }
  }
  std::vector<FoldedStack> out;
  out.reserve(stacks.size());
  for (auto& [text, stack] : stacks) {
    if (stack.bytes > 0) out.push_back(std::move(stack));
  }
  return out;
}

std::string FormatFolded(const std::vector<FoldedStack>& stacks) {
  std::string out;
  for (const FoldedStack& s : stacks) {
    for (size_t i = 0; i < s.frames.size(); ++i) {
      if (i > 0) out += ';';
      out += s.frames[i];
    }
    out += ' ';
    out += std::to_string(s.bytes);
    out += '\n';
  }
  return out;
}

std::string FoldedPeak(const PeakReport& report) { return FormatFolded(FoldPeak(report)); }

}  // namespace memtl

// The flame graph's section and data (flame_html.h). The page draws it with
// flame.js from the data block, where every name is JSON text that flame.js
// sets as text, never as markup; the section itself holds no name.
#include "export/flame_html.h"

#include <algorithm>
#include <map>

#include "export/html_util.h"

namespace memtl::html {

std::string FlameSection(const DeviceReport& d, bool inferred) {
  std::string html =
      "<h2>Flame graph of the peak</h2>\n<p class=\"note\">Every byte alive at the peak (the "
      "stacks of <code>memtl peak --format folded</code>): ";
  // Only the categories at the peak: a raw timeline, or a report made
  // without the analysis.
  const bool categories_only = std::all_of(
      d.flame.begin(), d.flame.end(), [](const FoldedStack& s) { return s.frames.size() == 1; });
  html += categories_only ? "the trace names no tensors, so a frame per category"
                          : "the modules around the op that made each tensor, the ops around it, "
                            "then its category";
  html += inferred ? " (inferred, as everywhere in this report). " : ". ";
  html +=
      "Width is bytes; colour is the category (lighter above several: their largest). Hover a "
      "frame for its bytes, click it to zoom, click the top frame or Reset to zoom out.</p>\n"
      "<div class=\"flame\"><div class=\"flame-bar\"><button type=\"button\" "
      "class=\"flame-reset\" disabled>Reset zoom</button><div class=\"flame-info\"></div></div>"
      "<div class=\"flame-frames\"></div></div>\n<noscript><p class=\"missing\">The flame graph "
      "needs JavaScript; <code>memtl peak TRACE --format folded</code> writes its stacks."
      "</p></noscript>\n";
  return html;
}

std::string FlameJson(const DeviceReport& d) {
  std::map<std::string, size_t> index;
  std::string names, stacks;
  for (const FoldedStack& s : d.flame) {
    stacks += std::string(stacks.empty() ? "[" : ",[") + std::to_string(s.bytes) + "," +
              std::to_string(s.category) + ",[";
    for (size_t i = 0; i < s.frames.size(); ++i) {
      const auto [at, added] = index.try_emplace(s.frames[i], index.size());
      if (added) names += (names.empty() ? "" : ",") + JsonString(s.frames[i]);
      stacks += (i ? "," : "") + std::to_string(at->second);
    }
    stacks += "]]";
  }
  return "{\"names\":[" + names + "],\"stacks\":[" + stacks + "]}";
}

}  // namespace memtl::html

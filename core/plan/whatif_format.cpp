// memtl whatif's text and JSON (whatif.h).
#include <algorithm>
#include <cstdio>
#include <numeric>

#include "core/categories/category.h"
#include "core/explain/context.h"
#include "core/explain/peak.h"
#include "core/model/quote.h"
#include "core/plan/whatif.h"

namespace memtl {

namespace {

// A time from the first row, as explain prints one.
std::string Ms(int64_t us) { return MsAfter(us * 1000, 0); }

std::string Pad(std::string s, size_t width, bool right) {
  if (s.size() >= width) return s;
  return right ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}

// The categories whose bytes at the peak changed, the largest change first.
std::vector<int> Moved(const WhatIfDevice& d) {
  std::vector<int> order(8);
  std::iota(order.begin(), order.end(), 0);
  auto delta = [&](int c) { return std::abs(d.after.by_category[c] - d.before.by_category[c]); };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return delta(a) > delta(b); });
  order.erase(std::find_if(order.begin(), order.end(), [&](int c) { return delta(c) == 0; }),
              order.end());
  return order;
}

void CategoriesJson(std::string& out, const std::array<int64_t, 8>& v) {
  out += "{";
  for (int c = 0; c < 8; ++c) {
    out += (c == 0 ? "" : ", ") + JsonString(ExportCategoryName(c)) + ": " + std::to_string(v[c]);
  }
  out += "}";
}

}  // namespace

std::string FormatWhatIf(const WhatIfReport& r) {
  std::string out = "memtl whatif: " + TextCell(r.trace) + "\n";
  out += "changes:\n";
  for (const std::string& c : r.changes) out += "  " + TextCell(c) + "\n";
  if (r.devices.empty()) out += "no device has memory events\n";
  for (const WhatIfDevice& d : r.devices) {
    out += "\n" + TextCell(d.device) + ": peak " + HumanBytes(d.before.bytes) + " -> " +
           HumanBytes(d.after.bytes) + " (" + RelativeChange(d.before.bytes, d.after.bytes) + ", " +
           SignedBytes(d.after.bytes - d.before.bytes) + ")\n";
    out += "  measured  at " + Ms(d.before.since_start_us) + " (" + d.before.phase + ")\n";
    out += "  predicted at " + Ms(d.after.since_start_us) + " (" + d.after.phase + ")";
    out += d.rank_peaks.empty() ? "\n" : ", on the largest rank\n";
    out += "  " + Pad("category", 18, false) + Pad("measured", 13, true) +
           Pad("predicted", 13, true) + Pad("change", 13, true) + "\n";
    for (int c = 0; c < 8; ++c) {
      if (d.before.by_category[c] == 0 && d.after.by_category[c] == 0) continue;
      out += "  " + Pad(std::string(ExportCategoryName(c)), 18, false) +
             Pad(HumanBytes(d.before.by_category[c]), 13, true) +
             Pad(HumanBytes(d.after.by_category[c]), 13, true) +
             Pad(SignedBytes(d.after.by_category[c] - d.before.by_category[c]), 13, true) + "\n";
    }
    const std::vector<int> moved = Moved(d);
    if (!moved.empty()) {
      out += "  what moved it:";
      for (size_t i = 0; i < moved.size() && i < 3; ++i) {
        out += (i == 0 ? " " : ", ") + std::string(ExportCategoryName(moved[i])) + " " +
               SignedBytes(d.after.by_category[moved[i]] - d.before.by_category[moved[i]]);
      }
      out += "\n";
    }
    if (!d.rank_peaks.empty()) {
      out += "  per rank:";
      for (size_t i = 0; i < d.rank_peaks.size(); ++i)
        out += (i == 0 ? " " : ", ") + HumanBytes(d.rank_peaks[i]);
      out += "\n";
    }
  }
  if (!r.notes.empty()) {
    out += "\nnotes:\n";
    for (const std::string& n : r.notes) out += "  - " + TextCell(n) + "\n";
  }
  return out;
}

std::string WhatIfJson(const WhatIfReport& r) {
  std::string out = "{\"trace\": " + JsonString(r.trace) + ", \"changes\": [";
  for (size_t i = 0; i < r.changes.size(); ++i)
    out += (i == 0 ? "" : ", ") + JsonString(r.changes[i]);
  out += "], \"notes\": [";
  for (size_t i = 0; i < r.notes.size(); ++i) out += (i == 0 ? "" : ", ") + JsonString(r.notes[i]);
  out += "], \"devices\": [";
  for (size_t i = 0; i < r.devices.size(); ++i) {
    const WhatIfDevice& d = r.devices[i];
    out += (i == 0 ? "\n  {" : ",\n  {");
    out += "\"device\": " + JsonString(d.device);
    out += ", \"peak_bytes\": {\"before\": " + std::to_string(d.before.bytes) +
           ", \"after\": " + std::to_string(d.after.bytes) + "}";
    out += ", \"since_start_us\": {\"before\": " + std::to_string(d.before.since_start_us) +
           ", \"after\": " + std::to_string(d.after.since_start_us) + "}";
    out += ", \"phase\": {\"before\": " + JsonString(d.before.phase) +
           ", \"after\": " + JsonString(d.after.phase) + "}";
    out += ", \"by_category\": {\"before\": ";
    CategoriesJson(out, d.before.by_category);
    out += ", \"after\": ";
    CategoriesJson(out, d.after.by_category);
    out += "}, \"rank_peak_bytes\": [";
    for (size_t k = 0; k < d.rank_peaks.size(); ++k)
      out += (k == 0 ? "" : ", ") + std::to_string(d.rank_peaks[k]);
    out += "]}";
  }
  out += r.devices.empty() ? "]}\n" : "\n]}\n";
  return out;
}

}  // namespace memtl

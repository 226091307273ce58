// memtl summary, --budget and memtl diff (summary.h).
#include "core/explain/summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "core/explain/peak.h"
#include "core/explain/report.h"

namespace memtl {

namespace {

std::string Ms(int64_t us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", static_cast<double>(us) / 1e3);
  return buf;
}

std::string Pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

std::string PadLeft(const std::string& s, size_t width) {
  return s.size() < width ? std::string(width - s.size(), ' ') + s : s;
}

std::vector<MemoryRow> TopBySelfAtPeak(std::vector<MemoryRow> rows, size_t top) {
  std::stable_sort(rows.begin(), rows.end(), [](const MemoryRow& a, const MemoryRow& b) {
    return a.self.at_peak > b.self.at_peak;
  });
  if (rows.size() > top) rows.resize(top);
  return rows;
}

std::string RowsJson(const std::vector<MemoryRow>& rows) {
  std::string out = "[";
  for (const MemoryRow& r : rows) {
    if (out.size() > 1) out += ",";
    out += "{\"name\":" + JsonString(r.name) + ",\"at_peak\":" + std::to_string(r.self.at_peak) +
           ",\"allocated\":" + std::to_string(r.self.allocated) +
           ",\"count\":" + std::to_string(r.self.count) + "}";
  }
  return out + "]";
}

std::string ByCategoryJson(const std::array<int64_t, 8>& bytes) {
  std::string out = "{";
  for (int c = 0; c < 8; ++c) {
    if (c > 0) out += ",";
    out += JsonString(std::string(ExportCategoryName(c))) + ":" + std::to_string(bytes[c]);
  }
  return out + "}";
}

constexpr size_t kDiffRows = 10;

}  // namespace

const DeviceSummary* FindDevice(const Summary& s, const std::string& name) {
  for (const DeviceSummary& d : s.devices) {
    if (d.device == name) return &d;
  }
  return nullptr;
}

std::vector<std::pair<std::string, std::array<int64_t, 2>>> TableDiff(
    const std::vector<MemoryRow>& a, const std::vector<MemoryRow>& b, size_t top) {
  std::map<std::string, std::array<int64_t, 2>> by_name;
  for (const MemoryRow& r : a) by_name[r.name][0] = r.self.at_peak;
  for (const MemoryRow& r : b) by_name[r.name][1] = r.self.at_peak;
  std::vector<std::pair<std::string, std::array<int64_t, 2>>> rows(by_name.begin(), by_name.end());
  std::stable_sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) {
    return std::llabs(x.second[1] - x.second[0]) > std::llabs(y.second[1] - y.second[0]);
  });
  while (!rows.empty() && rows.back().second[0] == rows.back().second[1]) rows.pop_back();
  if (rows.size() > top) rows.resize(top);
  return rows;
}

std::vector<std::string> DiffDevices(const Summary& a, const Summary& b) {
  std::vector<std::string> names;
  for (const DeviceSummary& d : a.devices) names.push_back(d.device);
  for (const DeviceSummary& d : b.devices) {
    if (!FindDevice(a, d.device)) names.push_back(d.device);
  }
  return names;
}

namespace {

// Summarize's rows; the tables from `tables` (by device) when given.
Summary SummaryOf(const Trace& trace, const std::vector<TimelineEvent>& timeline,
                  const CategoryDict& categories, const InferredCategories* inferred,
                  const std::vector<MemoryTables>* tables, const std::string& trace_name,
                  size_t top) {
  Summary s;
  s.trace = trace_name;
  s.inferred = inferred != nullptr;
  for (const DeviceIndex d : AcceleratorsFirst(trace)) {
    const PeakReport peak = FindPeak(timeline, categories, d);
    if (!peak.any) continue;
    DeviceSummary ds;
    ds.device = trace.devices[d].name;
    ds.peak_bytes = peak.bytes;
    ds.peak_time_us = peak.time_us;
    ds.since_start_us = peak.since_start_us;
    ds.at_peak = peak.by_category;
    if (inferred != nullptr) {
      ds.max_reserved = trace.devices[d].max_total_reserved;
      ds.reserved_at_peak = trace.devices[d].reserved_at_peak;
      ds.segment_free = FreeInSegments(trace.devices[d], *inferred);
    }
    CoalescedSizes(timeline, categories, d, [&](const std::array<int64_t, 9>& row) {
      for (int c = 0; c < 8; ++c) ds.largest[c] = std::max(ds.largest[c], row[c + 1]);
    });
    if (tables != nullptr && d < tables->size()) {
      const MemoryTables& t = (*tables)[d];
      ds.top_ops = TopBySelfAtPeak(t.by_op, top);
      ds.top_modules = TopBySelfAtPeak(t.by_module, top);
      if (HasCallSites(t.by_call_site)) ds.top_call_sites = TopBySelfAtPeak(t.by_call_site, top);
    }
    s.devices.push_back(std::move(ds));
  }
  return s;
}

}  // namespace

Summary Summarize(const ExplainInput& in, const std::string& trace_name, size_t top) {
  const std::vector<MemoryTables> tables = ComputeTables(in);
  return SummaryOf(in.trace, in.timeline, in.categories, in.inferred, &tables, trace_name, top);
}

Summary SummarizeTimeline(const Trace& trace, const std::vector<TimelineEvent>& timeline,
                          const CategoryDict& categories, const std::string& trace_name) {
  return SummaryOf(trace, timeline, categories, nullptr, nullptr, trace_name, 0);
}

std::string FormatSummary(const Summary& s) {
  std::string out;
  if (s.devices.empty()) return "no memory events on any device\n";
  if (s.inferred) {
    out +=
        "categories inferred: the trace records no tensors (memtl explain TRACE A<n> says "
        "why)\n";
  }
  const size_t width = s.inferred ? 28 : 17;
  for (const DeviceSummary& d : s.devices) {
    out += d.device + ": peak " + HumanBytes(d.peak_bytes) + " at " + Ms(d.since_start_us) +
           " from the first row\n";
    if (d.max_reserved != 0)
      out += "  the allocator reserved at most " + HumanBytes(d.max_reserved) + "\n";
    if (const std::string f = FragmentationLine(d.reserved_at_peak, d.peak_bytes); !f.empty())
      out += "  " + f;
    if (const std::string f = SegmentFreeLine(d.segment_free, s.inferred); !f.empty())
      out += "  " + f;
    out +=
        "  " + Pad("category", width) + PadLeft("at the peak", 12) + PadLeft("largest", 12) + "\n";
    for (int c = 0; c < 8; ++c) {
      out += "  " + Pad(ExportCategoryLabel(c, s.inferred), width) +
             PadLeft(HumanBytes(d.at_peak[c]), 12) + PadLeft(HumanBytes(d.largest[c]), 12) + "\n";
    }
    auto table = [&](const char* title, const std::vector<MemoryRow>& rows) {
      if (rows.empty()) return;
      out += std::string("  ") + title + "\n";
      for (const MemoryRow& r : rows)
        out += "    " + PadLeft(HumanBytes(r.self.at_peak), 10) + "  " + TextCell(r.name) + "\n";
    };
    table("ops holding the most at the peak:", d.top_ops);
    table("modules holding the most at the peak:", d.top_modules);
    table("call sites holding the most at the peak:", d.top_call_sites);
  }
  return out;
}

std::string SummaryJson(const Summary& s) {
  std::string out = "{\"trace\":" + JsonString(s.trace) + (s.inferred ? ",\"inferred\":true" : "") +
                    ",\"devices\":[";
  for (size_t i = 0; i < s.devices.size(); ++i) {
    const DeviceSummary& d = s.devices[i];
    if (i > 0) out += ",";
    out +=
        "{\"device\":" + JsonString(d.device) + ",\"peak_bytes\":" + std::to_string(d.peak_bytes) +
        ",\"peak_time_us\":" + std::to_string(d.peak_time_us) +
        ",\"since_start_us\":" + std::to_string(d.since_start_us) +
        ",\"at_peak\":" + ByCategoryJson(d.at_peak) + ",\"largest\":" + ByCategoryJson(d.largest) +
        ",\"top_ops\":" + RowsJson(d.top_ops) + ",\"top_modules\":" + RowsJson(d.top_modules) +
        ",\"top_call_sites\":" + RowsJson(d.top_call_sites) +
        (d.max_reserved != 0 ? ",\"max_reserved\":" + std::to_string(d.max_reserved) : "") +
        (d.reserved_at_peak != 0 ? ",\"reserved_at_peak\":" + std::to_string(d.reserved_at_peak)
                                 : "") +
        (d.segment_free.any ? ",\"segment_free\":" + SegmentFreeJson(d.segment_free) : "") + "}";
  }
  return out + "]}\n";
}

Expected<Budget> ParseBudget(std::string_view text) {
  const auto eq = text.find('=');
  auto bad = [&](const std::string& why) {
    return Status::Error("--budget " + std::string(text.substr(0, 80)) + ": " + why +
                         " (write CATEGORY=SIZE, e.g. ACTIVATION=2GiB or total=10GB)");
  };
  if (eq == std::string_view::npos) return bad("no '='");
  // Names in any case: "unknown" as the outputs print it, "activation".
  auto upper = [](std::string_view s) {
    std::string u(s);
    for (char& ch : u) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    return u;
  };
  const std::string name = upper(text.substr(0, eq));
  Budget b;
  b.text = std::string(text);
  if (name != "TOTAL") {
    for (int c = 0; c < 8; ++c) {
      if (name == upper(kExportIndexNames[c])) b.category = c;
    }
    if (!b.category) return bad("unknown category " + std::string(text.substr(0, eq)));
  }
  // Strictly DIGITS[.DIGITS]UNIT: "1..5GB", "1.2.3MB" and "." are refused,
  // never read as a prefix.
  std::string_view size = text.substr(eq + 1);
  auto digits_from = [&](size_t i) {
    while (i < size.size() && size[i] >= '0' && size[i] <= '9') ++i;
    return i;
  };
  size_t digits = digits_from(0);
  if (digits == 0) return bad("no size");
  if (digits < size.size() && size[digits] == '.') {
    const size_t frac_end = digits_from(digits + 1);
    if (frac_end == digits + 1) return bad("no digits after the '.'");
    digits = frac_end;
  }
  if (digits > 20) return bad("no size");
  const double number = std::strtod(std::string(size.substr(0, digits)).c_str(), nullptr);
  std::string unit(size.substr(digits));
  for (char& ch : unit) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  if (unit == "kb" || unit == "k") scale = 1e3;
  if (unit == "mb" || unit == "m") scale = 1e6;
  if (unit == "gb" || unit == "g") scale = 1e9;
  if (unit == "tb" || unit == "t") scale = 1e12;
  if (unit == "kib") scale = 1024.0;
  if (unit == "mib") scale = 1024.0 * 1024;
  if (unit == "gib") scale = 1024.0 * 1024 * 1024;
  if (unit == "tib") scale = 1024.0 * 1024 * 1024 * 1024;
  if (scale == 0) return bad("unknown unit " + std::string(size.substr(digits, 16)));
  const double bytes = number * scale;
  if (!(bytes >= 0) || bytes > 9e18) return bad("size out of range");
  b.bytes = static_cast<int64_t>(std::llround(bytes));
  return b;
}

std::vector<std::string> CheckBudgets(const Summary& s, const std::vector<Budget>& budgets) {
  std::vector<std::string> over;
  for (const Budget& b : budgets) {
    for (const DeviceSummary& d : s.devices) {
      const int64_t used = b.category ? d.largest[*b.category] : d.peak_bytes;
      if (used <= b.bytes) continue;
      over.push_back("budget exceeded: " +
                     (b.category ? std::string(ExportCategoryName(*b.category)) : "total") +
                     " on " + d.device + " reached " + HumanBytes(used) + " (" +
                     std::to_string(used) + " bytes), over --budget " + b.text);
    }
  }
  return over;
}

std::string FormatDiff(const Summary& a, const Summary& b) {
  // A trace without tensors (a Kineto trace read alone) has inferred categories.
  auto inferred = [](const Summary& s) {
    return s.inferred ? std::string("  (categories inferred: the trace records no tensors)")
                      : std::string();
  };
  std::string out = "A: " + a.trace + inferred(a) + "\nB: " + b.trace + inferred(b) + "\n";
  for (const std::string& name : DiffDevices(a, b)) {
    const DeviceSummary* da = FindDevice(a, name);
    const DeviceSummary* db = FindDevice(b, name);
    if (da == nullptr || db == nullptr) {
      out += name + ": only in " + (da ? "A" : "B") + "\n";
      continue;
    }
    out += name + "\n  " + Pad("", 17) + PadLeft("A", 12) + PadLeft("B", 12) +
           PadLeft("B - A", 13) + "\n";
    auto line = [&](const std::string& what, int64_t x, int64_t y) {
      out += "  " + Pad(what, 17) + PadLeft(HumanBytes(x), 12) + PadLeft(HumanBytes(y), 12) +
             PadLeft(SignedBytes(y - x), 13) + "\n";
    };
    line("peak", da->peak_bytes, db->peak_bytes);
    for (int c = 0; c < 8; ++c)
      line(std::string(ExportCategoryName(c)), da->largest[c], db->largest[c]);
    auto table = [&](const char* title, const auto& rows) {
      if (rows.empty()) return;
      out += std::string("  ") + title + "\n";
      for (const auto& [n, v] : rows) {
        out += "    " + PadLeft(HumanBytes(v[0]), 10) + PadLeft(HumanBytes(v[1]), 12) +
               PadLeft(SignedBytes(v[1] - v[0]), 13) + "  " + n + "\n";
      }
    };
    table("ops whose bytes at the peak differ most (A, B, B - A):",
          TableDiff(da->top_ops, db->top_ops, kDiffRows));
    table("modules whose bytes at the peak differ most (A, B, B - A):",
          TableDiff(da->top_modules, db->top_modules, kDiffRows));
  }
  out +=
      "(categories: each one's largest over the run; ops and modules: among each run's top "
      "rows)\n";
  return out;
}

std::string DiffJson(const Summary& a, const Summary& b) {
  std::string ja = SummaryJson(a), jb = SummaryJson(b);
  ja.pop_back();  // SummaryJson's closing newline
  jb.pop_back();
  return "{\"a\":" + ja + ",\"b\":" + jb + "}\n";
}

}  // namespace memtl

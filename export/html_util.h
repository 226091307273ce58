// What the HTML pages (the report, html_export.cpp; the diff, diff_html.cpp)
// share: escaping, the categories' colours and sortable number cells.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace memtl::html {

// `s` safe in an element or an attribute value.
inline std::string Escape(std::string_view s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// The plot's colours by export index (PyTorch's _CATEGORY_TO_COLORS:
// darkgreen, goldenrod, black, mediumpurple, red, mediumblue, royalblue,
// grey).
inline constexpr const char* kCategoryColors[8] = {"#006400", "#daa520", "#000000", "#9370db",
                                                   "#ff0000", "#0000cd", "#4169e1", "#808080"};

// The start of a page with the report's style (and `css` after it) under the
// report's Content-Security-Policy, through <body>; and its end, with
// report.js to sort its tables (it draws no chart: the page has no
// devices). The diff and ranks pages use them (export/diff_html.cpp).
std::string PageStart(const std::string& title, std::string_view css);
std::string PageEnd();

// A line chart in inline SVG (the ranks and whatif pages): its plot area is
// kChartWidth wide from x kChartLeft, `height` high from y kChartTop. The
// opening <svg> (class `cls`, labelled `aria`), the axes, the top value
// and 0 on the y axis, the first and last time under the x axis.
inline constexpr int kChartWidth = 900, kChartLeft = 80, kChartTop = 10, kChartBottom = 30;
std::string ChartFrame(const char* cls, const std::string& aria, int height, int64_t top_bytes,
                       double t0_ms, double t1_ms);

// A number cell: `text` shown, `v` what report.js sorts by.
inline std::string Num(int64_t v, const std::string& text) {
  return "<td class=\"n\" data-v=\"" + std::to_string(v) + "\">" + text + "</td>";
}

}  // namespace memtl::html

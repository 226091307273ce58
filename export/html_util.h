// What the HTML pages (the report, html_export.cpp; the diff, diff_html.cpp;
// ranks_html.cpp; whatif_html.cpp) share: escaping, the data block and the
// scripts under the pages' Content-Security-Policy, the categories' colours
// and sortable number cells.
#pragma once

#include <cstddef>
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

// `json` (valid JSON) safe as the text of a <script> element, the one rule
// for every page's data block. Names from a trace reach it (ops, modules,
// devices, the trace's file name), and inside <script> the HTML parser
// looks for more than "</script": "<!--" followed by "<script" switches it
// to a state where the real "</script>" no longer ends the element, so the
// page's own scripts are swallowed. JSON has <, >, & and U+2028/U+2029 only
// inside strings, where their \u escapes are the same value, so none of
// them is left for the parser to see.
inline std::string ScriptJson(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '>') {
      out += "\\u003e";
    } else if (c == '&') {
      out += "\\u0026";
    } else if (c == '\xe2' && i + 2 < json.size() && json[i + 1] == '\x80' &&
               (json[i + 2] == '\xa8' || json[i + 2] == '\xa9')) {
      // U+2028 and U+2029 (E2 80 A8/A9): JavaScript before ES2019 took them
      // for line ends inside a string, were the block ever read as script.
      out += json[i + 2] == '\xa8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

// The <script> element running `js`, one of the scripts embedded at build
// time: its text is exactly `js`, which is what the policy's hash is of.
inline std::string InlineScript(std::string_view js) {
  std::string out = "<script>";
  out += js;
  return out + "</script>\n";
}

// The <meta> with every page's Content-Security-Policy: nothing is loaded,
// images only as data: URLs, styles inline (the pages' style attributes),
// and no script runs but report.js and, when `chart` (the report), flame.js
// and dygraphs, named by
// their SHA-256 (computed when the assets are embedded,
// export/embed_assets.cmake), so that markup from a trace that escaped
// anyway could not run a script of its own.
std::string PolicyMeta(bool chart);

// The plot's colours by export index (PyTorch's _CATEGORY_TO_COLORS:
// darkgreen, goldenrod, black, mediumpurple, red, mediumblue, royalblue,
// grey).
inline constexpr const char* kCategoryColors[8] = {"#006400", "#daa520", "#000000", "#9370db",
                                                   "#ff0000", "#0000cd", "#4169e1", "#808080"};

// The start of a page with the report's style (and `css` after it) under the
// report's Content-Security-Policy (PolicyMeta(false)), through <body>; and
// its end, with report.js to sort its tables (it draws no chart: the page has
// no devices). The diff, ranks and whatif pages use them
// (export/diff_html.cpp).
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

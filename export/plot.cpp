// The stacked-area memory plot, drawn by memtl itself (export/raster.h: no
// graphics library, text from a glyph table made at build time) to a PNG in
// memory.
//
// Layout follows PyTorch's matplotlib figure (20 x 12 inches at 80 dpi,
// PyTorch's colours at alpha 0.7, legend, title), with areas drawn as steps
// and two changes so that nothing hides or misstates the data: the legend
// is one row between the title and the axes, never over the areas, and the
// y axis is in the binary unit of the peak (B, KiB, MiB or GiB, labelled as
// such). A timeline with more samples than pixel columns is reduced per
// column to the sample with the largest total, so the peak is never lost.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <vector>

#include "export/export.h"
#include "export/png.h"
#include "export/raster.h"

namespace memtl {

namespace {

// By export index: PARAMETER darkgreen, OPTIMIZER_STATE goldenrod, INPUT
// black, TEMPORARY mediumpurple, ACTIVATION red, GRADIENT mediumblue,
// AUTOGRAD_DETAIL royalblue, unknown grey.
constexpr std::array<Rgb, 8> kColors = {{{0, 100 / 255.0, 0},
                                         {218 / 255.0, 165 / 255.0, 32 / 255.0},
                                         {0, 0, 0},
                                         {147 / 255.0, 112 / 255.0, 219 / 255.0},
                                         {1, 0, 0},
                                         {0, 0, 205 / 255.0},
                                         {65 / 255.0, 105 / 255.0, 225 / 255.0},
                                         {128 / 255.0, 128 / 255.0, 128 / 255.0}}};

double NiceStep(double range, int target_ticks) {
  if (range <= 0) return 1;
  const double raw = range / target_ticks;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (raw <= m * mag) return m * mag;
  }
  return 10 * mag;
}

std::string FormatTick(double v, double step) {
  int decimals = 0;
  while (decimals < 9 && std::fabs(step * std::pow(10.0, decimals) -
                                   std::round(step * std::pow(10.0, decimals))) > 1e-9) {
    ++decimals;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Composites the stacked areas onto the opaque canvas rows [y0, y0 + rows)
// (0xAARRGGBB words): category j of run k covers columns
// [col_x[k], col_x[k + 1]) and rows [edge_y[k][j + 1], edge_y[k][j]) in its
// colour at alpha 0.7, over what is there (the white background and the
// grid), as cairo's OVER operator composites.
void FillSteps(Band& band, const std::vector<int>& col_x,
               const std::vector<std::array<int, 9>>& edge_y) {
  const int width = band.width(), y0 = band.y0();
  constexpr uint32_t kAlpha = 179;               // 0.7 of 255
  std::array<std::array<uint32_t, 3>, 8> src{};  // premultiplied r, g, b
  for (int j = 0; j < 8; ++j) {
    src[j] = {static_cast<uint32_t>(std::lround(kColors[j].r * kAlpha)),
              static_cast<uint32_t>(std::lround(kColors[j].g * kAlpha)),
              static_cast<uint32_t>(std::lround(kColors[j].b * kAlpha))};
  }
  const int y_end = y0 + band.rows();
  for (size_t k = 0; k < edge_y.size(); ++k) {
    const int xa = std::clamp(col_x[k], 0, width), xb = std::clamp(col_x[k + 1], 0, width);
    if (xa >= xb) continue;
    for (int j = 0; j < 8; ++j) {
      const int ya = std::max(edge_y[k][j + 1], y0), yb = std::min(edge_y[k][j], y_end);
      for (int y = ya; y < yb; ++y) {
        uint32_t* px = band.Row(y);
        for (int x = xa; x < xb; ++x) {
          const uint32_t d = px[x];
          const uint32_t r = src[j][0] + Div255(((d >> 16) & 255) * (255 - kAlpha));
          const uint32_t g = src[j][1] + Div255(((d >> 8) & 255) * (255 - kAlpha));
          const uint32_t b = src[j][2] + Div255((d & 255) * (255 - kAlpha));
          px[x] = 0xff000000u | (r << 16) | (g << 8) | b;
        }
      }
    }
  }
}

// The figure's frame and scales, from a first walk of the rows: the axes'
// place in pixels, their ranges and tick steps, and the y unit.
struct Axes {
  double W = 0, H = 0;
  double left = 0, right = 0, top = 0, bottom = 0;
  int unit = 0;  // index into kUnits
  double unit_bytes = 1;
  double t0 = 0;  // the first time, ns
  double xstep = 1, ystep = 1, xlim = 1, ylim = 1;
  double X(double v) const { return left + (right - left) * v / xlim; }
  double Y(double v) const { return bottom - (bottom - top) * v / ylim; }
  double Font() const { return H / 60; }
  // A row in the y unit, stacked by export index.
  std::array<double, 9> Stack(const std::array<int64_t, 9>& sizes) const {
    std::array<double, 9> s{};
    double acc = 0;
    for (int j = 0; j < 9; ++j) {
      acc += static_cast<double>(sizes[j]) / unit_bytes;
      s[j] = acc;
    }
    return s;
  }
};

constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB"};

// First walk: the number of rows, the time range and the highest total,
// which make the axes.
Axes AxesOf(const PlotRows& rows, const PlotOptions& o, PlotSummary* summary) {
  Axes a;
  a.W = o.width;
  a.H = o.height;
  a.left = 0.08 * a.W;
  a.right = 0.97 * a.W;
  a.top = 0.14 * a.H;
  a.bottom = 0.90 * a.H;
  size_t n = 0;
  int64_t t_lo = 0, t_hi = 0, peak_bytes = 0;
  rows([&](int64_t t, const std::array<int64_t, 9>& sizes) {
    t_lo = n == 0 ? t : std::min(t_lo, t);
    t_hi = n == 0 ? t : std::max(t_hi, t);
    int64_t total = 0;
    for (int64_t v : sizes) total += v;
    peak_bytes = std::max(peak_bytes, total);
    ++n;
  });
  if (summary != nullptr) *summary = PlotSummary{n, peak_bytes};
  // The y unit: the largest binary unit the peak reaches (GiB at most, as
  // PyTorch's figure).
  while (a.unit < 3 && peak_bytes >= (int64_t{1} << (10 * (a.unit + 1)))) ++a.unit;
  a.unit_bytes = static_cast<double>(int64_t{1} << (10 * a.unit));
  // Data in ms (from the first time) and that unit.
  double ymax = static_cast<double>(peak_bytes) / a.unit_bytes;
  a.t0 = n ? static_cast<double>(t_lo) : 0;
  double xmax = n ? std::max(0.0, (static_cast<double>(t_hi) - a.t0) / 1e3) : 0;
  if (xmax <= 0) xmax = 1;
  if (ymax <= 0) ymax = 1;
  a.xstep = NiceStep(xmax, 10);
  a.ystep = NiceStep(ymax * 1.05, 8);
  a.xlim = std::ceil(xmax / a.xstep) * a.xstep;
  a.ylim = std::ceil(ymax * 1.05 / a.ystep) * a.ystep;
  return a;
}

// A pixel column's rows: the one with the largest total (so that no peak
// narrower than a pixel is lost) and the last (what memory holds after it,
// until the next row), stacked.
struct Column {
  int col;
  std::array<double, 9> peak, last;
};

// Second walk: the pixel columns that have rows.
std::vector<Column> ColumnsOf(const PlotRows& rows, const Axes& a) {
  std::vector<Column> columns;
  rows([&](int64_t t, const std::array<int64_t, 9>& sizes) {
    const double x = (static_cast<double>(t) - a.t0) / 1e3;
    const auto s = a.Stack(sizes);
    const int col = static_cast<int>((a.X(x) - a.left));
    if (columns.empty() || col != columns.back().col) {
      columns.push_back({col, s, s});
      return;
    }
    if (s[8] > columns.back().peak[8]) columns.back().peak = s;
    columns.back().last = s;
  });
  return columns;
}

// The areas as runs of whole pixels: each column with rows draws its peak
// over its own pixel column, then its last row from the next pixel
// column up to the next column with rows; each boundary between two
// categories is rounded to a pixel row. Run k covers the pixel columns
// [col_x[k], col_x[k + 1]). FillSteps writes these rectangles straight
// into the canvas: cairo's tessellation of the same steps took 6 to 9 ms
// of a 10^5-event plot's 20 (the transformer's sawtooth, which has a
// corner in every column).
struct Steps {
  std::vector<int> col_x;
  std::vector<std::array<int, 9>> edge_y;
};

Steps StepsOf(const std::vector<Column>& columns, const Axes& a) {
  Steps out;
  auto run = [&](int x, const std::array<double, 9>& v) {
    out.col_x.push_back(x);
    std::array<int, 9> e{};
    for (int j = 0; j < 9; ++j) {
      // Clamped before the conversion: only the totals are within the axes.
      e[j] = static_cast<int>(std::clamp(std::round(a.Y(v[j])), -1.0, a.H + 1));
    }
    out.edge_y.push_back(e);
  };
  for (const Column& c : columns) {
    const int x = static_cast<int>(a.left + c.col);
    run(x, c.peak);
    run(x + 1, c.last);
  }
  if (!columns.empty()) out.col_x.push_back(static_cast<int>(a.left + columns.back().col) + 1);
  return out;
}

// The axes' frame, ticks and their labels.
void DrawFrame(Band& b, const Axes& a) {
  constexpr Rgb kBlack{0, 0, 0};
  b.StrokeRect(a.left, a.top, a.right, a.bottom, 1.2, kBlack);
  const double font = a.Font();
  for (double v = 0; v <= a.xlim + 1e-12; v += a.xstep) {
    b.VLine(a.X(v), a.bottom, a.bottom + 6, 1.2, kBlack);
    b.Text(FormatTick(v, a.xstep), a.X(v), a.bottom + 6 + font, font, 0.5);
  }
  for (double v = 0; v <= a.ylim + 1e-12; v += a.ystep) {
    b.HLine(a.left - 6, a.left, a.Y(v), 1.2, kBlack);
    b.Text(FormatTick(v, a.ystep), a.left - 10, a.Y(v), font, 1.0);
  }
  b.Text("Time (ms)", (a.left + a.right) / 2, a.bottom + 3.2 * font, font * 1.1, 0.5);
  b.TextUp(std::string("Memory (") + kUnits[a.unit] + ")", a.left - 5.2 * font,
           (a.top + a.bottom) / 2, font * 1.1, 0.5);
}

// The title: one or more lines.
void DrawTitle(Band& b, const Axes& a, const std::string& title) {
  const double font = a.Font();
  double ty = a.top - 0.09 * a.H;
  size_t start = 0;
  while (start <= title.size()) {
    size_t nl = title.find('\n', start);
    if (nl == std::string::npos) nl = title.size();
    b.Text(std::string_view(title).substr(start, nl - start), (a.left + a.right) / 2, ty,
           font * 1.2, 0.5);
    ty += font * 1.6;
    start = nl + 1;
  }
}

// The legend: one row centred between the title and the axes, so that it
// covers no data (inside the axes, PyTorch's hid the right-hand peak).
void DrawLegend(Band& b, const Axes& a) {
  const double font = a.Font();
  const double swatch = font * 1.6, gap = font * 0.6, spacing = font * 1.6;
  double legend_w = 0;
  for (int cat = 0; cat < 8; ++cat) {
    legend_w +=
        swatch + gap + Band::TextWidth(kExportIndexNames[cat], font) + (cat < 7 ? spacing : 0);
  }
  double lx = std::max(a.left, (a.left + a.right - legend_w) / 2);
  const double ly = a.top - 0.035 * a.H;
  for (int cat = 0; cat < 8; ++cat) {
    b.FillRect(lx, ly - font * 0.45, lx + swatch, ly + font * 0.45, kColors[cat], 0.7);
    b.Text(kExportIndexNames[cat], lx + swatch + gap, ly, font, 0);
    lx += swatch + gap + Band::TextWidth(kExportIndexNames[cat], font) + spacing;
  }
}

// The whole figure, drawn on the band of rows it is given.
void DrawFigure(Band& b, const Axes& a, const Steps& steps, const std::string& title) {
  b.Paint({1, 1, 1});
  // Grid.
  for (double v = a.ystep; v <= a.ylim + 1e-12; v += a.ystep)
    b.HLine(a.left, a.right, std::round(a.Y(v)) + 0.5, 1, {0.9, 0.9, 0.9});
  // Stacked areas, drawn as steps: memory holds its value until the next
  // event (matplotlib's fill_between in PyTorch's plot interpolates
  // linearly, which draws slopes that never happened).
  FillSteps(b, steps.col_x, steps.edge_y);
  DrawFrame(b, a);
  DrawTitle(b, a, title);
  DrawLegend(b, a);
}

}  // namespace

std::string RenderPlotPng(const CoalescedTimeline& c, const PlotOptions& o) {
  return RenderPlotPng(
      [&](const std::function<void(int64_t, const std::array<int64_t, 9>&)>& fn) {
        for (size_t i = 0; i < c.times.size(); ++i) fn(c.times[i], c.sizes[i]);
      },
      o);
}

std::string RenderPlotPng(const PlotRows& rows, const PlotOptions& o, PlotSummary* summary) {
  if (o.width <= 0 || o.height <= 0) return {};
  const Axes axes = AxesOf(rows, o, summary);
  const Steps steps = StepsOf(ColumnsOf(rows, axes), axes);

  // The figure is drawn in bands of rows, each band encoded as soon as it
  // is drawn (png.cpp), so that the canvas is never whole in memory:
  // 1600x960 ARGB32 is 6 MB, a third of what a 10^5-event HTML export
  // needs otherwise. Every pixel is computed from the figure's coordinates,
  // so the bands' pixels are those of drawing the figure at once (a unit
  // test compares). The white background makes every pixel opaque, so the
  // PNG is RGB.
  const int band = std::clamp(o.band_rows, 1, o.height);
  std::vector<uint32_t> canvas(static_cast<size_t>(o.width) * static_cast<size_t>(band));
  PngRowEncoder png(o.width, o.height, /*opaque=*/true);
  for (int y0 = 0; y0 < o.height; y0 += band) {
    Band b(canvas.data(), o.width, y0, std::min(band, o.height - y0));
    DrawFigure(b, axes, steps, o.title);
    for (int y = y0; y < y0 + b.rows(); ++y) png.AddRow(b.Row(y));
  }
  return png.Finish();
}

std::string Base64(const std::string& bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (static_cast<unsigned char>(bytes[i]) << 16) |
                       (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                       static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i < bytes.size()) {
    uint32_t v = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

}  // namespace memtl

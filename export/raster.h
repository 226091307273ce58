// The few drawing operations the plot needs, on a band of rows of an opaque
// ARGB32 canvas, without a graphics library: axis-aligned rectangles and
// strokes with exact area coverage (what cairo gives such shapes), and text
// from bitmaps made once from DejaVu Sans (export/glyph_table.inc,
// scripts/make_glyph_table.sh), horizontal or turned a quarter
// counter-clockwise.
//
// Every operation computes each pixel from the figure's own coordinates, so
// drawing a figure band by band gives the pixels of drawing it whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace memtl {

struct Rgb {
  double r, g, b;  // 0 .. 1
};

// t / 255 rounded, for t <= 255 * 255 (compositing 8-bit channels).
constexpr uint32_t Div255(uint32_t t) { return (t + 128 + ((t + 128) >> 8)) >> 8; }

class Band {
 public:
  // Rows [y0, y0 + rows) of a canvas `width` pixels wide; `pixels` holds them,
  // one 0xAARRGGBB word per pixel, `width` words per row.
  Band(uint32_t* pixels, int width, int y0, int rows)
      : px_(pixels), width_(width), y0_(y0), rows_(rows) {}

  uint32_t* Row(int y) { return px_ + static_cast<size_t>(y - y0_) * static_cast<size_t>(width_); }
  int width() const { return width_; }
  int y0() const { return y0_; }
  int rows() const { return rows_; }

  // Sets every pixel of the band to `c`, opaque.
  void Paint(Rgb c);
  // Composites `c` at `alpha` over the rectangle [x0, x1) x [y0, y1), each
  // pixel by the fraction of its area inside.
  void FillRect(double x0, double y0, double x1, double y1, Rgb c, double alpha = 1);
  // The outline of that rectangle drawn with a pen `line_width` wide centred
  // on its edges, with square corners (cairo's stroke with mitre joins).
  void StrokeRect(double x0, double y0, double x1, double y1, double line_width, Rgb c);
  // A horizontal or vertical segment stroked `line_width` wide, ends cut
  // square at its end points (butt caps).
  void HLine(double x0, double x1, double y, double line_width, Rgb c);
  void VLine(double x, double y0, double y1, double line_width, Rgb c);

  // `text` (printable ASCII; other bytes draw as '?') in black, `size`
  // pixels high (the glyph table's nearest size), starting `align_x` of its
  // width to the left of x (0 left, 0.5 centred, 1 right) with its baseline
  // at y + 0.35 size (a line of text centred on y, as the plot places it).
  // TextUp turns the same text a quarter counter-clockwise about (x, y), so
  // that it reads upwards.
  void Text(std::string_view text, double x, double y, double size, double align_x);
  void TextUp(std::string_view text, double x, double y, double size, double align_x);
  // The text's advance in pixels at that size.
  static int TextWidth(std::string_view text, double size);

 private:
  // Blends `c` into the pixel at (x, y) of the canvas, `a` in 0..255.
  void Blend(int x, int y, uint32_t c, uint32_t a);
  template <typename Plot>
  void DrawGlyphs(std::string_view text, double size, Plot plot);

  uint32_t* px_;
  int width_, y0_, rows_;
};

}  // namespace memtl

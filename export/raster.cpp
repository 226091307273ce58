// Drawing on a band of an opaque canvas (see raster.h).
#include "export/raster.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace memtl {

namespace {

struct GlyphBitmap {
  int advance, left, top;
  unsigned width, height;
  const char* rows;  // height rows of width hex digits, '.' for 0
};
struct GlyphFace {
  double pixel_size;
  const GlyphBitmap* glyphs;  // printable ASCII, ' ' (32) to '~' (126)
};

#include "export/glyph_table.inc"

// Each glyph's rows hold exactly width x height digits of coverage (a table
// regenerated wrong fails the build instead of being read past its end).
constexpr bool GlyphTableIsWellFormed() {
  for (const GlyphFace& face : kGlyphFaces) {
    for (int c = 0; c < 95; ++c) {
      const GlyphBitmap& g = face.glyphs[c];
      const char* p = g.rows;
      unsigned n = 0;
      for (; p[n] != 0; ++n) {
        const char d = p[n];
        if (!(d == '.' || (d >= '1' && d <= '9') || (d >= 'a' && d <= 'f'))) return false;
      }
      if (n != g.width * g.height) return false;
    }
  }
  return true;
}
static_assert(GlyphTableIsWellFormed());

const GlyphFace& FaceFor(double size) {
  const GlyphFace* best = &kGlyphFaces[0];
  for (const GlyphFace& f : kGlyphFaces) {
    if (std::fabs(f.pixel_size - size) < std::fabs(best->pixel_size - size)) best = &f;
  }
  return *best;
}

const GlyphBitmap& GlyphOf(const GlyphFace& face, char c) {
  const auto b = static_cast<unsigned char>(c);
  return face.glyphs[(b < 32 || b > 126 ? '?' : b) - 32];
}

// floor(v), ceil(v) and round(v) as ints, v first brought within a margin
// around any canvas (NaN to 0): the plot only passes finite coordinates
// near the canvas, and this keeps any other value's conversion defined.
double Near(double v) { return std::isnan(v) ? 0 : std::clamp(v, -1e6, 1e6); }
int FloorPx(double v) { return static_cast<int>(std::floor(Near(v))); }
int CeilPx(double v) { return static_cast<int>(std::ceil(Near(v))); }
int RoundPx(double v) { return static_cast<int>(std::lround(Near(v))); }

// The part of pixel [i, i + 1) inside [a, b).
double Overlap(int i, double a, double b) {
  return std::clamp(std::min(b, i + 1.0) - std::max(a, static_cast<double>(i)), 0.0, 1.0);
}

uint32_t Pack(Rgb c) {
  auto channel = [](double v) {
    return static_cast<uint32_t>(std::lround(std::clamp(v, 0.0, 1.0) * 255));
  };
  return 0xff000000u | channel(c.r) << 16 | channel(c.g) << 8 | channel(c.b);
}

uint32_t Alpha8(double coverage) {
  return static_cast<uint32_t>(std::lround(std::clamp(coverage, 0.0, 1.0) * 255));
}

}  // namespace

void Band::Blend(int x, int y, uint32_t c, uint32_t a) {
  if (a == 0 || x < 0 || x >= width_ || y < y0_ || y >= y0_ + rows_) return;
  uint32_t& d = Row(y)[x];
  if (a >= 255) {
    d = c;
    return;
  }
  uint32_t out = 0xff000000u;
  for (int shift = 0; shift <= 16; shift += 8) {
    const uint32_t s = (c >> shift) & 255, v = (d >> shift) & 255;
    out |= Div255(s * a + v * (255 - a)) << shift;
  }
  d = out;
}

void Band::Paint(Rgb c) { std::fill(px_, px_ + static_cast<size_t>(width_) * rows_, Pack(c)); }

void Band::FillRect(double x0, double y0, double x1, double y1, Rgb c, double alpha) {
  if (!(x0 < x1 && y0 < y1)) return;
  const uint32_t colour = Pack(c);
  const int xa = std::max(0, FloorPx(x0));
  const int xb = std::min(width_, CeilPx(x1));
  const int ya = std::max(y0_, FloorPx(y0));
  const int yb = std::min(y0_ + rows_, CeilPx(y1));
  for (int y = ya; y < yb; ++y) {
    const double cy = Overlap(y, y0, y1) * alpha;
    for (int x = xa; x < xb; ++x) Blend(x, y, colour, Alpha8(Overlap(x, x0, x1) * cy));
  }
}

void Band::StrokeRect(double x0, double y0, double x1, double y1, double line_width, Rgb c) {
  const double h = line_width / 2;
  const double ox0 = x0 - h, ox1 = x1 + h, oy0 = y0 - h, oy1 = y1 + h;
  const double ix0 = x0 + h, ix1 = x1 - h, iy0 = y0 + h, iy1 = y1 - h;
  const bool hollow = ix0 < ix1 && iy0 < iy1;
  const uint32_t colour = Pack(c);
  const int xa = std::max(0, FloorPx(ox0));
  const int xb = std::min(width_, CeilPx(ox1));
  const int ya = std::max(y0_, FloorPx(oy0));
  const int yb = std::min(y0_ + rows_, CeilPx(oy1));
  // Coverage of the outline = the outer rectangle's less the inner's. Rows
  // wholly inside the inner one are only visited near the sides.
  const int left_end = std::min(xb, CeilPx(ix0));
  const int right_begin = std::max(xa, FloorPx(ix1));
  for (int y = ya; y < yb; ++y) {
    const double cyo = Overlap(y, oy0, oy1), cyi = hollow ? Overlap(y, iy0, iy1) : 0;
    auto pixel = [&](int x) {
      const double cxi = hollow ? Overlap(x, ix0, ix1) : 0;
      Blend(x, y, colour, Alpha8(Overlap(x, ox0, ox1) * cyo - cxi * cyi));
    };
    if (cyi == 1 && left_end <= right_begin) {
      for (int x = xa; x < left_end; ++x) pixel(x);
      for (int x = right_begin; x < xb; ++x) pixel(x);
    } else {
      for (int x = xa; x < xb; ++x) pixel(x);
    }
  }
}

void Band::HLine(double x0, double x1, double y, double line_width, Rgb c) {
  FillRect(std::min(x0, x1), y - line_width / 2, std::max(x0, x1), y + line_width / 2, c);
}

void Band::VLine(double x, double y0, double y1, double line_width, Rgb c) {
  FillRect(x - line_width / 2, std::min(y0, y1), x + line_width / 2, std::max(y0, y1), c);
}

int Band::TextWidth(std::string_view text, double size) {
  const GlyphFace& face = FaceFor(size);
  int w = 0;
  for (char ch : text) w += GlyphOf(face, ch).advance;
  return w;
}

// Calls plot(dx, dy, coverage) for every inked pixel of `text`, at offsets
// from where its pen starts on the baseline (dy < 0 above the baseline).
template <typename Plot>
void Band::DrawGlyphs(std::string_view text, double size, Plot plot) {
  const GlyphFace& face = FaceFor(size);
  int pen = 0;
  for (char ch : text) {
    const GlyphBitmap& g = GlyphOf(face, ch);
    const char* p = g.rows;
    for (unsigned j = 0; j < g.height; ++j) {
      for (unsigned i = 0; i < g.width; ++i, ++p) {
        if (*p == '.') continue;
        const uint32_t q =
            *p <= '9' ? static_cast<uint32_t>(*p - '0') : static_cast<uint32_t>(*p - 'a' + 10);
        plot(pen + g.left + static_cast<int>(i), static_cast<int>(j) - g.top, q * 17);
      }
    }
    pen += g.advance;
  }
}

void Band::Text(std::string_view text, double x, double y, double size, double align_x) {
  // Glyphs land on whole pixels, as cairo places hinted glyphs.
  const int ox = RoundPx(x - TextWidth(text, size) * align_x);
  const int oy = RoundPx(y + 0.35 * size);
  DrawGlyphs(text, size,
             [&](int dx, int dy, uint32_t a) { Blend(ox + dx, oy + dy, 0xff000000u, a); });
}

void Band::TextUp(std::string_view text, double x, double y, double size, double align_x) {
  // The text's frame turned: along the text is up the canvas, below the
  // baseline is right. The pixel (dx, dy) of the text covers the canvas
  // pixel (ox + dy, oy - dx - 1).
  const int ox = RoundPx(x + 0.35 * size);
  const int oy = RoundPx(y + TextWidth(text, size) * align_x);
  DrawGlyphs(text, size,
             [&](int dx, int dy, uint32_t a) { Blend(ox + dy, oy - dx - 1, 0xff000000u, a); });
}

}  // namespace memtl

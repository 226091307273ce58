// PNG encoding of 32-bit pixels by libpng, with the filter and zlib settings
// that suit the plot (export/png.cpp says why).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace memtl {

// What a pixel word holds (cairo's two 32-bit formats): 0xAARRGGBB with the
// colour premultiplied by alpha, or 0x__RRGGBB with the top byte unused.
enum class PixelFormat { kArgb32, kRgb24 };

// `height` rows of `width` pixels, row y starting at pixels + y * stride
// (in words), as a PNG: RGB when every pixel is opaque (kArgb32) or there is
// no alpha (kRgb24), else RGBA un-premultiplied, rounded as cairo's writer
// rounds. The same pixels always give the same bytes. Empty on failure.
std::string EncodePng(const uint32_t* pixels, int width, int height, size_t stride,
                      PixelFormat format);

// The same encoding fed one row at a time, so that an image drawn in bands
// is never whole in memory. A row is `width` native-endian ARGB32 or RGB24
// words; `opaque`: write RGB (alpha is ignored), else RGBA un-premultiplied.
// Finish() gives the PNG, or an empty string when fewer or more than
// `height` rows came or encoding failed.
class PngRowEncoder {
 public:
  PngRowEncoder(int width, int height, bool opaque);
  ~PngRowEncoder();
  PngRowEncoder(const PngRowEncoder&) = delete;
  PngRowEncoder& operator=(const PngRowEncoder&) = delete;
  void AddRow(const uint32_t* pixels);
  std::string Finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace memtl

// Test helper: PNG decoding through libpng, independently of memtl's own
// encoder (export/png.cpp), which the tests check with it.
#pragma once

#include <png.h>

#include <cstdint>
#include <string>
#include <vector>

namespace memtl {

// Pixels as 0xAARRGGBB words, colour premultiplied by alpha (cairo's ARGB32).
struct Image {
  int width = 0, height = 0;
  std::vector<uint32_t> px;
  uint32_t& at(int x, int y) { return px[static_cast<size_t>(y) * width + x]; }
  uint32_t at(int x, int y) const { return px[static_cast<size_t>(y) * width + x]; }
};

// A PNG decoded by libpng, which checks the CRCs and the zlib checksum, and
// premultiplied again as cairo's reader does; width 0 when it fails.
inline Image DecodePng(const std::string& png) {
  Image img;
  png_image p{};
  p.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&p, png.data(), png.size())) return img;
  p.format = PNG_FORMAT_BGRA;  // a little-endian 0xAARRGGBB word per pixel
  std::vector<uint32_t> straight(static_cast<size_t>(p.width) * p.height);
  if (!png_image_finish_read(&p, nullptr, straight.data(), 0, nullptr)) {
    png_image_free(&p);
    return img;
  }
  auto mul = [](uint32_t a, uint32_t c) {
    const uint32_t t = a * c + 0x80;
    return (t + (t >> 8)) >> 8;
  };
  for (uint32_t& v : straight) {
    const uint32_t a = v >> 24;
    v = a << 24 | mul(a, (v >> 16) & 255) << 16 | mul(a, (v >> 8) & 255) << 8 | mul(a, v & 255);
  }
  img.width = static_cast<int>(p.width);
  img.height = static_cast<int>(p.height);
  img.px = std::move(straight);
  return img;
}

}  // namespace memtl

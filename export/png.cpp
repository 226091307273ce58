// PNG encoding of cairo image surfaces (see png.h).
//
// Settings chosen by timing the 22 plots of fixtures/ and build/bench/
// (1600x960, opaque) in a scratch harness, best of 7 to 21 encodes each, mean
// over the plots (size relative to cairo's):
//   cairo's writer (libpng's adaptive filters, zlib level 6)  34 ms   1.00x
//   adaptive filters, level 1                                 23 ms   1.39x
//   filter Up or None, level 6                                17 ms   1.00x
//   filter Up, Z_RLE                                          9.1 ms  1.69x
//   filter Sub, level 1                                       8.2 ms  1.61x
//   filter Up, level 1                                        8.6 ms  1.42x
//   filter None, level 1                                      7.5 ms  1.48x (up to 1.57x)
//   filter Up, level 2, repeated rows skipped (below)         5.8 ms  1.40x (up to 1.44x)
// (memLevel 6 in the last five.) Half of a plot's rows repeat the row above
// (the flat areas between steps): Up turns them into zeros, which deflate
// collapses into long matches, and such a row is neither converted nor
// checksummed again here (zlib's adler32 was 18% of the time), so the zlib
// checksum is computed here around a raw deflate stream. Level 2 takes the
// time of level 1 and is a little smaller; from level 4 on zlib's lazy
// matcher takes twice the time. memLevel 6 rather than 8: zlib rewrites its
// hash table every 32 KiB of input, and a smaller one is quicker to rewrite.
#include "export/png.h"

#include "export/cairo_api.h"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <vector>

namespace memtl {

namespace {

constexpr int kLevel = 2;
constexpr int kMemLevel = 6;
constexpr uint8_t kFilterUp = 2;
// The zlib header deflate writes for levels 2 to 5 with a 32 KiB window.
constexpr char kZlibHeader[] = "\x78\x5e";
// IDAT chunks are split at this size (any size up to 2^31 - 1 is valid).
constexpr size_t kMaxIdat = size_t{1} << 20;

void PutBe32(std::string& out, uint32_t v) {
  const char bytes[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                         static_cast<char>(v >> 8), static_cast<char>(v)};
  out.append(bytes, 4);
}

// Length, type, data, then the CRC of type and data.
void PutChunk(std::string& out, const char* type, const char* data, size_t size) {
  PutBe32(out, static_cast<uint32_t>(size));
  const size_t start = out.size();
  out.append(type, 4);
  out.append(data, size);
  PutBe32(out, static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(out.data() + start),
                                           static_cast<uInt>(out.size() - start))));
}

cairo_status_t AppendPng(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

std::string CairoPng(cairo_surface_t* surface) {
  const CairoApi* C = LoadCairo();
  if (C == nullptr) return {};
  std::string png;
  if (C->cairo_surface_write_to_png_stream(surface, AppendPng, &png) != CAIRO_STATUS_SUCCESS)
    png.clear();
  return png;
}

// Opaque ARGB32 or RGB24: R, G, B are the low three bytes of a native-endian
// word.
void RowRgb(const uint32_t* src, int width, uint8_t* out) {
  for (int x = 0; x < width; ++x) {
    const uint32_t v = src[x];
    out[3 * x] = static_cast<uint8_t>(v >> 16);
    out[3 * x + 1] = static_cast<uint8_t>(v >> 8);
    out[3 * x + 2] = static_cast<uint8_t>(v);
  }
}

// ARGB32 with transparency: PNG wants straight alpha. Rounded as cairo's
// writer rounds, so that cairo's reader, premultiplying again, gives back the
// same pixels.
void RowRgba(const uint32_t* src, int width, uint8_t* out) {
  for (int x = 0; x < width; ++x) {
    const uint32_t v = src[x];
    const uint32_t alpha = v >> 24;
    uint8_t* o = out + 4 * x;
    if (alpha == 0) {
      o[0] = o[1] = o[2] = o[3] = 0;
      continue;
    }
    o[0] = static_cast<uint8_t>((((v >> 16) & 255) * 255 + alpha / 2) / alpha);
    o[1] = static_cast<uint8_t>((((v >> 8) & 255) * 255 + alpha / 2) / alpha);
    o[2] = static_cast<uint8_t>(((v & 255) * 255 + alpha / 2) / alpha);
    o[3] = static_cast<uint8_t>(alpha);
  }
}

}  // namespace

std::string EncodePng(cairo_surface_t* surface) {
  const CairoApi* C = LoadCairo();
  if (C == nullptr) return {};
  if (C->cairo_surface_status(surface) != CAIRO_STATUS_SUCCESS) return {};
  if (C->cairo_surface_get_type(surface) != CAIRO_SURFACE_TYPE_IMAGE) return CairoPng(surface);
  C->cairo_surface_flush(surface);
  const cairo_format_t format = C->cairo_image_surface_get_format(surface);
  const unsigned char* data = C->cairo_image_surface_get_data(surface);
  if (data == nullptr || (format != CAIRO_FORMAT_ARGB32 && format != CAIRO_FORMAT_RGB24))
    return CairoPng(surface);
  const int width = C->cairo_image_surface_get_width(surface);
  const int height = C->cairo_image_surface_get_height(surface);
  const size_t stride = static_cast<size_t>(C->cairo_image_surface_get_stride(surface));
  if (width <= 0 || height <= 0) return {};  // PNG has no empty images
  auto row = [&](int y) { return reinterpret_cast<const uint32_t*>(data + y * stride); };

  // The plot paints a white background first, so its ARGB32 surface is
  // opaque: RGB is 3/4 of the bytes to compress, and is what cairo writes too.
  bool opaque = true;
  if (format == CAIRO_FORMAT_ARGB32) {
    for (int y = 0; y < height && opaque; ++y) {
      uint32_t all = ~uint32_t{0};
      for (int x = 0; x < width; ++x) all &= row(y)[x];
      opaque = (all >> 24) == 255;
    }
  }
  const size_t n = static_cast<size_t>(width) * (opaque ? 3 : 4);

  std::string png("\x89PNG\r\n\x1a\n", 8);
  std::string ihdr;
  PutBe32(ihdr, static_cast<uint32_t>(width));
  PutBe32(ihdr, static_cast<uint32_t>(height));
  // Bit depth 8, colour type RGB (2) or RGBA (6), deflate, filters of method
  // 0, no interlace.
  ihdr += {8, static_cast<char>(opaque ? 2 : 6), 0, 0, 0};
  PutChunk(png, "IHDR", ihdr.data(), ihdr.size());

  // Raw deflate with the zlib header and adler32 trailer written here, so
  // that repeated rows need no checksum pass.
  z_stream z{};
  if (deflateInit2(&z, kLevel, Z_DEFLATED, -15, kMemLevel, Z_DEFAULT_STRATEGY) != Z_OK) return {};
  struct End {
    z_stream* z;
    ~End() { deflateEnd(z); }
  } end{&z};
  std::string zdata(size_t{1} << 16, '\0');
  std::memcpy(zdata.data(), kZlibHeader, 2);
  size_t used = 2;
  auto feed = [&](const uint8_t* in, size_t size, int flush) {
    z.next_in = const_cast<Bytef*>(in);
    z.avail_in = static_cast<uInt>(size);
    for (;;) {
      if (used == zdata.size()) zdata.resize(zdata.size() * 2);
      const size_t room = std::min<size_t>(zdata.size() - used, UINT_MAX);
      z.next_out = reinterpret_cast<Bytef*>(zdata.data() + used);
      z.avail_out = static_cast<uInt>(room);
      const int rc = deflate(&z, flush);
      used += room - z.avail_out;
      if (rc == Z_STREAM_ERROR) return false;
      // Without flushing, room left over means all input was taken.
      if (flush == Z_FINISH ? rc == Z_STREAM_END : z.avail_out != 0) return true;
    }
  };

  // Every row is Up-filtered (the first against zeros, as PNG defines it).
  // Converting a row, then subtracting, measured faster than doing both in
  // one loop from the surface's words.
  std::vector<uint8_t> filtered(n + 1), cur(n), prev(n, 0), zero_row(n + 1, 0);
  filtered[0] = zero_row[0] = kFilterUp;
  const uLong zero_row_adler = adler32(1, zero_row.data(), static_cast<uInt>(n + 1));
  uLong adler = 1;
  for (int y = 0; y < height; ++y) {
    const uint8_t* out = filtered.data();
    if (y > 0 && std::memcmp(row(y), row(y - 1), 4 * static_cast<size_t>(width)) == 0) {
      // Same pixels as the row above (and `prev` still holds them).
      out = zero_row.data();
      adler = adler32_combine(adler, zero_row_adler, static_cast<z_off_t>(n + 1));
    } else {
      if (opaque) {
        RowRgb(row(y), width, cur.data());
      } else {
        RowRgba(row(y), width, cur.data());
      }
      for (size_t i = 0; i < n; ++i) filtered[i + 1] = static_cast<uint8_t>(cur[i] - prev[i]);
      cur.swap(prev);
      adler = adler32(adler, filtered.data(), static_cast<uInt>(n + 1));
    }
    if (!feed(out, n + 1, Z_NO_FLUSH)) return {};
  }
  if (!feed(nullptr, 0, Z_FINISH)) return {};
  zdata.resize(used);
  PutBe32(zdata, static_cast<uint32_t>(adler));

  png.reserve(png.size() + zdata.size() + 12 * (zdata.size() / kMaxIdat + 2));
  for (size_t at = 0; at < zdata.size(); at += kMaxIdat) {
    PutChunk(png, "IDAT", zdata.data() + at, std::min(kMaxIdat, zdata.size() - at));
  }
  PutChunk(png, "IEND", "", 0);
  return png;
}

}  // namespace memtl

// PNG encoding of 32-bit pixels (see png.h).
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

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstddef>
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

// Opaque ARGB32 or RGB24: R, G, B are the low three bytes of a native-endian
// word.
void RowRgb(const uint32_t* src, int width, uint8_t* out) {
  for (ptrdiff_t x = 0; x < width; ++x) {
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
    uint8_t* o = out + ptrdiff_t{4} * x;
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

struct PngRowEncoder::State {
  int width = 0, height = 0, rows = 0;
  bool opaque = true, failed = false;
  size_t n = 0;  // bytes per converted row
  z_stream z{};
  bool z_live = false;
  std::string zdata;
  size_t used = 2;
  std::vector<uint8_t> filtered, cur, prev, zero_row;
  std::vector<uint32_t> last_pixels;  // the previous row as given
  uLong zero_row_adler = 0, adler = 1;

  ~State() {
    if (z_live) deflateEnd(&z);
  }
  bool Feed(const uint8_t* in, size_t size, int flush) {
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
  }
};

PngRowEncoder::PngRowEncoder(int width, int height, bool opaque) : s_(new State) {
  State& s = *s_;
  s.width = width;
  s.height = height;
  s.opaque = opaque;
  if (width <= 0 || height <= 0) {  // PNG has no empty images
    s.failed = true;
    return;
  }
  // Raw deflate with the zlib header and adler32 trailer written here, so
  // that repeated rows need no checksum pass.
  if (deflateInit2(&s.z, kLevel, Z_DEFLATED, -15, kMemLevel, Z_DEFAULT_STRATEGY) != Z_OK) {
    s.failed = true;
    return;
  }
  s.z_live = true;
  s.zdata.assign(size_t{1} << 16, '\0');
  std::memcpy(s.zdata.data(), kZlibHeader, 2);
  s.n = static_cast<size_t>(width) * (opaque ? 3 : 4);
  // Every row is Up-filtered (the first against zeros, as PNG defines it).
  // Converting a row, then subtracting, measured faster than doing both in
  // one loop from the surface's words.
  s.filtered.assign(s.n + 1, 0);
  s.cur.assign(s.n, 0);
  s.prev.assign(s.n, 0);
  s.zero_row.assign(s.n + 1, 0);
  s.filtered[0] = s.zero_row[0] = kFilterUp;
  s.zero_row_adler = adler32(1, s.zero_row.data(), static_cast<uInt>(s.n + 1));
  s.last_pixels.assign(static_cast<size_t>(width), 0);
}

PngRowEncoder::~PngRowEncoder() = default;

void PngRowEncoder::AddRow(const uint32_t* pixels) {
  State& s = *s_;
  if (s.failed) return;
  if (s.rows == s.height) {
    s.failed = true;  // more rows than the header says
    return;
  }
  const size_t width = static_cast<size_t>(s.width);
  const uint8_t* out = s.filtered.data();
  if (s.rows > 0 && std::memcmp(pixels, s.last_pixels.data(), 4 * width) == 0) {
    // Same pixels as the row above (and `prev` still holds them).
    out = s.zero_row.data();
    s.adler = adler32_combine(s.adler, s.zero_row_adler, static_cast<z_off_t>(s.n + 1));
  } else {
    if (s.opaque) {
      RowRgb(pixels, s.width, s.cur.data());
    } else {
      RowRgba(pixels, s.width, s.cur.data());
    }
    for (size_t i = 0; i < s.n; ++i) s.filtered[i + 1] = static_cast<uint8_t>(s.cur[i] - s.prev[i]);
    s.cur.swap(s.prev);
    s.adler = adler32(s.adler, s.filtered.data(), static_cast<uInt>(s.n + 1));
    std::memcpy(s.last_pixels.data(), pixels, 4 * width);
  }
  if (!s.Feed(out, s.n + 1, Z_NO_FLUSH)) s.failed = true;
  ++s.rows;
}

std::string PngRowEncoder::Finish() {
  State& s = *s_;
  if (s.failed || s.rows != s.height || !s.Feed(nullptr, 0, Z_FINISH)) return {};
  s.zdata.resize(s.used);
  PutBe32(s.zdata, static_cast<uint32_t>(s.adler));

  std::string png("\x89PNG\r\n\x1a\n", 8);
  std::string ihdr;
  PutBe32(ihdr, static_cast<uint32_t>(s.width));
  PutBe32(ihdr, static_cast<uint32_t>(s.height));
  // Bit depth 8, colour type RGB (2) or RGBA (6), deflate, filters of method
  // 0, no interlace.
  ihdr += {8, static_cast<char>(s.opaque ? 2 : 6), 0, 0, 0};
  PutChunk(png, "IHDR", ihdr.data(), ihdr.size());
  png.reserve(png.size() + s.zdata.size() + 12 * (s.zdata.size() / kMaxIdat + 2));
  for (size_t at = 0; at < s.zdata.size(); at += kMaxIdat) {
    PutChunk(png, "IDAT", s.zdata.data() + at, std::min(kMaxIdat, s.zdata.size() - at));
  }
  PutChunk(png, "IEND", "", 0);
  return png;
}

std::string EncodePng(const uint32_t* pixels, int width, int height, size_t stride,
                      PixelFormat format) {
  if (width <= 0 || height <= 0) return {};  // PNG has no empty images
  auto row = [&](int y) { return pixels + static_cast<size_t>(y) * stride; };

  // An opaque image is written as RGB: 3/4 of the bytes to compress, and
  // what cairo writes too.
  bool opaque = true;
  if (format == PixelFormat::kArgb32) {
    for (int y = 0; y < height && opaque; ++y) {
      uint32_t all = ~uint32_t{0};
      for (int x = 0; x < width; ++x) all &= row(y)[x];
      opaque = (all >> 24) == 255;
    }
  }
  PngRowEncoder encoder(width, height, opaque);
  for (int y = 0; y < height; ++y) encoder.AddRow(row(y));
  return encoder.Finish();
}

}  // namespace memtl

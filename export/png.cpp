// PNG encoding of 32-bit pixels (see png.h), by libpng.
//
// The settings are those that made the plot quick to encode, timed on the
// plots of fixtures/ and build/bench/ (1600x960, opaque; docs/performance.md
// has the figures): every row filtered Up, zlib level 2, memLevel 6. Half of
// a plot's rows repeat the row above (the flat areas between steps); Up
// turns them into zeros, which deflate collapses into long matches. libpng's
// default (adaptive filters, level 6) takes about five times as long for a
// file a third smaller. Level 2 takes the time of level 1 and is a little
// smaller; from level 4 on zlib's lazy matcher takes twice the time.
// memLevel 6 rather than 8: zlib rewrites its hash table every 32 KiB of
// input, and a smaller one is quicker to rewrite.
#include "export/png.h"

#include <png.h>
#include <zlib.h>

#include <csetjmp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

namespace memtl {

namespace {

constexpr int kLevel = 2;
constexpr int kMemLevel = 6;
// libpng's zlib output buffer, and so its IDAT chunk size (8 KiB by
// default): fewer deflate calls and chunks.
constexpr size_t kIdatBytes = size_t{1} << 20;

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

// libpng reports an error by calling this, which must not return: it jumps
// back to the setjmp of the call that failed (below). The default handler
// would also print to stderr; memtl's caller reports the failure instead.
[[noreturn]] void OnError(png_structp png, png_const_charp /*message*/) { png_longjmp(png, 1); }
void OnWarning(png_structp /*png*/, png_const_charp /*message*/) {}

// The output callback. An exception must not unwind through libpng's C
// frames, so running out of memory becomes a libpng error.
void Append(png_structp png, png_bytep data, size_t size) {
  auto* out = static_cast<std::string*>(png_get_io_ptr(png));
  bool ok = true;
  try {
    out->append(reinterpret_cast<const char*>(data), size);
  } catch (const std::bad_alloc&) {
    ok = false;
  }
  if (!ok) png_error(png, "out of memory");
}
void Flush(png_structp /*png*/) {}

// Each of the next three runs libpng calls under their own setjmp, and
// returns false when one of them failed. A longjmp skips destructors, so
// these functions hold no object that has one, and the libpng calls make
// no C++ object that would be skipped.
bool Start(png_structp png, png_infop info, std::string* out, int width, int height, bool opaque) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_write_fn(png, out, Append, Flush);
  // Bit depth 8, RGB or RGBA, no interlace.
  png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8,
               opaque ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_RGBA, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_UP);
  png_set_compression_level(png, kLevel);
  png_set_compression_mem_level(png, kMemLevel);
  png_set_compression_strategy(png, Z_DEFAULT_STRATEGY);
  png_set_compression_buffer_size(png, kIdatBytes);
  png_write_info(png, info);
  return true;
}

bool WriteRow(png_structp png, const uint8_t* row) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_write_row(png, row);
  return true;
}

bool End(png_structp png, png_infop info) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_write_end(png, info);
  return true;
}

}  // namespace

struct PngRowEncoder::State {
  int width = 0, height = 0, rows = 0;
  bool opaque = true, failed = false;
  png_structp png = nullptr;
  png_infop info = nullptr;
  std::string out;
  std::vector<uint8_t> row;           // the last row converted
  std::vector<uint32_t> last_pixels;  // that row as given

  ~State() {
    if (png != nullptr) png_destroy_write_struct(&png, &info);
  }
};

PngRowEncoder::PngRowEncoder(int width, int height, bool opaque) : s_(new State) {
  State& s = *s_;
  s.width = width;
  s.height = height;
  s.opaque = opaque;
  s.failed = true;
  if (width <= 0 || height <= 0) return;  // PNG has no empty images
  s.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, OnError, OnWarning);
  if (s.png == nullptr) return;
  s.info = png_create_info_struct(s.png);
  if (s.info == nullptr) return;
  s.row.assign(static_cast<size_t>(width) * (opaque ? 3 : 4), 0);
  s.last_pixels.assign(static_cast<size_t>(width), 0);
  s.failed = !Start(s.png, s.info, &s.out, width, height, opaque);
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
  // A row that repeats the one above (half of a plot's) is not converted
  // again.
  if (s.rows == 0 || std::memcmp(pixels, s.last_pixels.data(), 4 * width) != 0) {
    if (s.opaque) {
      RowRgb(pixels, s.width, s.row.data());
    } else {
      RowRgba(pixels, s.width, s.row.data());
    }
    std::memcpy(s.last_pixels.data(), pixels, 4 * width);
  }
  s.failed = !WriteRow(s.png, s.row.data());
  ++s.rows;
}

std::string PngRowEncoder::Finish() {
  State& s = *s_;
  if (s.failed || s.rows != s.height || !End(s.png, s.info)) return {};
  return std::move(s.out);
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

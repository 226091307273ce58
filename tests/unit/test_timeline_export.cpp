// Timeline arithmetic and exports: PyTorch's time conversion, suffix
// dispatch, JSON layout, atomic writes and the PNG plot.
#include <cairo/cairo.h>
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/timeline/timeline.h"
#include "export/atomic_file.h"
#include "export/cairo_api.h"
#include "export/export.h"
#include "export/png.h"

using namespace memtl;

namespace {

// A PNG decoded by cairo's reader (libpng), which checks the CRCs and the
// zlib checksum; the caller destroys the surface.
cairo_surface_t* DecodePng(const std::string& png) {
  struct Reader {
    const std::string* data;
    size_t pos = 0;
  } reader{&png};
  return cairo_image_surface_create_from_png_stream(
      [](void* closure, unsigned char* out, unsigned int length) {
        auto* r = static_cast<Reader*>(closure);
        if (r->pos + length > r->data->size()) return CAIRO_STATUS_READ_ERROR;
        std::memcpy(out, r->data->data() + r->pos, length);
        r->pos += length;
        return CAIRO_STATUS_SUCCESS;
      },
      &reader);
}

uint32_t& Pixel(cairo_surface_t* s, int x, int y) {
  return *reinterpret_cast<uint32_t*>(cairo_image_surface_get_data(s) +
                                      y * cairo_image_surface_get_stride(s) + 4 * x);
}

}  // namespace

TEST_CASE("timeline: int(t / 1000) as Python computes it") {
  // Values checked with CPython: true division rounds the exact quotient to
  // a double before int() truncates.
  CHECK(PyTrueDivTrunc1000(1798932747939518927) == 1798932747939519);
  CHECK(PyTrueDivTrunc1000(1772172843949926903) == 1772172843949927);
  CHECK(PyTrueDivTrunc1000(1752908118019552920) == 1752908118019553);
  CHECK(PyTrueDivTrunc1000(1795364542271315257) == 1795364542271315);
  CHECK(PyTrueDivTrunc1000(9007199254740993000) == 9007199254740992);
  CHECK(PyTrueDivTrunc1000(999) == 0);
  CHECK(PyTrueDivTrunc1000(1000) == 1);
  CHECK(PyTrueDivTrunc1000(123456789) == 123456);
  CHECK(PyTrueDivTrunc1000(0) == 0);
}

TEST_CASE("export: the output suffix picks the format as PyTorch does") {
  CHECK(FormatForPath("a.html").value() == ExportFormat::kHtml);
  CHECK(FormatForPath("a.raw.json.gz").value() == ExportFormat::kRawJsonGz);
  CHECK(FormatForPath("a_raw.json.gz").value() ==
        ExportFormat::kRawJsonGz);  // PyTorch: endswith("raw.json.gz")
  CHECK(FormatForPath("a.json.gz").value() == ExportFormat::kSizesJsonGz);
  CHECK(FormatForPath("a.gz").value() == ExportFormat::kSizesJsonGz);
  CHECK(FormatForPath("a.json").value() == ExportFormat::kSizesJson);
  CHECK_FALSE(FormatForPath("a.txt").ok());
  CHECK(FormatForPath("a.txt").status().message().find("a.txt: unknown output format") == 0);
}

TEST_CASE("export: JSON is laid out as Python's json.dump writes it") {
  CoalescedTimeline c;
  c.times = {5, 7};
  c.sizes = {{0, 1, 2, 3, 4, 5, 6, 7, 8}, {0, 0, 0, 0, 0, 0, 0, 0, -1}};
  CHECK(SizesJson(c) == "[[5, 7], [[0, 1, 2, 3, 4, 5, 6, 7, 8], [0, 0, 0, 0, 0, 0, 0, 0, -1]]]");
  CHECK(SizesJson(CoalescedTimeline{}) == "[[], []]");
  std::vector<TimelineEvent> tl(2);
  tl[0].time = -1;
  tl[0].action = Action::kPreexisting;
  tl[0].bytes = 16;
  tl[1].time = 20;
  tl[1].action = Action::kIncrementVersion;
  tl[1].bytes = 8;
  CategoryDict cats;
  CHECK(RawJson(tl, cats, 0) == "[[-1, 1, 16, 7], [20, 3, -8, 7], [20, 3, 8, 7]]");
  CHECK(RawJson(tl, cats, 1) == "[]");
}

TEST_CASE("timeline: the nearly-sorted sort is PyTorch's stable sort by (time, action)") {
  auto by_time_action = [](const TimelineEvent& a, const TimelineEvent& b) {
    return a.time != b.time ? a.time < b.time : a.action < b.action;
  };
  std::mt19937 rng(7);
  for (int shape = 0; shape < 3; ++shape) {
    std::vector<TimelineEvent> tl(5000);
    for (size_t i = 0; i < tl.size(); ++i) {
      // 0: nearly sorted (local disorder), 1: random with many ties, 2: reversed
      const int64_t t = shape == 0   ? static_cast<int64_t>(i / 4) + static_cast<int64_t>(rng() % 3)
                        : shape == 1 ? static_cast<int64_t>(rng() % 50)
                                     : static_cast<int64_t>(tl.size() - i);
      tl[i].time = t;
      tl[i].action = static_cast<Action>(1 + rng() % 4);
      tl[i].bytes = static_cast<int64_t>(i);  // the insertion order, to check stability
    }
    auto expected = tl;
    std::stable_sort(expected.begin(), expected.end(), by_time_action);
    SortNearlySorted(tl.data(), tl.data() + tl.size());
    for (size_t i = 0; i < tl.size(); ++i) {
      REQUIRE(tl[i].bytes == expected[i].bytes);
    }
  }
}

TEST_CASE("timeline: coalescing moves pre-existing memory to the first time") {
  std::vector<TimelineEvent> tl(3);
  tl[0] = {-1, Action::kPreexisting, false, {}, 0, 0, 100};
  tl[1] = {2'000'000, Action::kCreate, false, {}, 0, 0, 50};
  tl[2] = {3'000'000, Action::kDestroy, false, {}, 0, 0, 100};
  CategoryDict cats;
  const auto c = Coalesce(tl, cats, 0);
  CHECK(c.times == std::vector<int64_t>{2000, 2000, 3000});
  REQUIRE(c.sizes.size() == 3);
  CHECK(c.sizes[0][8] == 100);
  CHECK(c.sizes[1][8] == 150);
  CHECK(c.sizes[2][8] == 50);
}

TEST_CASE("export: atomic writes leave no partial file") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("memtl_atomic_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "out.json").string();
  {
    auto f = AtomicFile::Create(path, false);
    REQUIRE(f.ok());
    std::unique_ptr<AtomicFile> file(f.value());
    REQUIRE(file->Write("partial").ok());
    // Destroyed without Commit: as if the run failed.
  }
  CHECK_FALSE(fs::exists(path));
  CHECK(fs::is_empty(dir));
  REQUIRE(WriteFileAtomically(path, "[[], []]", false).ok());
  std::ifstream in(path);
  std::string text;
  std::getline(in, text);
  CHECK(text == "[[], []]");
  CHECK_FALSE(WriteFileAtomically((dir / "missing" / "x.json").string(), "x", false).ok());
  fs::remove_all(dir);
}

TEST_CASE("export: the plot is a PNG of the requested size and is not blank") {
  CoalescedTimeline c;
  for (int i = 0; i < 5000; ++i) {
    c.times.push_back(i);
    std::array<int64_t, 9> row{};
    row[1] = 1 << 20;
    row[6] = (i % 1000) * (1 << 17);
    row[5] =
        i == 2500 ? (1 << 30) : 0;  // a one-sample activation spike must survive column reduction
    c.sizes.push_back(row);
  }
  PlotOptions o;
  o.title = "Max memory allocated: 1.00 GiB \nMax memory reserved: 2.00 GiB";
  const std::string png = RenderPlotPng(c, o);
  REQUIRE(png.size() > 1000);
  CHECK(png.substr(1, 3) == "PNG");
  auto be32 = [&](size_t at) {
    return (static_cast<uint32_t>(static_cast<unsigned char>(png[at])) << 24) |
           (static_cast<unsigned char>(png[at + 1]) << 16) |
           (static_cast<unsigned char>(png[at + 2]) << 8) | static_cast<unsigned char>(png[at + 3]);
  };
  CHECK(be32(16) == 1600);  // IHDR width
  CHECK(be32(20) == 960);   // IHDR height

  // Decode it and look at the pixels: coloured areas, and the spike's column
  // reaches the top part of the plot.
  cairo_surface_t* img = DecodePng(png);
  REQUIRE(cairo_surface_status(img) == CAIRO_STATUS_SUCCESS);
  const int w = cairo_image_surface_get_width(img), h = cairo_image_surface_get_height(img);
  const int stride = cairo_image_surface_get_stride(img);
  const unsigned char* px = cairo_image_surface_get_data(img);
  long coloured = 0;
  int top_coloured_row = h;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const uint32_t v = *reinterpret_cast<const uint32_t*>(px + y * stride + 4 * x);
      const int r = (v >> 16) & 255, g = (v >> 8) & 255, b = v & 255;
      const bool grey = std::abs(r - g) < 12 && std::abs(g - b) < 12;
      if (!grey) {
        ++coloured;
        if (x > w * 0.45 && x < w * 0.55) top_coloured_row = std::min(top_coloured_row, y);
      }
    }
  }
  cairo_surface_destroy(img);
  CHECK(coloured > 5000);
  // The spike is drawn: its column is coloured in the top third.
  CHECK(top_coloured_row < h / 3);
  // Rendering is deterministic, and so is the encoder: same bytes again.
  CHECK(RenderPlotPng(c, o) == png);
  // Drawing in bands of rows gives the pixels of drawing the figure at once
  // (whole-row shifts only), whatever the band height.
  for (int band : {960, 7, 100, 1000}) {
    PlotOptions b = o;
    b.band_rows = band;
    CHECK_MESSAGE(RenderPlotPng(c, b) == png, "band_rows " << band);
  }
  CHECK(Base64("Man") == "TWFu");
  CHECK(Base64("Ma") == "TWE=");
  CHECK(Base64("M") == "TQ==");
}

TEST_CASE("export: a column's peak does not hold past its column, and the last row is drawn") {
  // 0, a 1 GiB spike 1 us long, 0 for 0.95 s, then 0.5 GiB: the spike's
  // pixel column shows it, the time between shows nothing (memory was
  // freed within the spike's column), and the last row is drawn too.
  CoalescedTimeline c;
  for (auto [t, bytes] :
       {std::pair<int64_t, int64_t>{0, 0}, {1, 1 << 30}, {2, 0}, {950000, 1 << 29}}) {
    std::array<int64_t, 9> row{};
    row[4] = bytes;
    c.times.push_back(t);
    c.sizes.push_back(row);
  }
  cairo_surface_t* img = DecodePng(RenderPlotPng(c, PlotOptions{}));
  REQUIRE(cairo_surface_status(img) == CAIRO_STATUS_SUCCESS);
  const int w = cairo_image_surface_get_width(img), h = cairo_image_surface_get_height(img);
  const int stride = cairo_image_surface_get_stride(img);
  const unsigned char* px = cairo_image_surface_get_data(img);
  // Rows of the column that are coloured (not white or grey).
  auto coloured_rows = [&](int x) {
    int n = 0;
    for (int y = 0; y < h; ++y) {
      const uint32_t v = *reinterpret_cast<const uint32_t*>(px + y * stride + 4 * x);
      const int r = (v >> 16) & 255, g = (v >> 8) & 255, b = v & 255;
      if (std::abs(r - g) >= 12 || std::abs(g - b) >= 12) ++n;
    }
    return n;
  };
  const int left = static_cast<int>(0.08 * w), right = static_cast<int>(0.97 * w);
  const int axes = static_cast<int>(0.76 * h);
  CHECK(coloured_rows(left) > axes / 2);                            // the spike
  CHECK(coloured_rows((left + right) / 2) == 0);                    // freed in between
  const int last = left + static_cast<int>((right - left) * 0.95);  // 950 ms of an axis to 1 s
  int last_coloured = 0;
  for (int x = last - 3; x <= last + 3; ++x)
    last_coloured = std::max(last_coloured, coloured_rows(x));
  CHECK(last_coloured > axes / 5);  // the last row, 0.5 GiB
  cairo_surface_destroy(img);
}

TEST_CASE("export: the plot's font is opened from its file") {
  // scripts/deps.sh installs fonts-dejavu-core; with its file the plot's
  // text does not go through fontconfig (cairo_api.h).
  const CairoApi* C = LoadCairo();
  REQUIRE(C != nullptr);
  if (access(kPlotFontFile, R_OK) != 0) return;
  REQUIRE(C->plot_font != nullptr);
  CHECK((C->cairo_set_font_face != nullptr));
}

TEST_CASE("export: EncodePng gives back the surface's pixels, the same bytes every time") {
  // The colour type in IHDR: 2 RGB, 6 RGBA.
  auto colour_type = [](const std::string& png) { return png.size() > 25 ? png[25] : -1; };
  auto round_trip = [](cairo_surface_t* s, uint32_t mask) {
    const std::string png = EncodePng(s);
    REQUIRE(png.size() > 8);
    CHECK(png.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
    CHECK(EncodePng(s) == png);
    cairo_surface_t* img = DecodePng(png);
    REQUIRE(cairo_surface_status(img) == CAIRO_STATUS_SUCCESS);
    const int w = cairo_image_surface_get_width(s), h = cairo_image_surface_get_height(s);
    REQUIRE(cairo_image_surface_get_width(img) == w);
    REQUIRE(cairo_image_surface_get_height(img) == h);
    long differing = 0;
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) differing += ((Pixel(s, x, y) ^ Pixel(img, x, y)) & mask) != 0;
    }
    CHECK(differing == 0);
    cairo_surface_destroy(img);
    return png;
  };
  // A few flat colours in bands (runs of repeated rows), a row that differs
  // from its neighbours, and a checkered block, as on the plot.
  auto paint = [](cairo_surface_t* s) {
    const uint32_t colours[] = {0xffffffff, 0xff006400, 0xffdaa520, 0xff9370db, 0xff000000};
    const int w = cairo_image_surface_get_width(s), h = cairo_image_surface_get_height(s);
    cairo_surface_flush(s);
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        uint32_t v = colours[(x / 9 + y / 6) % 5];
        if (y == 13) v = colours[x % 5];
        if (x >= 20 && x < 30 && y >= 20 && y < 30) v = colours[(x + y) % 2 * 4];
        Pixel(s, x, y) = v;
      }
    }
    cairo_surface_mark_dirty(s);
  };

  SUBCASE("opaque ARGB32, as the plot draws, is written as RGB") {
    cairo_surface_t* s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 37, 41);
    paint(s);
    const std::string png = round_trip(s, 0xffffffff);
    CHECK(colour_type(png) == 2);
    // A second surface with the same pixels gives the same bytes.
    cairo_surface_t* again = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 37, 41);
    paint(again);
    CHECK(EncodePng(again) == png);
    cairo_surface_destroy(again);
    cairo_surface_destroy(s);
  }
  SUBCASE("RGB24 ignores the unused byte") {
    cairo_surface_t* s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 37, 41);
    paint(s);
    const std::string png = EncodePng(s);
    // Row 31 now has the same colours as row 30 but not the same words.
    cairo_surface_flush(s);
    for (int x = 0; x < 37; x += 2) Pixel(s, x, 31) &= 0x00ffffff;
    cairo_surface_mark_dirty(s);
    CHECK(round_trip(s, 0x00ffffff) == png);
    CHECK(colour_type(png) == 2);
    cairo_surface_destroy(s);
  }
  SUBCASE("translucent ARGB32: every premultiplied value survives cairo's round trip") {
    // Column c, row a: alpha a with channels c, a - c and c / 2 (all <= a).
    cairo_surface_t* s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 256, 256);
    cairo_surface_flush(s);
    for (uint32_t a = 0; a < 256; ++a) {
      for (uint32_t c = 0; c < 256; ++c) {
        const uint32_t v = std::min(c, a);
        Pixel(s, static_cast<int>(c), static_cast<int>(a)) =
            (a << 24) | (v << 16) | ((a - v) << 8) | (v / 2);
      }
    }
    cairo_surface_mark_dirty(s);
    const std::string png = round_trip(s, 0xffffffff);
    CHECK(colour_type(png) == 6);
    cairo_surface_destroy(s);
  }
}

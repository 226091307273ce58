// Timeline arithmetic and exports: PyTorch's time conversion, suffix
// dispatch, JSON layout and the PNG plot (atomic writes: test_atomic_file.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "core/timeline/timeline.h"
#include "export/export.h"
#include "export/png.h"
#include "export/raster.h"
#include "tests/unit/png_decode.h"

using namespace memtl;

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
  // Where the quotient has 52, 51 or 53 bits (a grid of 1/2, 1/4 or 1 above
  // q): ties round up, or to the even q, and the quotients of 54 bits round
  // to a multiple of 2, half to even.
  CHECK(PyTrueDivTrunc1000(2251799813685249750) == 2251799813685250);
  CHECK(PyTrueDivTrunc1000(2251799813685249749) == 2251799813685249);
  CHECK(PyTrueDivTrunc1000(1125899906842627875) == 1125899906842628);
  CHECK(PyTrueDivTrunc1000(1125899906842627874) == 1125899906842627);
  CHECK(PyTrueDivTrunc1000(4503599627370497500) == 4503599627370498);
  CHECK(PyTrueDivTrunc1000(4503599627370498500) == 4503599627370498);
  CHECK(PyTrueDivTrunc1000(9007199254740992500) == 9007199254740992);
  CHECK(PyTrueDivTrunc1000(9007199254740993500) == 9007199254740994);
  CHECK(PyTrueDivTrunc1000(9007199254740991999) == 9007199254740992);
  CHECK(PyTrueDivTrunc1000(8999999999999999500) == 9000000000000000);
  CHECK(PyTrueDivTrunc1000(8999999999999998500) == 8999999999999998);
  CHECK(PyTrueDivTrunc1000(9007199254740992) == 9007199254740);
  CHECK(PyTrueDivTrunc1000(9223372036854775807) == 9223372036854776);
  CHECK(PyTrueDivTrunc1000(-2251799813685249750) == -2251799813685250);
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
      REQUIRE(int64_t{tl[i].bytes} == int64_t{expected[i].bytes});
    }
  }
}

TEST_CASE("timeline: coalescing moves pre-existing memory to the first time") {
  auto untracked = [](int64_t time, Action action, int64_t bytes) {
    TimelineEvent e;
    e.time = time;
    e.action = action;
    e.bytes = bytes;
    return e;
  };
  const std::vector<TimelineEvent> tl = {untracked(-1, Action::kPreexisting, 100),
                                         untracked(2'000'000, Action::kCreate, 50),
                                         untracked(3'000'000, Action::kDestroy, 100)};
  CategoryDict cats;
  const auto c = Coalesce(tl, cats, 0);
  CHECK(c.times == std::vector<int64_t>{2000, 2000, 3000});
  REQUIRE(c.sizes.size() == 3);
  CHECK(c.sizes[0][8] == 100);
  CHECK(c.sizes[1][8] == 150);
  CHECK(c.sizes[2][8] == 50);
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
  const Image img = DecodePng(png);
  REQUIRE(img.width == 1600);
  const int w = img.width, h = img.height;
  long coloured = 0;
  int top_coloured_row = h;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const uint32_t v = img.at(x, y);
      const int r = (v >> 16) & 255, g = (v >> 8) & 255, b = v & 255;
      const bool grey = std::abs(r - g) < 12 && std::abs(g - b) < 12;
      if (!grey) {
        ++coloured;
        if (x > w * 0.45 && x < w * 0.55) top_coloured_row = std::min(top_coloured_row, y);
      }
    }
  }
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
  const Image img = DecodePng(RenderPlotPng(c, PlotOptions{}));
  REQUIRE(img.width == 1600);
  const int w = img.width, h = img.height;
  // Rows of the column that are coloured (not white or grey).
  auto coloured_rows = [&](int x) {
    int n = 0;
    for (int y = 0; y < h; ++y) {
      const uint32_t v = img.at(x, y);
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
}

TEST_CASE("export: EncodePng gives back the pixels, the same bytes every time") {
  // The colour type in IHDR: 2 RGB, 6 RGBA.
  auto colour_type = [](const std::string& png) { return png.size() > 25 ? png[25] : -1; };
  auto encode = [](const Image& s, PixelFormat f) {
    return EncodePng(s.px.data(), s.width, s.height, static_cast<size_t>(s.width), f);
  };
  auto round_trip = [&](const Image& s, PixelFormat f, uint32_t mask) {
    const std::string png = encode(s, f);
    REQUIRE(png.size() > 8);
    CHECK(png.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
    CHECK(encode(s, f) == png);
    const Image img = DecodePng(png);
    REQUIRE(img.width == s.width);
    REQUIRE(img.height == s.height);
    long differing = 0;
    for (int y = 0; y < s.height; ++y) {
      for (int x = 0; x < s.width; ++x) {
        // A format without alpha decodes as opaque.
        const uint32_t want = f == PixelFormat::kRgb24 ? s.at(x, y) | 0xff000000u : s.at(x, y);
        differing += ((want ^ img.at(x, y)) & mask) != 0;
      }
    }
    CHECK(differing == 0);
    return png;
  };
  auto blank = [](int w, int h) {
    Image s;
    s.width = w;
    s.height = h;
    s.px.assign(static_cast<size_t>(w) * h, 0);
    return s;
  };
  // A few flat colours in bands (runs of repeated rows), a row that differs
  // from its neighbours, and a checkered block, as on the plot.
  auto paint = [](Image& s) {
    const uint32_t colours[] = {0xffffffff, 0xff006400, 0xffdaa520, 0xff9370db, 0xff000000};
    for (int y = 0; y < s.height; ++y) {
      for (int x = 0; x < s.width; ++x) {
        uint32_t v = colours[(x / 9 + y / 6) % 5];
        if (y == 13) v = colours[x % 5];
        if (x >= 20 && x < 30 && y >= 20 && y < 30) v = colours[(x + y) % 2 * 4];
        s.at(x, y) = v;
      }
    }
  };

  SUBCASE("opaque ARGB32, as the plot draws, is written as RGB") {
    Image s = blank(37, 41);
    paint(s);
    const std::string png = round_trip(s, PixelFormat::kArgb32, 0xffffffff);
    CHECK(colour_type(png) == 2);
    // A row stride wider than the image gives the same bytes.
    std::vector<uint32_t> wide(static_cast<size_t>(50) * 41, 0x12345678u);
    for (int y = 0; y < 41; ++y)
      std::copy_n(&s.at(0, y), 37, wide.begin() + static_cast<ptrdiff_t>(y) * 50);
    CHECK(EncodePng(wide.data(), 37, 41, 50, PixelFormat::kArgb32) == png);
  }
  SUBCASE("RGB24 ignores the unused byte") {
    Image s = blank(37, 41);
    paint(s);
    const std::string png = encode(s, PixelFormat::kRgb24);
    // Row 31 now has the same colours as row 30 but not the same words.
    for (int x = 0; x < 37; x += 2) s.at(x, 31) &= 0x00ffffff;
    CHECK(round_trip(s, PixelFormat::kRgb24, 0x00ffffff) == png);
    CHECK(colour_type(png) == 2);
  }
  SUBCASE("translucent ARGB32: every premultiplied value survives a round trip") {
    // Column c, row a: alpha a with channels c, a - c and c / 2 (all <= a).
    Image s = blank(256, 256);
    for (uint32_t a = 0; a < 256; ++a) {
      for (uint32_t c = 0; c < 256; ++c) {
        const uint32_t v = std::min(c, a);
        s.at(static_cast<int>(c), static_cast<int>(a)) =
            (a << 24) | (v << 16) | ((a - v) << 8) | (v / 2);
      }
    }
    const std::string png = round_trip(s, PixelFormat::kArgb32, 0xffffffff);
    CHECK(colour_type(png) == 6);
  }
  SUBCASE("an empty image is refused") {
    CHECK(EncodePng(nullptr, 0, 5, 0, PixelFormat::kArgb32).empty());
  }
}

TEST_CASE("export: PngRowEncoder takes exactly the rows its header states") {
  const std::vector<uint32_t> row(9, 0xff336699u);
  auto encode = [&](int rows) {
    PngRowEncoder png(9, 4, /*opaque=*/true);
    for (int y = 0; y < rows; ++y) png.AddRow(row.data());
    return png.Finish();
  };
  CHECK(encode(3).empty());
  CHECK(encode(5).empty());
  const Image img = DecodePng(encode(4));
  REQUIRE(img.width == 9);
  REQUIRE(img.height == 4);
  CHECK(std::all_of(img.px.begin(), img.px.end(), [](uint32_t v) { return v == 0xff336699u; }));
}

TEST_CASE("raster: rectangles cover each pixel by the part of its area inside") {
  std::vector<uint32_t> px(static_cast<size_t>(8) * 6);
  Band b(px.data(), 8, 0, 6);
  b.Paint({1, 1, 1});
  CHECK(px[0] == 0xffffffffu);
  // Black over [1.5, 4) x [2, 3.25): half of column 1, a quarter of row 3.
  b.FillRect(1.5, 2, 4, 3.25, {0, 0, 0});
  auto grey = [&](int x, int y) {
    return static_cast<int>(px[static_cast<size_t>(y) * 8 + x] & 255);
  };
  CHECK(grey(0, 2) == 255);
  CHECK(grey(1, 2) == 127);  // 255 * (1 - 0.5), rounded
  CHECK(grey(2, 2) == 0);
  CHECK(grey(3, 2) == 0);
  CHECK(grey(4, 2) == 255);
  CHECK(grey(2, 3) == 191);  // a quarter covered
  CHECK(grey(1, 3) == 223);  // an eighth
  CHECK(grey(2, 1) == 255);
  CHECK(grey(2, 4) == 255);
  // Alpha scales the coverage: 0.7 of pure red over white.
  b.FillRect(6, 0, 7, 1, {1, 0, 0}, 0.7);
  CHECK(px[6] == 0xffff4c4cu);  // alpha 179 (0.7 of 255): 255 * 76 / 255
}

TEST_CASE("raster: an outline leaves the inside alone, and bands draw what the whole does") {
  auto draw = [](Band& b) {
    b.Paint({1, 1, 1});
    b.StrokeRect(2, 2, 17.5, 13, 1.2, {0, 0, 0});
    b.Text("0.5 GiB", 3, 7, 16, 0);
    b.TextUp("Memory", 10, 12, 16, 0.5);
  };
  std::vector<uint32_t> whole(20 * 16);
  Band all(whole.data(), 20, 0, 16);
  draw(all);
  // The pen is 1.2 wide on the edge at x = 2: [1.4, 2.6) is dark.
  CHECK((whole[5 * 20 + 1] & 255) == 102);  // 0.6 covered
  CHECK((whole[5 * 20 + 2] & 255) == 102);
  CHECK((whole[1 * 20 + 0] & 255) == 255);  // outside the outer edge
  for (int rows : {1, 3, 16}) {
    std::vector<uint32_t> banded(20 * 16);
    for (int y0 = 0; y0 < 16; y0 += rows) {
      Band b(banded.data() + y0 * 20, 20, y0, std::min(rows, 16 - y0));
      draw(b);
    }
    CHECK_MESSAGE(banded == whole, "bands of " << rows);
  }
}

TEST_CASE("raster: coordinates far outside the canvas, or NaN, draw nothing there") {
  std::vector<uint32_t> px(static_cast<size_t>(10) * 10);
  Band b(px.data(), 10, 0, 10);
  b.Paint({1, 1, 1});
  const std::vector<uint32_t> white = px;
  const double nan = std::nan("");
  b.FillRect(nan, 0, 5, 5, {0, 0, 0});
  b.FillRect(0, 0, 5, nan, {0, 0, 0});
  b.FillRect(1e300, 1e300, 2e300, 2e300, {0, 0, 0});
  b.StrokeRect(-1e300, -1e300, 1e300, 1e300, 1, {0, 0, 0});  // its edges are far away
  b.Text("Memory", 1e300, -1e300, 16, 0);
  b.TextUp("Memory", -1e300, nan, 16, 0.5);
  b.HLine(-1e300, 1e300, 1e9, 1, {0, 0, 0});
  CHECK(px == white);
  // A segment across the whole canvas far beyond its ends is drawn whole.
  b.HLine(-1e300, 1e300, 4.5, 1, {0, 0, 0});
  for (int x = 0; x < 10; ++x) CHECK(px[4 * 10 + static_cast<size_t>(x)] == 0xff000000u);
}

TEST_CASE("raster: text is drawn from the glyph table, upright and turned") {
  constexpr int kW = 120, kH = 140;
  std::vector<uint32_t> px(kW * kH);
  Band b(px.data(), kW, 0, kH);
  auto ink = [&](int x0, int y0, int x1, int y1) {  // dark pixels in [x0, x1) x [y0, y1)
    REQUIRE((0 <= x0 && x1 <= kW && 0 <= y0 && y1 <= kH));
    int n = 0;
    for (int y = y0; y < y1; ++y)
      for (int x = x0; x < x1; ++x) n += (px[static_cast<size_t>(y) * kW + x] & 255) < 128;
    return n;
  };
  b.Paint({1, 1, 1});
  const int w = Band::TextWidth("Time (ms)", 16);
  CHECK(w > 50);
  CHECK(w < 90);
  CHECK(Band::TextWidth("ii", 16) < Band::TextWidth("MM", 16));
  // Centred on (60, 20): ink within the text's box, none far from it.
  b.Text("Time (ms)", 60, 20, 16, 0.5);
  CHECK(ink(60 - w / 2 - 1, 8, 60 + w / 2 + 2, 30) > 60);
  CHECK(ink(0, 0, kW, 6) == 0);
  CHECK(ink(0, 32, kW, kH) == 0);
  // Turned: the same text reads upwards along x = 30, centred on y = 80.
  b.TextUp("Time (ms)", 30, 80, 16, 0.5);
  CHECK(ink(18, 80 - w / 2 - 2, 42, 80 + w / 2 + 2) > 60);
  CHECK(ink(0, 34, 16, kH) == 0);
  CHECK(ink(44, 34, kW, kH) == 0);
  // Bytes outside printable ASCII draw as '?'.
  CHECK(Band::TextWidth("\xc3\xa9", 16) == 2 * Band::TextWidth("?", 16));
}

// Times memtl's PNG encoder (export/png.cpp) on the plots of HTML reports
// that `memtl export F -o F.html` wrote: each plot is decoded (libpng), then
// encoded again, best of RUNS, and the decoded pixels compared. Built by
// hand against any png.cpp with the same interface, e.g. the hand-written
// encoder of commit 2178a56 (`git show 2178a56:export/png.cpp`), to compare
// encoders (docs/performance.md, "Libraries measured"):
//   g++ -std=c++20 -O3 -DNDEBUG -I. tests/bench/bench_png.cpp export/png.cpp
//       $(pkg-config --cflags --libs libpng) -lz -o /tmp/bench_png
//   /tmp/bench_png 15 REPORT.html...
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "export/png.h"
#include "tests/unit/png_decode.h"

namespace {

std::string FromBase64(std::string_view text) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (const char c : text) {
    int v = -1;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    if (c >= '0' && c <= '9') v = c - '0' + 52;
    if (c == '+') v = 62;
    if (c == '/') v = 63;
    if (v < 0) continue;
    acc = acc << 6 | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 255);
    }
  }
  return out;
}

// The plot's PNG in a report, or empty.
std::string PlotOf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string html = ss.str();
  const std::string marker = "data:image/png;base64,";
  const size_t at = html.find(marker);
  if (at == std::string::npos) return {};
  const size_t end = html.find('\'', at);
  if (end == std::string::npos) return {};
  return FromBase64(std::string_view(html).substr(at + marker.size(), end - at - marker.size()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s RUNS REPORT.html...\n", argv[0]);
    return 2;
  }
  const int runs = std::atoi(argv[1]);
  double sum_ms = 0, sum_bytes = 0;
  int plots = 0;
  std::printf("%-40s %9s %9s %10s\n", "plot", "ms(best)", "ms(med)", "bytes");
  for (int i = 2; i < argc; ++i) {
    const memtl::Image img = memtl::DecodePng(PlotOf(argv[i]));
    if (img.width == 0) {
      std::fprintf(stderr, "%s: no plot\n", argv[i]);
      return 1;
    }
    std::string png;
    std::vector<double> ms;
    for (int r = 0; r < runs; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      png = memtl::EncodePng(img.px.data(), img.width, img.height, static_cast<size_t>(img.width),
                             memtl::PixelFormat::kArgb32);
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    if (memtl::DecodePng(png).px != img.px) {
      std::fprintf(stderr, "%s: the encoded pixels differ\n", argv[i]);
      return 1;
    }
    std::sort(ms.begin(), ms.end());
    std::string name = argv[i];
    name = name.substr(name.rfind('/') + 1);
    std::printf("%-40s %9.2f %9.2f %10zu\n", name.c_str(), ms.front(), ms[ms.size() / 2],
                png.size());
    sum_ms += ms.front();
    sum_bytes += static_cast<double>(png.size());
    ++plots;
  }
  std::printf("mean of %d plots: %.2f ms, %.0f bytes\n", plots, sum_ms / plots, sum_bytes / plots);
  return 0;
}

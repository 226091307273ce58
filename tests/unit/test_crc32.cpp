// Crc32: the carry-less multiply path agrees with zlib's crc32_z for every
// length around the fold widths, every alignment, and split across calls.
#include <doctest/doctest.h>
#include <zlib.h>

#include <cstdint>
#include <random>
#include <vector>

#include "core/util/crc32.h"

using namespace memtl;

namespace {
std::vector<unsigned char> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

uint32_t Zlib(uint32_t crc, const unsigned char* p, size_t n) {
  return static_cast<uint32_t>(crc32_z(crc, p, n));
}
}  // namespace

TEST_CASE("Crc32 matches zlib at every length up to 300 and every alignment") {
  const auto data = RandomBytes(300 + 16, 1);
  for (size_t offset = 0; offset < 16; ++offset) {
    for (size_t n = 0; n <= 300; ++n) {
      const unsigned char* p = data.data() + offset;
      CHECK_MESSAGE(Crc32(0, p, n) == Zlib(0, p, n), "offset ", offset, " length ", n);
    }
  }
}

TEST_CASE("Crc32 continues a CRC as zlib does") {
  const auto data = RandomBytes(100000, 2);
  const uint32_t whole = Zlib(0, data.data(), data.size());
  CHECK(Crc32(0, data.data(), data.size()) == whole);
  // Any split, including pieces shorter than one fold.
  for (size_t cut : {1u, 15u, 63u, 64u, 65u, 4096u, 65537u, 99999u}) {
    uint32_t c = Crc32(0, data.data(), cut);
    c = Crc32(c, data.data() + cut, data.size() - cut);
    CHECK_MESSAGE(c == whole, "cut at ", cut);
  }
  // Known values: the standard check value, and a run of zero bytes (which
  // a fold that dropped a lane would get right only by chance).
  const char* digits = "123456789";
  CHECK(Crc32(0, digits, 9) == 0xCBF43926u);
  const std::vector<unsigned char> zeros(1000, 0);
  CHECK(Crc32(0, zeros.data(), zeros.size()) == Zlib(0, zeros.data(), zeros.size()));
  const std::vector<unsigned char> ones(1000, 0xff);
  CHECK(Crc32(0x12345678u, ones.data(), ones.size()) ==
        Zlib(0x12345678u, ones.data(), ones.size()));
}

TEST_CASE("Crc32's fast path is the one tested on this machine") {
  // The development and CI machines are x86-64 with PCLMULQDQ; if this
  // fails, the tests above only compared zlib with itself.
#if defined(__x86_64__)
  CHECK(Crc32HasClmul());
#else
  CHECK(!Crc32HasClmul());
#endif
}

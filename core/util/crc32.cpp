// CRC-32 by folding with carry-less multiplication (the method of Intel's
// "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ"), for the
// bit-reflected gzip polynomial.
//
// The register stays 512 bits wide while whole 64-byte blocks remain: each
// 128-bit lane is multiplied by x^(512+-32) mod P, which moves it 512 bits
// further along the message, and the next block is added. The four lanes
// are then folded into one, and that one along the remaining 16-byte
// blocks. What is left is a 16-byte value whose CRC, continued over the
// last few bytes, equals the CRC of everything before; zlib's table method
// computes that short tail, so no Barrett reduction is needed here.
#include "core/util/crc32.h"

#include <zlib.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define MEMTL_CRC32_CLMUL 1
#endif

namespace memtl {

namespace {

// x^n mod P for the gzip polynomial P = 0x104C11DB7, in normal bit order.
constexpr uint64_t XPowModP(unsigned n) {
  uint64_t r = 1;
  for (unsigned i = 0; i < n; ++i) {
    r <<= 1;
    if ((r >> 32) & 1) r ^= 0x104C11DB7ull;
  }
  return r;
}

constexpr uint64_t Reflect64(uint64_t v) {
  uint64_t r = 0;
  for (int i = 0; i < 64; ++i) r |= ((v >> i) & 1) << (63 - i);
  return r;
}

// The folding multiplier for a distance of n bits in the reflected domain:
// (x^n mod P) placed in the high half, bit-reflected, shifted by one for
// the carry-less product's extra low bit.
constexpr uint64_t FoldConstant(unsigned n) { return Reflect64(XPowModP(n) << 32) << 1; }

// Folding by four lanes (512 bits) and by one lane (128 bits).
constexpr uint64_t kFold512Lo = FoldConstant(4 * 128 + 32);
constexpr uint64_t kFold512Hi = FoldConstant(4 * 128 - 32);
constexpr uint64_t kFold128Lo = FoldConstant(128 + 32);
constexpr uint64_t kFold128Hi = FoldConstant(128 - 32);
// The values every published implementation uses (Intel's paper, Linux's
// crc32-pclmul): a check on the derivation above.
static_assert(kFold512Lo == 0x154442bd4ull && kFold512Hi == 0x1c6e41596ull);
static_assert(kFold128Lo == 0x1751997d0ull && kFold128Hi == 0x0ccaa009eull);

#ifdef MEMTL_CRC32_CLMUL
__attribute__((target("pclmul,sse4.1"))) inline __m128i Fold(__m128i x, __m128i k, __m128i next) {
  const __m128i lo = _mm_clmulepi64_si128(x, k, 0x00);
  const __m128i hi = _mm_clmulepi64_si128(x, k, 0x11);
  return _mm_xor_si128(_mm_xor_si128(lo, hi), next);
}

inline __m128i Load(const unsigned char* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// len >= 64. Returns the CRC in zlib's convention.
__attribute__((target("pclmul,sse4.1"))) uint32_t Crc32Clmul(uint32_t crc, const unsigned char* p,
                                                             size_t len) {
  const __m128i k512 =
      _mm_set_epi64x(static_cast<long long>(kFold512Hi), static_cast<long long>(kFold512Lo));
  const __m128i k128 =
      _mm_set_epi64x(static_cast<long long>(kFold128Hi), static_cast<long long>(kFold128Lo));
  // zlib's crc is the register inverted; the register enters as the first
  // four message bytes' complement.
  __m128i x0 = _mm_xor_si128(Load(p), _mm_cvtsi32_si128(static_cast<int>(~crc)));
  __m128i x1 = Load(p + 16);
  __m128i x2 = Load(p + 32);
  __m128i x3 = Load(p + 48);
  p += 64;
  len -= 64;
  while (len >= 64) {
    x0 = Fold(x0, k512, Load(p));
    x1 = Fold(x1, k512, Load(p + 16));
    x2 = Fold(x2, k512, Load(p + 32));
    x3 = Fold(x3, k512, Load(p + 48));
    p += 64;
    len -= 64;
  }
  x0 = Fold(x0, k128, x1);
  x0 = Fold(x0, k128, x2);
  x0 = Fold(x0, k128, x3);
  while (len >= 16) {
    x0 = Fold(x0, k128, Load(p));
    p += 16;
    len -= 16;
  }
  alignas(16) unsigned char rest[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(rest), x0);
  // The CRC of `rest` started from a zero register (zlib's crc 0xffffffff),
  // then continued over the tail.
  const uint32_t c = Crc32Portable(0xffffffffu, rest, sizeof rest);
  return Crc32Portable(c, p, len);
}

bool DetectClmul() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
}
#endif

}  // namespace

bool Crc32HasClmul() {
#ifdef MEMTL_CRC32_CLMUL
  static const bool has = DetectClmul();
  return has;
#else
  return false;
#endif
}

uint32_t Crc32Portable(uint32_t crc, const void* data, size_t len) {
  return static_cast<uint32_t>(crc32_z(crc, static_cast<const Bytef*>(data), len));
}

uint32_t Crc32(uint32_t crc, const void* data, size_t len) {
#ifdef MEMTL_CRC32_CLMUL
  if (len >= 64 && Crc32HasClmul()) {
    return Crc32Clmul(crc, static_cast<const unsigned char*>(data), len);
  }
#endif
  return Crc32Portable(crc, data, len);
}

}  // namespace memtl

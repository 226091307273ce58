// Checked integer arithmetic for values that come from an input file.
// Signed overflow is undefined behaviour, and in a Release build it gives a
// silently wrong number (a time or a size that wrapped around): a reader
// adds or multiplies what the file says only through these, and turns an
// empty result into its one-line error or a counted diagnostic.
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>

namespace memtl {

// a + b, a - b, a * b; nullopt when the result does not fit in T.
template <std::integral T>
[[nodiscard]] constexpr std::optional<T> CheckedAdd(T a, T b) {
  T r{};
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

template <std::integral T>
[[nodiscard]] constexpr std::optional<T> CheckedSub(T a, T b) {
  T r{};
  if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
  return r;
}

template <std::integral T>
[[nodiscard]] constexpr std::optional<T> CheckedMul(T a, T b) {
  T r{};
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// The largest tensor dimension (a size or a stride) a reader accepts:
// SizeOfObservation multiplies a size, a stride and an element size in
// 128 bits, where three such factors cannot overflow.
inline constexpr int64_t kMaxDimension = int64_t{1} << 48;

}  // namespace memtl

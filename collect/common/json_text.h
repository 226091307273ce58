// JSON strings as Python's json module writes them (ensure_ascii): what
// every C++ writer of the memtl trace format (docs/trace-format.md) writes
// its strings with, so that their bytes are the Python recorder's. Standard
// C++17 and nothing of memtl's: the native walk builds against torch 1.13's
// headers, the CUPTI collector against the CUDA toolkit's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace memtl_collect {

inline void AppendHex4(std::string* out, uint32_t v) {
  static constexpr char kHex[] = "0123456789abcdef";
  char digits[6] = {
      '\\', 'u', kHex[(v >> 12) & 15], kHex[(v >> 8) & 15], kHex[(v >> 4) & 15], kHex[v & 15]};
  out->append(digits, sizeof digits);
}

// Decodes the UTF-8 sequence at s[i] (whose first byte is >= 0x80) into
// *cp; returns its length. An invalid sequence gives U+FFFD for one byte.
inline size_t DecodeUtf8(std::string_view s, size_t i, uint32_t* cp) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  size_t len = 0;
  uint32_t v = 0;
  uint32_t min = 0;
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    len = 2, v = b0 & 0x1f, min = 0x80;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    len = 3, v = b0 & 0x0f, min = 0x800;
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    len = 4, v = b0 & 0x07, min = 0x10000;
  }
  if (len == 0 || i + len > s.size()) {
    *cp = 0xfffd;
    return 1;
  }
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xc0) != 0x80) {
      *cp = 0xfffd;
      return 1;
    }
    v = (v << 6) | (b & 0x3f);
  }
  if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) {
    *cp = 0xfffd;
    return 1;
  }
  *cp = v;
  return len;
}

// A JSON string as Python's json.encoder.encode_basestring_ascii writes
// it: printable ASCII as is (but " and \), the five short escapes, and
// every other code point as \uXXXX in lower-case hex (a surrogate pair
// above U+FFFF). Bytes that are not UTF-8 (which the Python bindings
// would refuse to decode) are written as U+FFFD.
inline void AppendJsonString(std::string* out, std::string_view s) {
  out->push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out->push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    uint32_t cp = 0;
    size_t len = 1;
    if (c < 0x80) {
      cp = c;
    } else {
      len = DecodeUtf8(s, i, &cp);
    }
    i += len;
    // The five short escapes (and those of " and \), then \uXXXX.
    static constexpr std::string_view kEscaped = "\"\\\b\f\n\r\t";
    static constexpr std::string_view kEscapes = "\"\\bfnrt";
    if (const size_t e = cp < 0x80 ? kEscaped.find(static_cast<char>(cp)) : std::string_view::npos;
        e != std::string_view::npos) {
      out->push_back('\\');
      out->push_back(kEscapes[e]);
      continue;
    }
    if (cp >= 0x10000) {
      cp -= 0x10000;
      AppendHex4(out, 0xd800 | ((cp >> 10) & 0x3ff));
      AppendHex4(out, 0xdc00 | (cp & 0x3ff));
    } else {
      AppendHex4(out, cp);
    }
  }
  out->push_back('"');
}

}  // namespace memtl_collect

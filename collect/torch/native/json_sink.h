// The native walk's JSON output (memtl_torch_native.cpp): strings escaped
// as Python's json module writes them, floats as Python's repr, and the Sink
// that hands whole records to the Python writer in chunks. Byte-identical
// output to the Python walk is the point: tests/python compares the two.
#pragma once

#include <pybind11/pybind11.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace memtl_native {

namespace py = pybind11;

// Bytes of records gathered before they are handed to `write` (the Python
// walk writes 256 records at a time, about 70 KB).
inline constexpr size_t kFlushBytes = 64 * 1024;

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

// Text of the records, handed to the Python writer in chunks of whole
// records: the trace is never held whole.
class Sink {
 public:
  explicit Sink(py::object write) : write_(std::move(write)) { buf_.reserve(kFlushBytes + 4096); }

  void Put(std::string_view s) { buf_.append(s); }
  void Put(char c) { buf_.push_back(c); }

  void Int(int64_t v) {
    char tmp[24];
    auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
    buf_.append(tmp, r.ptr);
  }

  void UInt(uint64_t v) {
    char tmp[24];
    auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
    buf_.append(tmp, r.ptr);
  }

  void Addr(const void* p) { UInt(reinterpret_cast<uintptr_t>(p)); }

  void JsonString(std::string_view s) { AppendJsonString(&buf_, s); }

  // A float as Python's repr(float) writes it (the shortest digits that
  // round-trip; exponent form when the decimal point would fall more than
  // 16 digits right or 4 left of the first digit), for finite x.
  void PyFloatRepr(double x) {
    char sci[40];
    auto r = std::to_chars(sci, sci + sizeof sci, x, std::chars_format::scientific);
    std::string_view text(sci, static_cast<size_t>(r.ptr - sci));
    if (!text.empty() && text[0] == '-') {
      buf_.push_back('-');
      text.remove_prefix(1);
    }
    const size_t e = text.find('e');
    std::string digits;
    for (char ch : text.substr(0, e)) {
      if (ch != '.') digits.push_back(ch);
    }
    int exp10 = 0;
    std::from_chars(text.data() + e + (text[e + 1] == '+' ? 2 : 1), text.data() + text.size(),
                    exp10);
    const int decpt = exp10 + 1;  // digits d1 d2 ... mean 0.d1d2... x 10^decpt
    const int n = static_cast<int>(digits.size());
    if (decpt > -4 && decpt <= 16) {
      if (decpt <= 0) {
        buf_.append("0.");
        buf_.append(static_cast<size_t>(-decpt), '0');
        buf_.append(digits);
      } else if (decpt >= n) {
        buf_.append(digits);
        buf_.append(static_cast<size_t>(decpt - n), '0');
        buf_.append(".0");
      } else {
        buf_.append(digits, 0, static_cast<size_t>(decpt));
        buf_.push_back('.');
        buf_.append(digits, static_cast<size_t>(decpt), std::string::npos);
      }
      return;
    }
    buf_.push_back(digits[0]);
    if (n > 1) {
      buf_.push_back('.');
      buf_.append(digits, 1, std::string::npos);
    }
    const int shown = decpt - 1;
    buf_.append(shown < 0 ? "e-" : "e+");
    const int mag = shown < 0 ? -shown : shown;
    if (mag < 10) buf_.push_back('0');
    Int(mag);
  }

  // memtl_torch._float: non-finite values as the format's strings.
  void Float(double x) {
    if (std::isnan(x)) {
      buf_.append("\"nan\"");
    } else if (std::isinf(x)) {
      buf_.append(x > 0 ? "\"inf\"" : "\"-inf\"");
    } else {
      PyFloatRepr(x);
    }
  }

  // Called after each record: hands the text over once enough is gathered.
  void EndRecord() {
    if (buf_.size() >= kFlushBytes) Flush();
  }

  void Flush() {
    if (buf_.empty()) return;
    write_(py::bytes(buf_.data(), buf_.size()));
    buf_.clear();
  }

 private:
  py::object write_;
  std::string buf_;
};

}  // namespace memtl_native

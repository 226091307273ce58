// The native walk's JSON output (memtl_torch_native.cpp): strings escaped
// as Python's json module writes them (collect/common/json_text.h, shared
// with the CUPTI collector), floats as Python's repr, and the Sink that
// hands whole records to the Python writer in chunks. Byte-identical
// output to the Python walk is the point: tests/python compares the two.
#pragma once

#include <pybind11/pybind11.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "collect/common/json_text.h"

namespace memtl_native {

namespace py = pybind11;

// Bytes of records gathered before they are handed to `write` (the Python
// walk writes 256 records at a time, about 70 KB).
inline constexpr size_t kFlushBytes = 64 * 1024;

using memtl_collect::AppendJsonString;

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

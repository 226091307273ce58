// A minimal pull parser for one JSON text (one trace line), written for
// speed: no allocation on the common path (strings without escapes are views
// into the line), integers parsed directly, and values the caller does not
// want skipped without building anything. It accepts exactly RFC 8259 JSON;
// anything else is a ParseError with the column where it went wrong.
//
// Measured on the benchmark traces (docs/performance.md) it reads trace
// lines several times faster than building an nlohmann::json per line,
// which is why the reader uses it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace memtl {

struct JsonError {
  std::string what;
  size_t column = 0;
};

class JsonCursor {
 public:
  enum class Kind : uint8_t { kNull, kBool, kNumber, kString, kArray, kObject, kEnd, kInvalid };

  explicit JsonCursor(std::string_view text)
      : p_(text.data()), begin_(text.data()), end_(text.data() + text.size()) {}

  // The kind of the next value (after whitespace), without consuming it.
  Kind Peek() {
    SkipWs();
    if (p_ >= end_) return Kind::kEnd;
    const char c = *p_;
    if (c == '"') return Kind::kString;
    if ((c >= '0' && c <= '9') || c == '-') return Kind::kNumber;
    switch (c) {
      case 'n':
        return Kind::kNull;
      case 't':
      case 'f':
        return Kind::kBool;
      case '[':
        return Kind::kArray;
      case '{':
        return Kind::kObject;
      default:
        return Kind::kInvalid;
    }
  }
  // Object iteration: BeginObject() then, while NextKey(&key), read one value.
  void BeginObject();
  bool NextKey(std::string_view* key);
  // Array iteration: BeginArray() then, while NextItem(), read one value.
  void BeginArray();
  bool NextItem();
  // Scalars. Each throws JsonError when the next value is not of that kind.
  bool ReadBool();
  void ReadNull();
  // Integers: JSON numbers without fraction or exponent. `is_integer`
  // reports whether the number was one (else the value is 0 and the number
  // was consumed as a float).
  int64_t ReadInt64(bool* is_integer, bool* overflow);
  uint64_t ReadUint64(bool* is_integer, bool* overflow, bool* negative = nullptr);
  // A string: a view into the line, or into `scratch` when it had escapes.
  std::string_view ReadString(std::string* scratch);
  void SkipValue();
  // After the top-level value: only whitespace may follow.
  void ExpectEnd();

  [[noreturn]] void Fail(const std::string& what) const;
  size_t column() const { return static_cast<size_t>(p_ - begin_) + 1; }

 private:
  void SkipWs() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }
  void Expect(char c);
  void SkipString();
  void SkipNumber();
  void Literal(std::string_view word);

  const char* p_;
  const char* begin_;
  const char* end_;
  static constexpr int kMaxDepth = 64;
  int depth_ = 0;
  bool first_[kMaxDepth + 1] = {};  // per open container: no member read yet
};

}  // namespace memtl

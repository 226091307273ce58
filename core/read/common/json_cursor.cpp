// JsonCursor: a strict, allocation-free-on-the-common-path JSON pull parser.
#include "core/read/common/json_cursor.h"

#include <bit>
#include <cstring>

namespace memtl {

void JsonCursor::Fail(const std::string& what) const { throw JsonError{what, column()}; }

void JsonCursor::Expect(char c) {
  SkipWs();
  if (p_ >= end_) Fail(std::string("unexpected end of line, expected '") + c + "'");
  if (*p_ != c) Fail(std::string("expected '") + c + "'");
  ++p_;
}

void JsonCursor::BeginObject() {
  Expect('{');
  if (++depth_ > kMaxDepth) Fail("nested too deeply");
  first_[depth_] = true;
}

bool JsonCursor::NextKey(std::string_view* key) {
  SkipWs();
  if (p_ >= end_) Fail("unexpected end of line inside an object");
  if (*p_ == '}') {
    ++p_;
    --depth_;
    return false;
  }
  if (!first_[depth_]) {
    if (*p_ != ',') Fail("expected ',' or '}'");
    ++p_;
    SkipWs();
  }
  first_[depth_] = false;
  if (p_ >= end_ || *p_ != '"') Fail("expected a key string");
  // Keys are short plain ASCII in practice: find the closing quote here;
  // anything else (an escape, a control byte, the end) takes ReadString.
  const char* q = p_ + 1;
  while (q < end_ && *q != '"' && *q != '\\' && static_cast<unsigned char>(*q) >= 0x20) ++q;
  if (q < end_ && *q == '"') {
    *key = std::string_view(p_ + 1, static_cast<size_t>(q - p_ - 1));
    p_ = q + 1;
  } else {
    static thread_local std::string scratch;
    *key = ReadString(&scratch);
  }
  if (p_ < end_ && *p_ == ':') {
    ++p_;
  } else {
    Expect(':');
  }
  return true;
}

void JsonCursor::BeginArray() {
  Expect('[');
  if (++depth_ > kMaxDepth) Fail("nested too deeply");
  first_[depth_] = true;
}

bool JsonCursor::NextItem() {
  SkipWs();
  if (p_ >= end_) Fail("unexpected end of line inside a list");
  if (*p_ == ']') {
    ++p_;
    --depth_;
    return false;
  }
  if (!first_[depth_]) {
    if (*p_ != ',') Fail("expected ',' or ']'");
    ++p_;
  }
  first_[depth_] = false;
  return true;
}

void JsonCursor::Literal(std::string_view word) {
  if (static_cast<size_t>(end_ - p_) < word.size() ||
      std::memcmp(p_, word.data(), word.size()) != 0) {
    Fail("invalid literal");
  }
  p_ += word.size();
}

bool JsonCursor::ReadBool() {
  SkipWs();
  if (p_ < end_ && *p_ == 't') {
    Literal("true");
    return true;
  }
  if (p_ < end_ && *p_ == 'f') {
    Literal("false");
    return false;
  }
  Fail("expected a boolean");
}

void JsonCursor::ReadNull() {
  SkipWs();
  Literal("null");
}

namespace {

// Whether all eight bytes of `w` are ASCII digits (simdjson's test: the high
// nibbles are 3, and adding 6 to each byte keeps them 3).
bool EightDigits(uint64_t w) {
  return ((w & 0xF0F0F0F0F0F0F0F0u) | (((w + 0x0606060606060606u) & 0xF0F0F0F0F0F0F0F0u) >> 4)) ==
         0x3333333333333333u;
}

// The value of eight ASCII digits loaded little-endian (the first digit in
// the lowest byte): pairs, then quads, then the whole, by multiplications.
uint64_t ParseEightDigits(uint64_t w) {
  w -= 0x3030303030303030u;
  w = (w * 10) + (w >> 8);
  constexpr uint64_t kMask = 0x000000FF000000FFu;
  constexpr uint64_t kMul1 = 100 + (uint64_t{1000000} << 32);
  constexpr uint64_t kMul2 = 1 + (uint64_t{10000} << 32);
  return (((w & kMask) * kMul1) + (((w >> 16) & kMask) * kMul2)) >> 32;
}

}  // namespace

uint64_t JsonCursor::ReadUint64(bool* is_integer, bool* overflow, bool* negative) {
  SkipWs();
  const char* start = p_;
  *overflow = false;
  if (negative != nullptr) *negative = p_ < end_ && *p_ == '-';
  if (p_ < end_ && *p_ == '-') {
    SkipNumber();
    *is_integer = false;  // negative: not an unsigned integer
    for (const char* q = start; q < p_; ++q) {
      if (*q == '.' || *q == 'e' || *q == 'E') return 0;
    }
    *is_integer = true;
    *overflow = true;  // the caller reports negatives as out of range
    return 0;
  }
  if (p_ >= end_ || *p_ < '0' || *p_ > '9') Fail("expected a number");
  if (*p_ == '0' && p_ + 1 < end_ && p_[1] >= '0' && p_[1] <= '9') Fail("leading zero in a number");
  uint64_t v = 0;
  // Up to 19 digits cannot overflow (10^19 - 1 < 2^64): no check per digit.
  const char* fast_end = end_ - p_ > 19 ? p_ + 19 : end_;
  // Timestamps (19 digits) and addresses (up to 15) dominate a trace: eight
  // digits at a time while eight more fit before fast_end.
  if constexpr (std::endian::native == std::endian::little) {
    while (fast_end - p_ >= 8) {
      uint64_t w;
      std::memcpy(&w, p_, 8);
      if (!EightDigits(w)) break;
      v = v * 100000000u + ParseEightDigits(w);
      p_ += 8;
    }
  }
  while (p_ < fast_end && *p_ >= '0' && *p_ <= '9') {
    v = v * 10 + static_cast<uint64_t>(*p_ - '0');
    ++p_;
  }
  while (p_ < end_ && *p_ >= '0' && *p_ <= '9') {
    const uint64_t d = static_cast<uint64_t>(*p_ - '0');
    if (v > (UINT64_MAX - d) / 10) *overflow = true;
    v = v * 10 + d;
    ++p_;
  }
  if (p_ < end_ && (*p_ == '.' || *p_ == 'e' || *p_ == 'E')) {
    p_ = start;
    SkipNumber();
    *is_integer = false;
    return 0;
  }
  *is_integer = true;
  return *overflow ? 0 : v;
}

int64_t JsonCursor::ReadInt64(bool* is_integer, bool* overflow) {
  SkipWs();
  const bool negative = p_ < end_ && *p_ == '-';
  if (negative) {
    ++p_;
    if (p_ >= end_ || *p_ < '0' || *p_ > '9') Fail("expected a digit after '-'");
  }
  const uint64_t magnitude = ReadUint64(is_integer, overflow);
  if (!*is_integer || *overflow) return 0;
  if (negative) {
    if (magnitude > static_cast<uint64_t>(INT64_MAX) + 1) {
      *overflow = true;
      return 0;
    }
    return static_cast<int64_t>(0 - magnitude);
  }
  if (magnitude > static_cast<uint64_t>(INT64_MAX)) {
    *overflow = true;
    return 0;
  }
  return static_cast<int64_t>(magnitude);
}

void JsonCursor::SkipNumber() {
  SkipWs();
  if (p_ < end_ && *p_ == '-') ++p_;
  if (p_ >= end_ || *p_ < '0' || *p_ > '9') Fail("expected a number");
  if (*p_ == '0') {
    ++p_;
  } else {
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
  }
  if (p_ < end_ && *p_ == '.') {
    ++p_;
    if (p_ >= end_ || *p_ < '0' || *p_ > '9') Fail("expected a digit after '.'");
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
  }
  if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
    ++p_;
    if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
    if (p_ >= end_ || *p_ < '0' || *p_ > '9') Fail("expected a digit in an exponent");
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
  }
}

namespace {
int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
void AppendUtf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}
}  // namespace

std::string_view JsonCursor::ReadString(std::string* scratch) {
  SkipWs();
  if (p_ >= end_ || *p_ != '"') Fail("expected a string");
  const char* start = ++p_;
  // Fast path: no escapes. Find the first quote, backslash or control
  // character eight bytes at a time: each test is the "has a zero byte" bit
  // trick on the word XOR that byte (or minus 0x20), and the lowest flagged
  // byte is always a true hit (borrows only flag bytes above one), so on a
  // little-endian machine its index is the count of trailing zero bits / 8.
  constexpr uint64_t kOnes = 0x0101010101010101u, kHigh = 0x8080808080808080u;
  bool found = false;
  if constexpr (std::endian::native == std::endian::little) {
    while (end_ - p_ >= 8) {
      uint64_t w;
      std::memcpy(&w, p_, 8);
      const uint64_t quote = w ^ (kOnes * '"'), backslash = w ^ (kOnes * '\\');
      const uint64_t hit = (((quote - kOnes) & ~quote) | ((backslash - kOnes) & ~backslash) |
                            ((w - kOnes * 0x20) & ~w)) &
                           kHigh;
      if (hit != 0) {
        p_ += std::countr_zero(hit) / 8;
        found = true;
        break;
      }
      p_ += 8;
    }
  }
  if (!found) {
    while (p_ < end_ && *p_ != '"' && *p_ != '\\' && static_cast<unsigned char>(*p_) >= 0x20) ++p_;
  }
  if (p_ >= end_) Fail("unterminated string");
  if (static_cast<unsigned char>(*p_) < 0x20) Fail("control character in a string");
  if (*p_ == '"') {
    return std::string_view(start, static_cast<size_t>(p_++ - start));
  }
  scratch->assign(start, p_);
  while (p_ < end_ && *p_ != '"') {
    const char c = *p_++;
    if (static_cast<unsigned char>(c) < 0x20) Fail("control character in a string");
    if (c != '\\') {
      scratch->push_back(c);
      continue;
    }
    if (p_ >= end_) Fail("unterminated escape");
    const char e = *p_++;
    switch (e) {
      case '"':
        scratch->push_back('"');
        break;
      case '\\':
        scratch->push_back('\\');
        break;
      case '/':
        scratch->push_back('/');
        break;
      case 'b':
        scratch->push_back('\b');
        break;
      case 'f':
        scratch->push_back('\f');
        break;
      case 'n':
        scratch->push_back('\n');
        break;
      case 'r':
        scratch->push_back('\r');
        break;
      case 't':
        scratch->push_back('\t');
        break;
      case 'u': {
        auto hex4 = [&]() -> uint32_t {
          if (end_ - p_ < 4) Fail("short \\u escape");
          uint32_t v = 0;
          for (int i = 0; i < 4; ++i) {
            const int h = Hex(p_[i]);
            if (h < 0) Fail("invalid \\u escape");
            v = v * 16 + static_cast<uint32_t>(h);
          }
          p_ += 4;
          return v;
        };
        uint32_t cp = hex4();
        if (cp >= 0xD800 && cp < 0xDC00 && end_ - p_ >= 6 && p_[0] == '\\' && p_[1] == 'u') {
          p_ += 2;
          const uint32_t lo = hex4();
          if (lo >= 0xDC00 && lo < 0xE000) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else {
            AppendUtf8(scratch, 0xFFFD);
            cp = lo;
          }
        } else if (cp >= 0xD800 && cp < 0xE000) {
          cp = 0xFFFD;  // a lone surrogate, as Python's json writes them
        }
        AppendUtf8(scratch, cp);
        break;
      }
      default:
        Fail("invalid escape in a string");
    }
  }
  if (p_ >= end_) Fail("unterminated string");
  ++p_;
  return *scratch;
}

void JsonCursor::SkipString() {
  std::string scratch;
  ReadString(&scratch);
}

void JsonCursor::SkipValue() {
  switch (Peek()) {
    case Kind::kNull:
      Literal("null");
      return;
    case Kind::kBool:
      ReadBool();
      return;
    case Kind::kNumber:
      SkipNumber();
      return;
    case Kind::kString:
      SkipString();
      return;
    case Kind::kArray:
      BeginArray();
      while (NextItem()) SkipValue();
      return;
    case Kind::kObject: {
      BeginObject();
      std::string_view key;
      while (NextKey(&key)) SkipValue();
      return;
    }
    case Kind::kEnd:
      Fail("unexpected end of line, expected a value");
    case Kind::kInvalid:
      Fail("invalid value");
  }
}

void JsonCursor::ExpectEnd() {
  SkipWs();
  if (p_ != end_) Fail("unexpected text after the value");
}

}  // namespace memtl

// Quoting input text for one-line messages (quote.h). The text is walked as
// units, each a valid UTF-8 character or one byte that is not, so that a
// shortened text never cuts an escape or a character in two.
#include "core/model/quote.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <utility>

namespace memtl {
namespace {

// One unit of the input and what it prints as.
struct Unit {
  size_t in_len = 1;  // input bytes consumed
  size_t out_len = 0;
  char out[8] = {};
};

constexpr char kHex[] = "0123456789abcdef";

void SetByteEscape(Unit* u, unsigned char b) {
  u->out[0] = '\\';
  u->out[1] = 'x';
  u->out[2] = kHex[b >> 4];
  u->out[3] = kHex[b & 15];
  u->out_len = 4;
}

void SetTwoCharEscape(Unit* u, char c) {
  u->out[0] = '\\';
  u->out[1] = c;
  u->out_len = 2;
}

void SetCodePointEscape(Unit* u, uint32_t cp) {
  u->out[0] = '\\';
  u->out[1] = 'u';
  for (int i = 0; i < 4; ++i) u->out[2 + i] = kHex[(cp >> (12 - 4 * i)) & 15];
  u->out_len = 6;
}

bool IsContinuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// Code points that are valid but change how the line reads on a terminal:
// C1 controls, the line and paragraph separators, the bidirectional
// embeddings, overrides and isolates.
bool EscapedCodePoint(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029 ||
         (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

// What a unit escapes beyond the control characters and invalid UTF-8.
enum class Mode {
  kQuoted,   // Quote: the quote and the backslash too
  kPath,     // QuotePath: the backslash too
  kMessage,  // OneLine: neither (quoted parts are escaped already)
};

// The code point of one well-formed UTF-8 sequence.
uint32_t DecodeUtf8(std::string_view c) {
  static constexpr unsigned char kLeadMask[] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  uint32_t cp = static_cast<unsigned char>(c[0]) & kLeadMask[c.size()];
  for (size_t k = 1; k < c.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(c[k]) & 0x3F);
  return cp;
}

Unit Decode(std::string_view s, size_t i, Mode mode) {
  Unit u;
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    switch (b0) {
      case '\n':
        SetTwoCharEscape(&u, 'n');
        return u;
      case '\r':
        SetTwoCharEscape(&u, 'r');
        return u;
      case '\t':
        SetTwoCharEscape(&u, 't');
        return u;
      default:
        break;
    }
    if (b0 == '\\' && mode != Mode::kMessage) {
      SetTwoCharEscape(&u, '\\');
    } else if (b0 == '"' && mode == Mode::kQuoted) {
      SetTwoCharEscape(&u, '"');
    } else if (b0 < 0x20 || b0 == 0x7F) {
      SetByteEscape(&u, b0);
    } else {
      u.out[0] = static_cast<char>(b0);
      u.out_len = 1;
    }
    return u;
  }
  const size_t len = Utf8CharLength(s, i);
  if (len == 0) {
    SetByteEscape(&u, b0);
    return u;
  }
  const uint32_t cp = DecodeUtf8(s.substr(i, len));
  u.in_len = len;
  if (EscapedCodePoint(cp)) {
    SetCodePointEscape(&u, cp);
  } else {
    for (size_t k = 0; k < len; ++k) u.out[k] = s[i + k];
    u.out_len = len;
  }
  return u;
}

void AppendUnits(std::string* out, std::string_view s, size_t from, size_t to, Mode mode) {
  for (size_t i = from; i < to;) {
    const Unit u = Decode(s, i, mode);
    out->append(u.out, u.out_len);
    i += u.in_len;
  }
}

void AppendEscaped(std::string* out, std::string_view s, size_t max_bytes, Mode mode) {
  size_t total = 0;
  for (size_t i = 0; i < s.size();) {
    const Unit u = Decode(s, i, mode);
    total += u.out_len;
    i += u.in_len;
  }
  if (total <= max_bytes) {
    AppendUnits(out, s, 0, s.size(), mode);
    return;
  }
  constexpr std::string_view kEllipsis = "...";
  const size_t budget = max_bytes > kEllipsis.size() ? max_bytes - kEllipsis.size() : 0;
  const size_t head_budget = (budget + 1) / 2;
  const size_t tail_budget = budget - head_budget;
  size_t i = 0;
  size_t head = 0;
  while (i < s.size()) {
    const Unit u = Decode(s, i, mode);
    if (head + u.out_len > head_budget) break;
    out->append(u.out, u.out_len);
    head += u.out_len;
    i += u.in_len;
  }
  out->append(kEllipsis);
  // The longest run of whole units at the end that fits the tail's budget;
  // units are decoded from the front, since only there are their bounds known.
  std::deque<std::pair<size_t, size_t>> tail;  // (offset, printed bytes)
  size_t tail_bytes = 0;
  while (i < s.size()) {
    const Unit u = Decode(s, i, mode);
    tail.emplace_back(i, u.out_len);
    tail_bytes += u.out_len;
    while (tail_bytes > tail_budget) {
      tail_bytes -= tail.front().second;
      tail.pop_front();
    }
    i += u.in_len;
  }
  if (!tail.empty()) AppendUnits(out, s, tail.front().first, s.size(), mode);
}

}  // namespace

std::string Quote(std::string_view text, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes) + 2);
  out.push_back('"');
  AppendEscaped(&out, text, max_bytes, Mode::kQuoted);
  out.push_back('"');
  return out;
}

std::string QuotePath(std::string_view path, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(path.size(), max_bytes));
  AppendEscaped(&out, path, max_bytes, Mode::kPath);
  return out;
}

std::string TextCell(std::string_view name) {
  const bool plain = std::all_of(name.begin(), name.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c >= 0x20 && c < 0x7f && c != '\\';
  });
  if (plain) return std::string(name);
  std::string out;
  out.reserve(name.size() + 8);
  AppendEscaped(&out, name, name.size() * 6 + 6, Mode::kPath);
  return out;
}

std::string OneLine(std::string_view message) {
  std::string out;
  out.reserve(message.size());
  AppendEscaped(&out, message, message.size() * 6, Mode::kMessage);
  return out;
}

size_t Utf8CharLength(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return 1;
  // The well-formed sequences of Unicode's table 3-7: no overlong forms, no
  // surrogates, nothing past U+10FFFF.
  size_t len = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  }
  if (len == 0 || i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if (k == 1 ? (b < lo || b > hi) : !IsContinuation(b)) return 0;
  }
  return len;
}

size_t InvalidUtf8Bytes(std::string_view s) {
  size_t bad = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t len = Utf8CharLength(s, i);
    bad += len == 0 ? 1 : 0;
    i += len == 0 ? 1 : len;
  }
  return bad;
}

std::string ReplaceInvalidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t len = Utf8CharLength(s, i);
    if (len == 0) {
      out += kReplacementCharacter;
      ++i;
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  return out;
}

void AppendJsonString(std::string& out, std::string_view s) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
      } else if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    const size_t len = Utf8CharLength(s, i);
    if (len == 0) {
      out += "\\ufffd";  // one per byte that is no part of valid UTF-8
      ++i;
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  out += '"';
}

}  // namespace memtl

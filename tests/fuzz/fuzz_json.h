// The JSON model of fuzz_structured's mutator (structured_mutator.cpp): a
// value that keeps what a mutation should not change (a number's text as
// written, so 2^64, 1e400 and -0 survive a round trip; a string's escaped
// text; an object's member order and duplicate keys), and a trace as its
// lines, each parsed or kept as bytes.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memtl_fuzz {

struct Member;

struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = kNull;
  std::string text;  // kBool, kNumber: as written; kString: with its quotes
  std::vector<Json> items;
  std::vector<Member> members;

  Json* Find(std::string_view key);
  void Add(std::string key, Json value);
  std::optional<int64_t> Int() const {
    if (kind != kNumber) return std::nullopt;
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (errno != 0 || end == text.c_str() || *end != '\0') return std::nullopt;
    return v;
  }
};

struct Member {
  std::string key;  // with its quotes, as written
  Json value;
};

Json Number(std::string text);
Json Number(int64_t v);
// v + d, held at the ends of int64 (the mutator's own arithmetic must not
// overflow on the extremes it writes).
int64_t Plus(int64_t v, int64_t d);
Json Bool(bool v);
Json Empty(Json::Kind kind);
// `s` as a JSON string, quotes included.
std::string Escape(std::string_view s);
Json String(std::string_view s);
void Write(const Json& j, std::string* out);

struct Line {
  bool parsed = false;
  Json v;
  std::string raw;  // when not parsed
};

struct Doc {
  std::vector<Line> lines;  // lines[0] is the header when there is one
};

// One line, parsed, or kept as bytes when the parser cannot take it.
Line ParseLine(std::string text);
// The lines of `s`; a line the parser cannot take (strict enough for the
// reader's output, the fixtures) is kept as bytes.
Doc ParseDoc(std::string_view s);
std::string WriteDoc(const Doc& d);

}  // namespace memtl_fuzz

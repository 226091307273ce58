// JsonCursor: strict JSON, numbers at the edges of their ranges, escapes.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "core/read/common/json_cursor.h"

using namespace memtl;

namespace {
bool Valid(std::string_view text) {
  try {
    JsonCursor c(text);
    c.SkipValue();
    c.ExpectEnd();
    return true;
  } catch (const JsonError&) {
    return false;
  }
}
}  // namespace

TEST_CASE("json: accepts exactly JSON") {
  CHECK(Valid(R"({"a":[1,-2,3.5e-2,true,false,null,"x\u00e9\n"],"b":{}})"));
  CHECK(Valid(" [ ] "));
  CHECK_FALSE(Valid(""));
  CHECK_FALSE(Valid("{"));
  CHECK_FALSE(Valid("[1,]"));
  CHECK_FALSE(Valid("{\"a\" 1}"));
  CHECK_FALSE(Valid("{\"a\":1,}"));
  CHECK_FALSE(Valid("01"));
  CHECK_FALSE(Valid("1."));
  CHECK_FALSE(Valid("NaN"));
  CHECK_FALSE(Valid("tru"));
  CHECK_FALSE(Valid("\"a\tb\""));  // raw control character
  CHECK_FALSE(Valid("\"\\x\""));
  CHECK_FALSE(Valid("[1] 2"));
  CHECK_FALSE(Valid(std::string(100, '[') + std::string(100, ']')));  // nested too deeply
}

TEST_CASE("json: integers at the edges") {
  bool is_int = false, overflow = false, negative = false;
  JsonCursor a("18446744073709551615");
  CHECK(a.ReadUint64(&is_int, &overflow, &negative) == UINT64_MAX);
  CHECK((is_int && !overflow && !negative));
  JsonCursor b("18446744073709551616");
  b.ReadUint64(&is_int, &overflow);
  CHECK(overflow);
  JsonCursor c("-9223372036854775808");
  CHECK(c.ReadInt64(&is_int, &overflow) == INT64_MIN);
  CHECK_FALSE(overflow);
  JsonCursor d("9223372036854775808");
  d.ReadInt64(&is_int, &overflow);
  CHECK(overflow);
  JsonCursor e("1.5");
  e.ReadInt64(&is_int, &overflow);
  CHECK_FALSE(is_int);
  JsonCursor f("-3");
  f.ReadUint64(&is_int, &overflow, &negative);
  CHECK(negative);
}

TEST_CASE("json: strings with escapes and surrogate pairs") {
  std::string scratch;
  JsonCursor c(R"("a\"b\\c\u0041\ud83d\ude00")");
  CHECK(c.ReadString(&scratch) == "a\"b\\cA\xF0\x9F\x98\x80");
  JsonCursor d(R"("plain")");
  CHECK(d.ReadString(&scratch) == "plain");
}

TEST_CASE(
    "json: a string ends at its first quote, stops at escapes and control bytes, at any offset") {
  // The fast path scans eight bytes at a time: put each special byte at every
  // position of strings from 0 to 40 bytes, among plain ASCII and UTF-8 bytes.
  for (size_t len = 0; len <= 40; ++len) {
    for (const char* fill : {"a", "\xc3\xa9", " ~!"}) {
      std::string body;
      while (body.size() < len) body += fill;
      body.resize(len);
      // Cut UTF-8 pairs are fine here: JsonCursor does not validate UTF-8.
      {
        const std::string text = "\"" + body + "\" ";  // the cursor views it
        JsonCursor c(text);
        std::string scratch;
        CHECK(c.ReadString(&scratch) == body);
      }
      for (size_t at = 0; at < len; ++at) {
        std::string with_quote = body;
        with_quote[at] = '"';
        const std::string quote_text = "\"" + with_quote + "\"";
        JsonCursor q(quote_text);
        std::string scratch;
        CHECK(q.ReadString(&scratch) == body.substr(0, at));

        std::string with_escape = body;
        with_escape.insert(at, "\\n");
        const std::string escape_text = "\"" + with_escape + "\"";
        JsonCursor e(escape_text);
        std::string expected = body;
        expected.insert(at, "\n");
        CHECK(e.ReadString(&scratch) == expected);

        std::string with_control = body;
        with_control[at] = '\x1f';
        CHECK_FALSE(Valid("\"" + with_control + "\""));
      }
      CHECK_FALSE(Valid("\"" + body));  // unterminated
    }
  }
}

TEST_CASE("json: integers of every length read the same as strtoull") {
  // The eight-digits-at-a-time path and the digit loop meet at every length.
  const std::string digits = "9876543210123456789";
  for (size_t len = 1; len <= digits.size(); ++len) {
    for (size_t shift = 0; shift < 10; ++shift) {
      std::string text = digits.substr(digits.size() - len);
      for (char& ch : text) ch = static_cast<char>('0' + (ch - '0' + shift) % 10);
      if (text.size() > 1 && text[0] == '0') text[0] = '1';
      for (const char* suffix : {"", ",", " ", "]"}) {
        const std::string line = text + std::string(suffix);
        JsonCursor c(line);
        bool is_int = false, overflow = false, negative = false;
        CHECK(c.ReadUint64(&is_int, &overflow, &negative) ==
              std::strtoull(text.c_str(), nullptr, 10));
        CHECK(is_int);
        CHECK_FALSE(overflow);
      }
    }
  }
}

TEST_CASE("json: object keys, plain and escaped") {
  const std::string text = R"({"plain":1,"with \"quote\"":2,"\u0041B":3,"":4})";
  JsonCursor c(text);
  c.BeginObject();
  std::vector<std::string> keys;
  std::string_view key;
  while (c.NextKey(&key)) {
    keys.emplace_back(key);
    c.SkipValue();
  }
  CHECK(keys == std::vector<std::string>{"plain", "with \"quote\"", "AB", ""});
  CHECK_FALSE(Valid("{\"a\x01\":1}"));  // a control byte in a key
  CHECK_FALSE(Valid(R"({"a" 1})"));     // no colon
  CHECK_FALSE(Valid(R"({"a)"));         // unterminated key
  CHECK(Valid(R"({"a" : 1})"));         // whitespace before the colon
}

// JsonCursor: strict JSON, numbers at the edges of their ranges, escapes.
#include <doctest/doctest.h>

#include "core/read/json_cursor.h"

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

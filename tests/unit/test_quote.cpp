// Quoting text from a trace or a file name in messages (core/model/quote.h):
// every message stays one line and reads back unambiguously, whatever the
// bytes; the schema parser, the registry and the diagnostics use it.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <string_view>

#include "core/model/diagnostics.h"
#include "core/model/quote.h"
#include "core/model/trace.h"
#include "core/schema/schema.h"

using namespace memtl;

namespace {

// True when `s` has no byte a terminal acts on: no C0 control, no DEL, and
// no byte outside printable ASCII but valid UTF-8 that is not escaped (as
// OneLine leaves it unchanged).
bool Printable(std::string_view s) {
  for (const char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b == 0x7F) return false;
  }
  return OneLine(s) == s;
}

void AppendUtf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Reverses Quote's escapes (the text between the quotes); "" on a stray
// backslash or quote, which Quote never leaves.
std::string Unquote(std::string_view q) {
  REQUIRE(q.size() >= 2);
  REQUIRE(q.front() == '"');
  REQUIRE(q.back() == '"');
  q = q.substr(1, q.size() - 2);
  std::string out;
  for (size_t i = 0; i < q.size(); ++i) {
    if (q[i] == '"') return "<stray quote>";
    if (q[i] != '\\') {
      out.push_back(q[i]);
      continue;
    }
    if (++i >= q.size()) return "<stray backslash>";
    switch (q[i]) {
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case '\\':
        out.push_back('\\');
        break;
      case '"':
        out.push_back('"');
        break;
      case 'x':
        out.push_back(static_cast<char>(std::stoul(std::string(q.substr(i + 1, 2)), nullptr, 16)));
        i += 2;
        break;
      case 'u':
        AppendUtf8(&out,
                   static_cast<uint32_t>(std::stoul(std::string(q.substr(i + 1, 4)), nullptr, 16)));
        i += 4;
        break;
      default:
        return "<unknown escape>";
    }
  }
  return out;
}

}  // namespace

TEST_CASE("quote: control characters are escaped, the quote and backslash too") {
  CHECK(Quote("aten::relu") == "\"aten::relu\"");
  CHECK(Quote("") == "\"\"");
  CHECK(Quote("a\nb\rc\td") == "\"a\\nb\\rc\\td\"");
  CHECK(Quote("\x1b[2J") == "\"\\x1b[2J\"");
  CHECK(Quote(std::string_view("a\0b", 3)) == "\"a\\x00b\"");
  CHECK(Quote("\x7f") == "\"\\x7f\"");
  CHECK(Quote("say \"hi\" \\ there") == "\"say \\\"hi\\\" \\\\ there\"");
}

TEST_CASE("quote: invalid UTF-8 is escaped byte by byte, valid UTF-8 is kept") {
  CHECK(Quote("\x80") == "\"\\x80\"");                             // lone continuation
  CHECK(Quote("\xc0\x80") == "\"\\xc0\\x80\"");                    // overlong NUL
  CHECK(Quote("\xe0\x80\xaf") == "\"\\xe0\\x80\\xaf\"");           // overlong '/'
  CHECK(Quote("\xed\xa0\x80") == "\"\\xed\\xa0\\x80\"");           // a surrogate
  CHECK(Quote("\xf4\x90\x80\x80") == "\"\\xf4\\x90\\x80\\x80\"");  // past U+10FFFF
  CHECK(Quote("\xf5") == "\"\\xf5\"");
  CHECK(Quote("ab\xe2\x82") == "\"ab\\xe2\\x82\"");  // cut at the end
  CHECK(Quote("caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80") ==
        "\"caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80\"");
}

TEST_CASE("quote: code points that move the cursor or reorder the line are escaped") {
  CHECK(Quote("\xc2\x9b"
              "31m") == "\"\\u009b31m\"");        // C1 CSI
  CHECK(Quote("\xc2\x85") == "\"\\u0085\"");      // NEL
  CHECK(Quote("\xe2\x80\xa8") == "\"\\u2028\"");  // line separator
  CHECK(Quote("\xe2\x80\xae") == "\"\\u202e\"");  // right-to-left override
  CHECK(Quote("\xe2\x81\xa6") == "\"\\u2066\"");  // left-to-right isolate
  CHECK(Quote("\xc2\xa0") == "\"\xc2\xa0\"");     // U+00A0 is printable
}

TEST_CASE("quote: long text keeps its start and end, never cutting an escape or a character") {
  std::string name = "x::" + std::string(1 << 20, 'a') + "_end";
  std::string q = Quote(name);
  CHECK(q.size() <= kQuoteMaxBytes + 2);
  CHECK(q.starts_with("\"x::aaa"));
  CHECK(q.ends_with("aaa_end\""));
  CHECK(q.find("...") != std::string::npos);

  q = Quote(std::string(300, '\x1b'));
  CHECK(q.size() <= kQuoteMaxBytes + 2);
  // Only whole escapes around the "...".
  const std::string body = q.substr(1, q.size() - 2);
  const size_t dots = body.find("...");
  REQUIRE(dots != std::string::npos);
  CHECK(dots % 4 == 0);
  CHECK((body.size() - dots - 3) % 4 == 0);

  std::string accents;
  for (int i = 0; i < 1000; ++i) accents += "\xc3\xa9";
  q = Quote(accents);
  CHECK(q.size() <= kQuoteMaxBytes + 2);
  CHECK(Printable(q));  // no cut character, which would be escaped

  CHECK(Quote("abcdef", 5) == "\"a...f\"");
  CHECK(Quote("abcdef", 0) == "\"...\"");
  CHECK(Quote("abcdef", 6) == "\"abcdef\"");
}

TEST_CASE("quote: any bytes give one printable line that reads back") {
  const auto seed = static_cast<uint32_t>(std::random_device{}());
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  const std::string pieces[] = {"\n",           "\x1b",         "\"",       "\\",
                                "\xc2\x9b",     "\xe2\x80\xae", "\xc3\xa9", "\xf0\x9f\x98\x80",
                                "\xed\xa0\x80", "\xe2\x82",     "a",        "::",
                                "\x80"};
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    const int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      if (rng() % 3 == 0) {
        text.push_back(static_cast<char>(rng() & 0xFF));
      } else {
        text += pieces[rng() % std::size(pieces)];
      }
    }
    const std::string q = Quote(text, 1 << 20);
    CHECK(Printable(q));
    CHECK(Unquote(q) == text);
    const std::string shortened = Quote(text, 17);
    CHECK(Printable(shortened));
    CHECK(shortened.size() <= 17 + 2);
    CHECK(OneLine(q) == q);
  }
}

TEST_CASE("quote: paths are escaped without quotes, and messages as a last guard") {
  CHECK(QuotePath("/tmp/run.trace") == "/tmp/run.trace");
  CHECK(QuotePath("/tmp/a\nb\x1b[2J \"c\"\\d") == "/tmp/a\\nb\\x1b[2J \"c\"\\\\d");
  const std::string deep = "/" + std::string(250, 'd') + "/run.trace";
  CHECK(QuotePath(deep) == deep);  // a deep path stays whole
  const std::string huge = "/" + std::string(4000, 'd') + "/run.trace";
  CHECK(QuotePath(huge).size() <= kPathQuoteMaxBytes);
  CHECK(QuotePath(huge).ends_with("/run.trace"));
  // OneLine keeps quotes and backslashes, which quoted parts hold already.
  CHECK(OneLine("memtl: \"a\\nb\": bad\n\x1b[0m") == "memtl: \"a\\nb\": bad\\n\\x1b[0m");
  CHECK(OneLine(std::string(1000, 'x')).size() == 1000);  // never shortened
}

TEST_CASE("quote: a diagnostic's example is kept as one line") {
  Diagnostics d;
  d.Add("double free", "0x64 on cpu\n\x1b[31mmemtl: fake");
  d.Add("double free", "second\nexample");
  REQUIRE(d.entries().size() == 1);
  CHECK(d.entries().begin()->second.example == "0x64 on cpu\\n\\x1b[31mmemtl: fake");
  CHECK(d.entries().begin()->second.count == 2);
}

TEST_CASE("quote: schema errors quote the schema and the operator") {
  auto r = ParseSchema("aten::relu(Tensor self\n\x1b[2J -> Tensor");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find('\n') == std::string::npos);
  CHECK(r.status().message().find("\"aten::relu(Tensor self\\n\\x1b[2J -> Tensor\"") !=
        std::string::npos);
  r = ParseSchema("aten::relu(" + std::string(60000, 'T'));
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().size() < 200);

  SchemaRegistry reg = SchemaRegistry::Builtin();
  const Status s = reg.Override("aten::relu\n\x1b[2J", {"aten::relu(Tensor self) -> Tensor"});
  REQUIRE_FALSE(s.ok());
  CHECK(s.message() ==
        "schema \"aten::relu(Tensor self) -> Tensor\" is listed under operator "
        "\"aten::relu\\n\\x1b[2J\"");
}

TEST_CASE("TextCell: plain names pass as they are; others escaped, whole, on one line") {
  CHECK(TextCell("Sequential_0 > Linear_1 .weight grad") == "Sequential_0 > Linear_1 .weight grad");
  CHECK(TextCell("a\tb\nc") == "a\\tb\\nc");
  CHECK(TextCell("x\x1b[2J\"") == "x\\x1b[2J\"");
  CHECK(TextCell("back\\slash") == "back\\\\slash");
  const std::string long_name(5000, 'a');
  CHECK(TextCell(long_name + "\n").size() == long_name.size() + 2);
}

TEST_CASE("JSON strings are UTF-8 whatever the bytes; the names of a trace are repaired once") {
  // Each byte that is no part of valid UTF-8 reads as U+FFFD; valid text
  // (two-, three- and four-byte characters) passes as it is.
  CHECK(JsonString("a\xff\xfe") == "\"a\\ufffd\\ufffd\"");
  CHECK(JsonString("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80") ==
        "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"");
  CHECK(JsonString("\xe2\x82") == "\"\\ufffd\\ufffd\"");             // a cut sequence
  CHECK(JsonString("\xed\xa0\x80") == "\"\\ufffd\\ufffd\\ufffd\"");  // a surrogate
  CHECK(JsonString("\xc0\xaf") == "\"\\ufffd\\ufffd\"");             // an overlong '/'
  CHECK(JsonString("q\"\\\n") == "\"q\\\"\\\\\\u000a\"");
  CHECK(InvalidUtf8Bytes("ok\xff\xc3\xa9\x80") == 2);
  CHECK(ReplaceInvalidUtf8("a\xff"
                           "b") ==
        "a\xef\xbf\xbd"
        "b");

  StringTable strings;
  const uint32_t good = strings.Intern("aten::mm");
  const uint32_t bad = strings.Intern("aten\xff::mm");
  CHECK(strings.Get(bad) == "aten\xef\xbf\xbd::mm");
  CHECK(strings.Intern("aten\xff::mm") == bad);  // the same name, the same id
  CHECK(strings.Intern("aten\xef\xbf\xbd::mm") == bad);
  CHECK(strings.Intern("aten::mm") == good);
  CHECK(strings.invalid_utf8() == 2);
  CHECK(strings.invalid_utf8_example() == "\"aten\\xff::mm\"");
}

// The line source (core/read/common/line_source.h): whole lines in blocks, errors
// after the lines before them, each gzip member checked.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/read/common/line_source.h"
#include "tests/unit/gzip_text.h"

using namespace memtl;
using namespace memtl::test;

namespace {

// Every block LineSource hands out for `data`, read `min_bytes` at a time.
std::vector<std::string> Blocks(const std::string& data, size_t min_bytes, bool* unterminated,
                                std::string* error) {
  auto src = LineSource::FromMemory(data, "t.trace");
  std::vector<std::string> blocks;
  std::string block;
  while (src->ReadLines(&block, min_bytes)) {
    blocks.push_back(block);
    block.clear();
  }
  *unterminated = src->last_line_unterminated();
  *error = src->status().ok() ? "" : src->status().message();
  return blocks;
}

}  // namespace

TEST_CASE("line source: blocks of whole lines, a little past the size asked for") {
  std::string text;
  for (int i = 0; i < 5000; ++i)
    text += "line " + std::to_string(i) + std::string(i % 97, 'x') + "\n";
  text += std::string(300000, 'L') + "\n";  // a line longer than any block
  text += "last line, no newline";
  for (const bool gzip : {false, true}) {
    for (const size_t min_bytes : {size_t{1}, size_t{1000}, size_t{128} << 10}) {
      CAPTURE(gzip);
      CAPTURE(min_bytes);
      bool unterminated = false;
      std::string error;
      const auto blocks = Blocks(gzip ? Gzip(text) : text, min_bytes, &unterminated, &error);
      CHECK(error.empty());
      CHECK(unterminated);
      std::string joined;
      for (size_t i = 0; i < blocks.size(); ++i) {
        const std::string& b = blocks[i];
        REQUIRE(!b.empty());
        if (i + 1 < blocks.size()) {
          CHECK(b.back() == '\n');  // whole lines only
          CHECK(b.size() >= min_bytes);
          // Past min_bytes by at most 4 KiB and a line (lines here are
          // under 120 bytes), or by as much again as the long line.
          if (b.find('L') == std::string::npos) {
            CHECK(b.size() <= min_bytes + (4 << 10) + 120);
          } else {
            CHECK(b.size() <= min_bytes + 2 * 300000 + (4 << 10));
          }
        }
        joined += b;
      }
      CHECK(joined == text);
    }
  }
}

TEST_CASE("line source: an error hands out the whole lines before it, then stops") {
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "record " + std::to_string(i) + "\n";
  const std::string gz = Gzip(text);
  bool unterminated = false;
  std::string error;
  const auto blocks = Blocks(gz.substr(0, gz.size() / 2), 1 << 10, &unterminated, &error);
  CHECK(error == "t.trace: truncated gzip stream (the file ends inside a gzip member)");
  CHECK(!unterminated);
  REQUIRE(!blocks.empty());
  std::string joined;
  for (const auto& b : blocks) joined += b;
  CHECK(joined.back() == '\n');
  CHECK(joined == text.substr(0, joined.size()));
  CHECK(joined.size() > text.size() / 4);

  // Two gzip members read as one text; bytes after the last are an error.
  std::string half = text.substr(0, 1000);
  const auto two = Blocks(Gzip(half) + Gzip(half), 100, &unterminated, &error);
  std::string both;
  for (const auto& b : two) both += b;
  CHECK(both == half + half);
  CHECK(error.empty());
  Blocks(Gzip(half) + "junk", 100, &unterminated, &error);
  CHECK(error == "t.trace: unexpected bytes after the end of the gzip stream");
}

TEST_CASE("line source: each gzip member's CRC-32 and length are checked") {
  // ISA-L checks the trailer, and memtl tells a wrong CRC from a wrong
  // length (LineSource::Inflater). The first member's trailer is placed on every
  // side of the 64 KiB boundary between two input chunks, by giving its
  // header a file name of the right length.
  std::string text_a;
  uint32_t x = 12345;
  while (Gzip(text_a).size() < 50000) {
    x = x * 1664525u + 1013904223u;
    text_a += "record " + std::to_string(x) + "\n";
  }
  const std::string text_b = "second member\n";
  const std::string a = Gzip(text_a);
  const std::string b = Gzip(text_b);
  const size_t chunk = size_t{64} << 10;
  for (size_t end = chunk - 12; end <= chunk + 12; ++end) {
    CAPTURE(end);
    std::string named = a;
    named[3] = static_cast<char>(named[3] | 0x08);  // FNAME
    named.insert(10, std::string(end - a.size() - 1, 'n') + '\0');
    REQUIRE(named.size() == end);
    bool unterminated = false;
    std::string error;
    std::string joined;
    for (const auto& blk : Blocks(named + b, 100, &unterminated, &error)) joined += blk;
    CHECK(error.empty());
    CHECK(joined == text_a + text_b);

    std::string bad_crc = named + b;
    bad_crc[end - 8] = static_cast<char>(bad_crc[end - 8] ^ 1);
    Blocks(bad_crc, 100, &unterminated, &error);
    CHECK(error == "t.trace: corrupt gzip data (incorrect data check)");

    std::string bad_size = named + b;
    bad_size[end - 1] = static_cast<char>(bad_size[end - 1] ^ 0x80);
    Blocks(bad_size, 100, &unterminated, &error);
    CHECK(error == "t.trace: corrupt gzip data (incorrect length check)");
  }
  // The second (last) member is checked too.
  std::string bad_last = a + b;
  bad_last[bad_last.size() - 5] = static_cast<char>(bad_last[bad_last.size() - 5] ^ 1);
  bool unterminated = false;
  std::string error;
  Blocks(bad_last, 100, &unterminated, &error);
  CHECK(error == "t.trace: corrupt gzip data (incorrect data check)");
}

// One gzip policy for every input format (issue #34): each member's fixed
// header is checked before ISA-L inflates it.
TEST_CASE("line source: reserved header flags, bytes after the last member, a cut header") {
  const std::string text = "one\ntwo\n";
  const std::string gz = Gzip(text);
  bool unterminated = false;
  std::string error;
  std::string joined;
  for (const auto& blk : Blocks(gz + Gzip("three\n"), 1, &unterminated, &error)) joined += blk;
  CHECK(error.empty());
  CHECK(joined == text + "three\n");
  // FLG bits 5-7 are reserved (RFC 1952): ISA-L inflated such a member.
  for (const int bit : {0x20, 0x40, 0x80}) {
    std::string flagged = gz;
    flagged[3] = static_cast<char>(flagged[3] | bit);
    Blocks(flagged, 1, &unterminated, &error);
    CHECK(error == "t.trace: corrupt gzip data (reserved header flags set)");
    Blocks(gz + flagged, 1, &unterminated, &error);
    CHECK(error == "t.trace: corrupt gzip data (reserved header flags set)");
  }
  // A byte after the member that is no gzip magic (a lone 0x1f was read
  // as the start of a member, and reported as a truncated one).
  Blocks(gz + "\x1f", 1, &unterminated, &error);
  CHECK(error == "t.trace: unexpected bytes after the end of the gzip stream");
  Blocks(gz + std::string(4, '\0'), 1, &unterminated, &error);
  CHECK(error == "t.trace: unexpected bytes after the end of the gzip stream");
  // A second member cut inside its header, or the first cut before its end.
  Blocks(gz + gz.substr(0, 6), 1, &unterminated, &error);
  CHECK(error == "t.trace: truncated gzip stream (the file ends inside a gzip member)");
  Blocks(gz.substr(0, gz.size() - 8), 1, &unterminated, &error);
  CHECK(error == "t.trace: truncated gzip stream (the file ends inside a gzip member)");
}

// Parser floor: how fast simdjson's On-Demand API and memtl's JsonCursor
// walk every value of every line of a plain JSON Lines trace (integers read
// as integers, strings as views), with nothing built. The reader does this
// walk plus its checks and the Trace arrays, so the difference here is the
// most a parser swap can gain (docs/performance.md, "Libraries measured").
// Three walks per round: JsonCursor per line, simdjson's iterate_many over
// the whole text, and simdjson's iterate per line (as the reader's blocks
// of lines would be parsed). -march=haswell lets simdjson's On-Demand code
// use AVX2 (without it, its header-only part compiles to the portable
// "fallback" kernel); the figures barely move either way.
//   g++ -O2 -march=haswell -std=c++20 -DSIMDJSON_THREADS_ENABLED=1 -I.
//       tests/bench/bench_json.cpp core/read/common/json_cursor.cpp -lsimdjson
//       -o build/bench_json && build/bench_json TRACE.jsonl
#include <simdjson.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "core/read/common/json_cursor.h"

namespace {

uint64_t sink = 0;

void WalkCursor(memtl::JsonCursor& c) {
  using K = memtl::JsonCursor::Kind;
  std::string scratch;
  switch (c.Peek()) {
    case K::kObject: {
      c.BeginObject();
      std::string_view key;
      while (c.NextKey(&key)) {
        sink += key.size();
        WalkCursor(c);
      }
      break;
    }
    case K::kArray:
      c.BeginArray();
      while (c.NextItem()) WalkCursor(c);
      break;
    case K::kString:
      sink += c.ReadString(&scratch).size();
      break;
    case K::kNumber: {
      bool is_int = false;
      bool overflow = false;
      sink += static_cast<uint64_t>(c.ReadInt64(&is_int, &overflow));
      break;
    }
    default:
      c.SkipValue();
  }
}

void WalkSimd(simdjson::ondemand::value v) {
  using T = simdjson::ondemand::json_type;
  switch (v.type().value()) {
    case T::object:
      for (auto field : v.get_object()) {
        sink += field.unescaped_key().value().size();
        WalkSimd(field.value().value());
      }
      break;
    case T::array:
      for (auto item : v.get_array()) WalkSimd(item.value());
      break;
    case T::string:
      sink += v.get_string().value().size();
      break;
    case T::number: {
      int64_t i = 0;
      if (v.get_int64().get(i) == simdjson::SUCCESS) sink += static_cast<uint64_t>(i);
      break;
    }
    default:
      break;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  std::ifstream in(argv[1], std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    size_t pos = 0;
    size_t lines = 0;
    while (pos < text.size()) {
      size_t nl = text.find('\n', pos);
      if (nl == std::string::npos) nl = text.size();
      memtl::JsonCursor c(std::string_view(text).substr(pos, nl - pos));
      WalkCursor(c);
      pos = nl + 1;
      ++lines;
    }
    auto t1 = std::chrono::steady_clock::now();
    simdjson::ondemand::parser parser;
    simdjson::padded_string padded(text);
    simdjson::ondemand::document_stream docs;
    if (parser.iterate_many(padded, size_t{16} << 20).get(docs)) return 2;
    size_t docs_n = 0;
    for (auto doc : docs) {
      WalkSimd(doc.get_value().value());
      ++docs_n;
    }
    auto t2 = std::chrono::steady_clock::now();
    // One document per line, as the reader would parse its blocks: the
    // text keeps SIMDJSON_PADDING bytes after every line's end.
    std::string padded_text = text;
    padded_text.append(simdjson::SIMDJSON_PADDING, ' ');
    size_t per_line = 0;
    for (size_t p = 0; p < text.size();) {
      size_t nl = text.find('\n', p);
      if (nl == std::string::npos) nl = text.size();
      simdjson::ondemand::document doc;
      if (parser.iterate(padded_text.data() + p, nl - p, padded_text.size() - p).get(doc)) return 3;
      WalkSimd(doc.get_value().value());
      p = nl + 1;
      ++per_line;
    }
    auto t3 = std::chrono::steady_clock::now();
    std::printf("ondemand per line %zu docs %.3f s\n", per_line,
                std::chrono::duration<double>(t3 - t2).count());
    const double a = std::chrono::duration<double>(t1 - t0).count();
    const double b = std::chrono::duration<double>(t2 - t1).count();
    std::printf("cursor %zu lines %.3f s %.0f MB/s | simdjson %zu docs %.3f s %.0f MB/s | %.2fx\n",
                lines, a, text.size() / a / 1e6, docs_n, b, text.size() / b / 1e6, a / b);
  }
  return sink == 42 ? 1 : 0;
}

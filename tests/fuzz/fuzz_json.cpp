// The JSON model of fuzz_structured's mutator (fuzz_json.h). Compiled, as
// the mutator is, without libFuzzer's coverage instrumentation.
#include "tests/fuzz/fuzz_json.h"

#include <cstdio>
#include <cstring>
#include <utility>

namespace memtl_fuzz {
namespace {

// Strict enough for the reader's output (the fixtures); a line it cannot
// parse is kept as bytes.
class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}
  bool Parse(Json* out) {
    if (!Value(out, 0)) return false;
    Ws();
    return pos_ == s_.size();
  }

 private:
  bool Eat(char c) {
    if (pos_ >= s_.size() || s_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  void Ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
  }
  bool String(std::string* out) {
    const size_t start = pos_;
    if (pos_ >= s_.size() || s_[pos_] != '"') return false;
    for (++pos_; pos_ < s_.size(); ++pos_) {
      if (s_[pos_] == '\\') {
        ++pos_;
      } else if (s_[pos_] == '"') {
        ++pos_;
        *out = std::string(s_.substr(start, pos_ - start));
        return true;
      }
    }
    return false;
  }
  bool Value(Json* out, int depth) {
    if (depth > 64) return false;
    Ws();
    if (pos_ >= s_.size()) return false;
    const char c = s_[pos_];
    if (c == '{') {
      out->kind = Json::kObject;
      ++pos_;
      Ws();
      if (Eat('}')) return true;
      while (true) {
        Ws();
        std::string key;
        if (!String(&key)) return false;
        Ws();
        if (!Eat(':')) return false;
        Json v;
        if (!Value(&v, depth + 1)) return false;
        out->Add(std::move(key), std::move(v));
        Ws();
        if (Eat(',')) continue;
        if (Eat('}')) return true;
        return false;
      }
    }
    if (c == '[') {
      out->kind = Json::kArray;
      ++pos_;
      Ws();
      if (Eat(']')) return true;
      while (true) {
        Json v;
        if (!Value(&v, depth + 1)) return false;
        out->items.push_back(std::move(v));
        Ws();
        if (Eat(',')) continue;
        if (Eat(']')) return true;
        return false;
      }
    }
    if (c == '"') {
      out->kind = Json::kString;
      return String(&out->text);
    }
    const size_t start = pos_;
    while (pos_ < s_.size() && std::strchr(",]} \t\r", s_[pos_]) == nullptr) ++pos_;
    const std::string_view tok = s_.substr(start, pos_ - start);
    if (tok.empty()) return false;
    out->text = std::string(tok);
    if (tok == "null") {
      out->kind = Json::kNull;
    } else if (tok == "true" || tok == "false") {
      out->kind = Json::kBool;
    } else {
      out->kind = Json::kNumber;  // also NaN and the like: kept as written
    }
    return true;
  }
  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

Json* Json::Find(std::string_view key) {
  for (auto& [k, v] : members) {
    if (k.size() == key.size() + 2 && std::string_view(k).substr(1, key.size()) == key) return &v;
  }
  return nullptr;
}

void Json::Add(std::string key, Json value) {
  members.push_back(Member{std::move(key), std::move(value)});
}

Json Number(std::string text) {
  Json j;
  j.kind = Json::kNumber;
  j.text = std::move(text);
  return j;
}
Json Number(int64_t v) { return Number(std::to_string(v)); }

int64_t Plus(int64_t v, int64_t d) {
  int64_t r = 0;
  if (!__builtin_add_overflow(v, d, &r)) return r;
  return d > 0 ? INT64_MAX : INT64_MIN;
}

Json Bool(bool v) {
  Json j;
  j.kind = Json::kBool;
  j.text = v ? "true" : "false";
  return j;
}

Json Empty(Json::Kind kind) {
  Json j;
  j.kind = kind;
  return j;
}

std::string Escape(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (b < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", b);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

Json String(std::string_view s) {
  Json j;
  j.kind = Json::kString;
  j.text = Escape(s);
  return j;
}

void Write(const Json& j, std::string* out) {
  switch (j.kind) {
    case Json::kNull:
      *out += "null";
      return;
    case Json::kBool:
    case Json::kNumber:
    case Json::kString:
      *out += j.text;
      return;
    case Json::kArray:
      *out += '[';
      for (size_t i = 0; i < j.items.size(); ++i) {
        if (i > 0) *out += ',';
        Write(j.items[i], out);
      }
      *out += ']';
      return;
    case Json::kObject:
      *out += '{';
      for (size_t i = 0; i < j.members.size(); ++i) {
        if (i > 0) *out += ',';
        *out += j.members[i].key;
        *out += ':';
        Write(j.members[i].value, out);
      }
      *out += '}';
      return;
  }
}

Line ParseLine(std::string text) {
  Line line;
  line.parsed = Parser(text).Parse(&line.v);
  if (!line.parsed) line.raw = std::move(text);
  return line;
}

Doc ParseDoc(std::string_view s) {
  Doc d;
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string_view::npos) end = s.size();
    d.lines.push_back(ParseLine(std::string(s.substr(start, end - start))));
    start = end + 1;
  }
  return d;
}

std::string WriteDoc(const Doc& d) {
  std::string out;
  for (const Line& l : d.lines) {
    if (l.parsed) {
      Write(l.v, &out);
    } else {
      out += l.raw;
    }
    out += '\n';
  }
  return out;
}

}  // namespace memtl_fuzz

// The schema registry (built-in table plus a trace's own schema records) and
// the matcher that ports PyTorch's SchemaMatcher rules.
#include <zlib.h>

#include <algorithm>
#include <string>
#include <utility>

#include "core/model/quote.h"
#include "core/schema/schema.h"

namespace memtl {

// Defined in the generated builtin_schemas.cpp: the text of
// core/schema/data/builtin_schemas.txt, zlib-compressed (embed_text.cpp).
extern const unsigned char kBuiltinSchemasZ[];
extern const size_t kBuiltinSchemasZSize;
extern const size_t kBuiltinSchemasSize;

SchemaRegistry::SchemaRegistry() = default;

namespace {

// The operator name a built-in line is indexed by: the text before '(' cut
// at the first '.' after "::" (the overload name); empty for a line that is
// not a schema (blank, a '#' comment, no '(').
std::string_view LineName(std::string_view line) {
  if (line.empty() || line.front() == '#') return {};
  const size_t paren = line.find('(');
  if (paren == std::string_view::npos) return {};
  const std::string_view full = line.substr(0, paren);
  const size_t ns = full.find("::");
  const size_t dot = ns == std::string_view::npos ? std::string_view::npos : full.find('.', ns + 2);
  return full.substr(0, dot);
}

}  // namespace

SchemaRegistry SchemaRegistry::Builtin() { return BuiltinFiltered(nullptr); }

SchemaRegistry SchemaRegistry::Builtin(const StringTable& names) { return BuiltinFiltered(&names); }

// Inflates the embedded table a piece at a time and keeps the lines whose
// name passes the filter (all without one). Only the kept lines are copied;
// the text is never whole in memory unless every line is kept.
SchemaRegistry SchemaRegistry::BuiltinFiltered(const StringTable* names) {
  SchemaRegistry reg;
  if (names == nullptr) reg.builtin_text_.reserve(kBuiltinSchemasSize);
  z_stream zs{};
  if (inflateInit(&zs) != Z_OK) return reg;
  zs.next_in = const_cast<Bytef*>(kBuiltinSchemasZ);
  zs.avail_in = static_cast<uInt>(kBuiltinSchemasZSize);
  std::string buf;  // inflated text not yet cut into lines
  constexpr size_t kPiece = 32 << 10;
  auto keep_lines = [&](bool at_end) {
    size_t pos = 0;
    for (;;) {
      size_t end = buf.find('\n', pos);
      if (end == std::string::npos) {
        if (!at_end || pos == buf.size()) break;
        end = buf.size();
      }
      const std::string_view line(buf.data() + pos, end - pos);
      pos = std::min(end + 1, buf.size());
      const std::string_view name = LineName(line);
      if (name.empty() || (names != nullptr && !names->Contains(name))) continue;
      reg.builtin_.push_back({static_cast<uint32_t>(reg.builtin_text_.size()),
                              static_cast<uint32_t>(name.size()),
                              static_cast<uint32_t>(line.size())});
      reg.builtin_text_.append(line);
    }
    buf.erase(0, pos);
  };
  int rc = Z_OK;
  while (rc == Z_OK) {
    const size_t old = buf.size();
    buf.resize(old + kPiece);
    zs.next_out = reinterpret_cast<Bytef*>(buf.data() + old);
    zs.avail_out = static_cast<uInt>(kPiece);
    rc = inflate(&zs, Z_NO_FLUSH);
    buf.resize(old + kPiece - zs.avail_out);
    keep_lines(rc == Z_STREAM_END);
  }
  inflateEnd(&zs);
  // The table is generated and tested (a unit test checks every line is
  // in); a table that does not inflate whole leaves the lines read so far.
  reg.builtin_text_.shrink_to_fit();
  std::stable_sort(reg.builtin_.begin(), reg.builtin_.end(),
                   [&](const BuiltinLine& a, const BuiltinLine& b) {
                     return reg.LineNameOf(a) < reg.LineNameOf(b);
                   });
  return reg;
}

Status SchemaRegistry::Override(const std::string& op, std::vector<std::string> schemas) {
  for (const auto& s : schemas) {
    auto fs = ParseSchema(s);
    if (!fs.ok()) return fs.status();
    if (fs.value().name != op) {
      return Status::Error("schema " + Quote(s) + " is listed under operator " + Quote(op));
    }
  }
  parsed_.erase(op);  // a lookup before this override parsed what it replaces
  overrides_[op] = std::move(schemas);
  return Status();
}

std::pair<SchemaRegistry::LineIt, SchemaRegistry::LineIt> SchemaRegistry::BuiltinRange(
    std::string_view name) const {
  struct NameLess {
    const SchemaRegistry& r;
    bool operator()(const BuiltinLine& a, std::string_view b) const { return r.LineNameOf(a) < b; }
    bool operator()(std::string_view a, const BuiltinLine& b) const { return a < r.LineNameOf(b); }
  };
  return std::equal_range(builtin_.begin(), builtin_.end(), name, NameLess{*this});
}

const std::vector<FunctionSchema>* SchemaRegistry::Lookup(std::string_view name) const {
  if (name.find("::") == std::string_view::npos) return nullptr;
  if (auto it = parsed_.find(name); it != parsed_.end()) return &it->second;
  std::vector<FunctionSchema> parsed;
  // Override parsed its texts already; the built-in table is generated and
  // tested, and an entry of it that does not parse is skipped rather than
  // failing every trace.
  auto add = [&parsed](std::string_view text) {
    auto fs = ParseSchema(text);
    if (fs.ok()) parsed.push_back(std::move(fs.value()));
  };
  if (auto it = overrides_.find(name); it != overrides_.end()) {
    for (const auto& text : it->second) add(text);
  } else {
    const auto [first, last] = BuiltinRange(name);
    if (first == last) return &empty_;
    for (auto l = first; l != last; ++l) add(LineText(*l));
  }
  return &parsed_.emplace(std::string(name), std::move(parsed)).first->second;
}

std::vector<std::string> SchemaRegistry::Texts(std::string_view name) const {
  if (auto it = overrides_.find(name); it != overrides_.end()) return it->second;
  std::vector<std::string> texts;
  const auto [first, last] = BuiltinRange(name);
  for (auto l = first; l != last; ++l) texts.emplace_back(LineText(*l));
  return texts;
}

Status SchemaRegistry::CheckAll() const {
  // In name order, each name's schemas in file order; an override replaces
  // the built-in lines of its name.
  auto b = builtin_.begin();
  auto o = overrides_.begin();
  while (b != builtin_.end() || o != overrides_.end()) {
    if (o == overrides_.end() || (b != builtin_.end() && LineNameOf(*b) < o->first)) {
      for (; b != builtin_.end() && (o == overrides_.end() || LineNameOf(*b) < o->first); ++b) {
        auto fs = ParseSchema(LineText(*b));
        if (!fs.ok()) return fs.status();
      }
      continue;
    }
    for (; b != builtin_.end() && LineNameOf(*b) == o->first; ++b) {
    }
    for (const auto& t : o->second) {
      auto fs = ParseSchema(t);
      if (!fs.ok()) return fs.status();
    }
    ++o;
  }
  return Status();
}

bool SchemaRegistry::AnyOverloadWrites(std::string_view name, size_t index) const {
  const auto* schemas = Lookup(name);
  if (schemas == nullptr) return false;
  for (const auto& s : *schemas) {
    if (index < s.arguments.size() && s.arguments[index].is_write) return true;
  }
  return false;
}

bool TypeMatches(Observed observed, const SchemaType& type) {
  switch (type.kind) {
    case SchemaType::kOptional:
      return observed == Observed::kNone || TypeMatches(observed, type.elements[0]);
    case SchemaType::kAny:
      return true;
    case SchemaType::kList:
      // Only List[Tensor] is recorded as a list; any other list type can
      // only match an uncaptured (None) input.
      if (type.elements[0].kind == SchemaType::kTensor) return observed == Observed::kTensorList;
      return observed == Observed::kNone;
    case SchemaType::kTensor:
      return observed == Observed::kTensor;
    case SchemaType::kNone:
      return observed == Observed::kNone;
    case SchemaType::kBool:
      return observed == Observed::kBool;
    case SchemaType::kInt:  // Python: isinstance(True, int) holds
      return observed == Observed::kInt || observed == Observed::kBool;
    case SchemaType::kFloat:
      return observed == Observed::kFloat;
    case SchemaType::kComplex:
      return observed == Observed::kComplex;
    case SchemaType::kNumber:
      return observed == Observed::kBool || observed == Observed::kInt ||
             observed == Observed::kFloat || observed == Observed::kComplex;
    default:
      // A type the profiler never records: only an uncaptured input fits.
      return observed == Observed::kNone;
  }
}

std::vector<const FunctionSchema*> MatchSchemas(const std::vector<FunctionSchema>* schemas,
                                                const std::vector<Observed>& observed) {
  std::vector<const FunctionSchema*> out;
  if (schemas == nullptr) return out;
  for (const auto& s : *schemas) {
    if (s.arguments.size() != observed.size()) continue;
    bool ok = true;
    for (size_t i = 0; i < observed.size() && ok; ++i)
      ok = TypeMatches(observed[i], s.arguments[i].type);
    if (ok) out.push_back(&s);
  }
  return out;
}

std::vector<int8_t> InputsAreMutable(const std::vector<const FunctionSchema*>& matches,
                                     size_t num_inputs) {
  if (matches.empty()) return std::vector<int8_t>(num_inputs, -1);
  std::vector<int8_t> out(matches.front()->arguments.size(), 0);
  for (const auto* s : matches) {
    for (size_t i = 0; i < s->arguments.size() && i < out.size(); ++i) {
      if (s->arguments[i].is_write) out[i] = 1;
    }
  }
  return out;
}

}  // namespace memtl

// Recursive-descent parser for PyTorch operator schema strings. It accepts the
// grammar of torch/csrc/jit/frontend/function_schema_parser.cpp as far as the
// registered schemas use it: overload names, alias annotations before and
// after list brackets, optionals, fixed-size lists, defaults (skipped, only
// their presence is kept), keyword-only marker, varargs and return tuples.
#include <cctype>

#include "core/model/quote.h"
#include "core/schema/schema.h"

namespace memtl {

namespace {

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Expected<FunctionSchema> Run() {
    FunctionSchema fs;
    const size_t open = s_.find('(');
    if (open == std::string_view::npos) return Err("missing '(' after the operator name");
    std::string_view full = Trim(s_.substr(0, open));
    const size_t ns = full.find("::");
    if (ns == std::string_view::npos || ns == 0)
      return Err("operator name needs a namespace (\"ns::name\")");
    const size_t dot = full.find('.', ns + 2);
    fs.name = std::string(full.substr(0, dot));
    if (dot != std::string_view::npos) fs.overload = std::string(full.substr(dot + 1));
    if (!ValidName(fs.name.substr(ns + 2)) || !ValidName(fs.name.substr(0, ns)) ||
        (dot != std::string_view::npos && !ValidName(fs.overload))) {
      return Err("invalid operator name \"" + std::string(full.substr(0, 80)) + "\"");
    }
    pos_ = open + 1;
    if (!ArgumentList(&fs.arguments, &fs.is_vararg, ')', true)) return Err(error_);
    Skip();
    if (!Eat("->")) return Err("expected '->' after the arguments");
    Skip();
    if (Peek() == '(') {
      ++pos_;
      if (!ArgumentList(&fs.returns, &fs.is_varret, ')', false)) return Err(error_);
    } else if (s_.substr(pos_, 3) == "...") {
      pos_ += 3;
      fs.is_varret = true;
    } else {
      SchemaArgument ret;
      if (!Argument(&ret, false)) return Err(error_);
      fs.returns.push_back(std::move(ret));
    }
    Skip();
    if (pos_ != s_.size()) return Err("unexpected text after the return type");
    return fs;
  }

 private:
  static std::string_view Trim(std::string_view v) {
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.front()))) v.remove_prefix(1);
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.remove_suffix(1);
    return v;
  }
  static bool ValidName(std::string_view v) {
    if (v.empty()) return false;
    for (char c : v) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
    }
    return true;
  }
  Status Err(const std::string& what) const {
    return Status::Error("schema " + Quote(s_) + ": " + what);
  }
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void Skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool Eat(std::string_view tok) {
    if (s_.substr(pos_, tok.size()) == tok) {
      pos_ += tok.size();
      return true;
    }
    return false;
  }
  bool Fail(std::string what) {
    if (error_.empty()) error_ = std::move(what) + " at offset " + std::to_string(pos_);
    return false;
  }
  std::string_view Ident() {
    const size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) ||
                                s_[pos_] == '_' || s_[pos_] == '.')) {
      ++pos_;
    }
    return s_.substr(start, pos_ - start);
  }

  bool ArgumentList(std::vector<SchemaArgument>* out, bool* vararg, char close, bool is_args) {
    bool kwarg_only = false;
    Skip();
    if (Peek() == close) {
      ++pos_;
      return true;
    }
    for (;;) {
      Skip();
      if (is_args && Peek() == '*' && s_.substr(pos_, 2) != "*)") {
        ++pos_;
        kwarg_only = true;
      } else if (Eat("...")) {
        *vararg = true;
      } else {
        SchemaArgument arg;
        arg.kwarg_only = kwarg_only;
        if (!Argument(&arg, is_args)) return false;
        out->push_back(std::move(arg));
      }
      Skip();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == close) {
        ++pos_;
        return true;
      }
      return Fail(std::string("expected ',' or '") + close + "'");
    }
  }

  bool Alias(SchemaArgument* arg) {
    // At '(' of an alias annotation such as "(a!)", "(a -> *)", "(a|b)".
    const size_t start = ++pos_;
    while (pos_ < s_.size() && s_[pos_] != ')') {
      const char c = s_[pos_];
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '!' || c == '*' || c == '|' ||
            c == '-' || c == '>' || c == ' ' || c == '_')) {
        return Fail("invalid alias annotation");
      }
      ++pos_;
    }
    if (pos_ >= s_.size()) return Fail("unterminated alias annotation");
    const std::string_view text = s_.substr(start, pos_ - start);
    ++pos_;
    if (text.empty()) return Fail("empty alias annotation");
    if (text.find('!') != std::string_view::npos) arg->is_write = true;
    if (!arg->alias.empty()) arg->alias += ",";
    arg->alias += std::string(text);
    return true;
  }

  static bool IsContainerName(std::string_view n) {
    return n == "Dict" || n == "Future" || n == "RRef" || n == "Await" || n == "Union" ||
           n == "Tuple" || n == "Optional" || n == "List";
  }

  // Comma-separated types up to ')' (after '('): a tuple's fields, which may
  // be named, or a container type's parameters.
  bool TypeList(std::vector<SchemaType>* out, bool named_fields) {
    Skip();
    if (named_fields && Peek() == ')') {
      ++pos_;
      return true;
    }
    for (;;) {
      SchemaArgument inner;
      if (!Type(&inner.type, &inner)) return false;
      Skip();
      if (named_fields && std::isalpha(static_cast<unsigned char>(Peek()))) Ident();
      out->push_back(std::move(inner.type));
      Skip();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == ')') {
        ++pos_;
        return true;
      }
      return Fail(named_fields ? "expected ',' or ')' in a tuple type"
                               : "expected ',' or ')' in a type's parameters");
    }
  }

  bool BaseType(SchemaType* t, SchemaArgument* arg) {
    Skip();
    if (Peek() == '(') {  // tuple type: (T1, T2)
      ++pos_;
      if (!Nest()) return false;
      t->kind = SchemaType::kTuple;
      t->name = "Tuple";
      return TypeList(&t->elements, true);
    }
    const std::string_view name = Ident();
    if (name.empty()) return Fail("expected a type");
    t->name = std::string(name);
    static constexpr std::pair<std::string_view, SchemaType::Kind> kKinds[] = {
        {"Tensor", SchemaType::kTensor},   {"int", SchemaType::kInt},
        {"SymInt", SchemaType::kInt},      {"ScalarType", SchemaType::kInt},
        {"Layout", SchemaType::kInt},      {"MemoryFormat", SchemaType::kInt},
        {"float", SchemaType::kFloat},     {"SymFloat", SchemaType::kFloat},
        {"bool", SchemaType::kBool},       {"SymBool", SchemaType::kBool},
        {"complex", SchemaType::kComplex}, {"Scalar", SchemaType::kNumber},
        {"number", SchemaType::kNumber},   {"str", SchemaType::kStr},
        {"Dimname", SchemaType::kStr},     {"NoneType", SchemaType::kNone},
        {"None", SchemaType::kNone},       {"Any", SchemaType::kAny}};
    t->kind = SchemaType::kOther;
    for (const auto& [n, k] : kKinds) {
      if (n == name) t->kind = k;
    }
    if (Peek() == '(' && IsContainerName(name)) {
      ++pos_;
      if (!Nest()) return false;
      if (!TypeList(&t->elements, false)) return false;
    }
    if (Peek() == '(') return Alias(arg);
    return true;
  }

  bool Type(SchemaType* t, SchemaArgument* arg) {
    if (!BaseType(t, arg)) return false;
    for (;;) {
      if (Peek() == '[') {
        ++pos_;
        if (!Nest()) return false;
        int n = -1;
        if (std::isdigit(static_cast<unsigned char>(Peek()))) {
          n = 0;
          while (std::isdigit(static_cast<unsigned char>(Peek()))) {
            n = n * 10 + (s_[pos_] - '0');
            if (n > 1'000'000) return Fail("list size too large");
            ++pos_;
          }
        }
        if (Peek() != ']') return Fail("expected ']'");
        ++pos_;
        SchemaType list;
        list.kind = SchemaType::kList;
        list.name = "List";
        list.fixed_size = n;
        list.elements.push_back(std::move(*t));
        *t = std::move(list);
        if (Peek() == '(') {
          if (!Alias(arg)) return false;
        }
      } else if (Peek() == '?') {
        ++pos_;
        if (!Nest()) return false;
        SchemaType opt;
        opt.kind = SchemaType::kOptional;
        opt.name = "Optional";
        opt.elements.push_back(std::move(*t));
        *t = std::move(opt);
      } else {
        return true;
      }
    }
  }

  bool SkipDefault() {
    int depth = 0;
    const size_t start = pos_;
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == '"' || c == '\'') {
        const char q = c;
        ++pos_;
        while (pos_ < s_.size() && s_[pos_] != q) pos_ += (s_[pos_] == '\\') ? 2 : 1;
        if (pos_ >= s_.size()) return Fail("unterminated string in a default value");
        ++pos_;
        continue;
      }
      if (c == '[' || c == '(') ++depth;
      if (c == ']' || c == ')') {
        if (depth == 0) break;
        --depth;
      }
      if (c == ',' && depth == 0) break;
      ++pos_;
    }
    if (pos_ == start) return Fail("missing default value");
    return true;
  }

  bool Argument(SchemaArgument* arg, bool allow_default) {
    nested_ = 0;
    if (!Type(&arg->type, arg)) return false;
    Skip();
    if (std::isalpha(static_cast<unsigned char>(Peek())) || Peek() == '_') {
      arg->name = std::string(Ident());
      Skip();
    }
    if (allow_default && Peek() == '=') {
      ++pos_;
      Skip();
      arg->has_default = true;
      if (!SkipDefault()) return false;
    }
    return true;
  }

  // One more container, tuple, list or optional in the argument being
  // parsed. PyTorch's registered schemas have at most three in one argument
  // (Tensor?[]?); the bound keeps the height of a SchemaType, and so this
  // recursive parser and SchemaType's recursive destructor, off the end of
  // the stack on a hostile trace.
  bool Nest() {
    static constexpr int kMaxNested = 64;
    return ++nested_ <= kMaxNested || Fail("more than 64 nested types in one argument");
  }

  std::string_view s_;
  size_t pos_ = 0;
  int nested_ = 0;  // Nest()s in the current argument
  std::string error_;
};

}  // namespace

Expected<FunctionSchema> ParseSchema(std::string_view text) {
  if (text.size() > (1u << 16)) return Status::Error("schema string longer than 64 KiB");
  return Parser(text).Run();
}

}  // namespace memtl

// Operator schemas: a parser for PyTorch's schema strings, a registry that
// answers "which overloads does this op name have", and the matcher that
// decides, as PyTorch's SchemaMatcher does, which overloads fit what the
// profiler observed and therefore which inputs an op may have written.
//
// The profiler records an op's name but not its overload, so the overload is
// recovered by comparing the observed argument kinds with every registered
// overload. Mutation is what matters downstream: an input is mutable if any
// matching overload writes it (`Tensor(a!)`); with no match every input is
// presumed mutable (reported as "unknown").
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/model/status.h"
#include "core/model/trace.h"

namespace memtl {

// A type as written in a schema. `Int` also stands for the types that
// PyTorch's schema parser gives an integer "fake type" (SymInt, ScalarType,
// Layout, MemoryFormat), `Float` for SymFloat, `Bool` for SymBool and `Str`
// for Dimname, because matching sees the fake type, as PyTorch's does.
struct SchemaType {
  enum Kind : uint8_t {
    kTensor,
    kInt,
    kFloat,
    kBool,
    kComplex,
    kNumber,  // "Scalar"
    kStr,
    kNone,
    kAny,
    kList,
    kOptional,
    kTuple,
    kOther,  // Device, Generator, Dict(...), Future(...), type variables, classes
  };
  Kind kind = kOther;
  std::string name;                  // as written, for kOther and for printing
  int fixed_size = -1;               // kList: `int[2]` has 2
  std::vector<SchemaType> elements;  // kList/kOptional: 1; kTuple/kOther: params
};

struct SchemaArgument {
  std::string name;
  SchemaType type;
  bool is_write = false;  // some alias annotation on it has '!'
  bool kwarg_only = false;
  bool has_default = false;
  std::string alias;  // the annotation text(s), e.g. "a!" or "a -> *"
};

struct FunctionSchema {
  std::string name;      // "aten::add"
  std::string overload;  // "Tensor"; empty for the default overload
  std::vector<SchemaArgument> arguments;
  std::vector<SchemaArgument> returns;
  bool is_vararg = false;
  bool is_varret = false;
};

// Parses one schema string such as
//   "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor".
Expected<FunctionSchema> ParseSchema(std::string_view text);

// Op name -> overloads. The built-in table is generated from Debian's torch
// (core/schema/data/builtin_schemas.txt); a trace's own schema records take
// precedence for the names they list. Schemas are parsed on first lookup.
class SchemaRegistry {
 public:
  SchemaRegistry();  // empty
  // Every built-in schema (PyTorch 1.13's operators).
  static SchemaRegistry Builtin();
  // Only the built-in schemas of the operator names in `names` (a trace's
  // string table): Lookup of any other name finds no built-in schema, so
  // every name the analysis looks up must be there.
  static SchemaRegistry Builtin(const StringTable& names);
  // Built-in lines kept.
  size_t builtin_size() const { return builtin_.size(); }
  // Adds or replaces every overload of `op` (a trace's schema record). Each
  // schema is parsed here, so that a bad one is an error now, but only its
  // text is kept: Lookup parses it again on first use, as it does the
  // built-in lines.
  Status Override(const std::string& op, std::vector<std::string> schemas);
  // Returns nullptr when `name` has no "::" (it cannot be an operator name,
  // PyTorch rejects it before any lookup) and an empty list for an unknown
  // operator.
  const std::vector<FunctionSchema>* Lookup(std::string_view name) const;
  // Parses every entry; the first schema that does not parse, if any.
  Status CheckAll() const;
  // Every overload of `name` whose argument at `index` is written.
  bool AnyOverloadWrites(std::string_view name, size_t index) const;
  // The texts of `name`'s overloads, as Lookup parses them (an override's,
  // else the built-in lines), in their order.
  std::vector<std::string> Texts(std::string_view name) const;

 private:
  static SchemaRegistry BuiltinFiltered(const StringTable* names);
  // One line of the built-in table: where its text starts in builtin_text_,
  // its length, and the length of its operator name (the text up to '(',
  // cut at the first '.' after "::").
  struct BuiltinLine {
    uint32_t offset;
    uint32_t name_len;
    uint32_t len;
  };
  std::string_view LineText(const BuiltinLine& l) const {
    return std::string_view(builtin_text_).substr(l.offset, l.len);
  }
  std::string_view LineNameOf(const BuiltinLine& l) const {
    return std::string_view(builtin_text_).substr(l.offset, l.name_len);
  }
  using LineIt = std::vector<BuiltinLine>::const_iterator;
  std::pair<LineIt, LineIt> BuiltinRange(std::string_view name) const;

  // The built-in lines kept (Builtin), sorted by name (stable: each name's
  // overloads in file order), and their text. The table is embedded
  // compressed and an analysis keeps only the lines of the op names its
  // trace holds (a few hundred of the table's 4000, parsed on first
  // lookup): the whole text, mapped or copied, was 0.4 to 0.7 MB of a
  // 10^5-event export's peak.
  std::vector<BuiltinLine> builtin_;
  std::string builtin_text_;
  // A trace's own schemas (Override), as text: a parsed schema takes about
  // 1.2 KB, and a trace's records, all parsed, were 0.2 MB of a 10^5-event
  // export's peak.
  std::map<std::string, std::vector<std::string>, std::less<>> overrides_;
  // Names parsed so far (an override's or the built-in lines), on first
  // lookup (so Lookup must not be called from two threads at once).
  mutable std::map<std::string, std::vector<FunctionSchema>, std::less<>> parsed_;
  std::vector<FunctionSchema> empty_;
};

// What one argument position held, as the matcher sees it.
enum class Observed : uint8_t {
  kNone,
  kTensor,
  kTensorList,
  kBadTensorList,
  kBool,
  kInt,
  kFloat,
  kComplex,
  kOther
};

// True when `observed` fits `type` under PyTorch's rules (a bool is also an
// int; Scalar takes any number; a tensor list needs every element identified).
bool TypeMatches(Observed observed, const SchemaType& type);

// The overloads of `schemas` whose arguments fit `observed` one for one.
std::vector<const FunctionSchema*> MatchSchemas(const std::vector<FunctionSchema>* schemas,
                                                const std::vector<Observed>& observed);

// Per input: 1 written, 0 not written, -1 unknown (no overload matched).
std::vector<int8_t> InputsAreMutable(const std::vector<const FunctionSchema*>& matches,
                                     size_t num_inputs);

}  // namespace memtl

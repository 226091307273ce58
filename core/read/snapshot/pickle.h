// A decoder for the subset of Python's pickle protocol (2 to 5) that a
// CUDA memory snapshot uses (torch.cuda.memory._dump_snapshot pickles a
// dict of lists, dicts, tuples, strings, numbers, booleans and None). It
// builds those values and nothing else: an opcode that would import a
// name, call something or build an object (GLOBAL, STACK_GLOBAL, REDUCE,
// BUILD, INST, OBJ, NEWOBJ, EXT*, PERSID...) is refused with its name and
// byte offset, so a pickle is never executed. Every resource it takes is
// bounded by the constants below, each refused with a message when passed.
//
// Values live in one flat array and refer to each other by index, so that
// nothing walks them recursively and a value shared through the memo (PyTorch
// dedups frames) is stored once; a cycle (a list appended to itself) is
// representable and harmless, since the readers walk a fixed schema.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/status.h"

namespace memtl::pickle {

// Values a pickle may build (about 10 per trace entry of a snapshot: 2^25
// holds several million entries), container items in all, and memo slots.
inline constexpr size_t kMaxValues = size_t{1} << 25;
inline constexpr size_t kMaxItems = size_t{1} << 26;
// MARKs open at once: the nesting of containers built with MARK (a
// snapshot nests about 7 deep).
inline constexpr size_t kMaxMarks = 64;
// The longest string or bytes value.
inline constexpr size_t kMaxStringBytes = size_t{1} << 26;

enum class Kind : uint8_t {
  kNone,
  kBool,
  kInt,
  kUInt,
  kFloat,
  kString,
  kBytes,
  kList,
  kTuple,
  kDict
};

// 16 bytes. kInt: `b` is an int64; kUInt: a value in [2^63, 2^64); kFloat:
// a double's bits; kBool: 0 or 1; kString, kBytes: `a` bytes at offset `b`
// of the decoded input; kList, kTuple, kDict: `a` indexes the items (a
// dict's are key, value, key, value...).
struct Value {
  Kind kind = Kind::kNone;
  uint32_t a = 0;
  uint64_t b = 0;
};

inline constexpr uint32_t kNoValue = 0xffffffffu;

// Why a decode failed, for callers and tests (the Status says it in words).
enum class Fault : uint8_t {
  kNone,
  kNotPickle,        // no PROTO opcode first, or a protocol below 2 or above 5
  kForbiddenOpcode,  // an opcode that imports, calls or builds objects
  kUnknownOpcode,    // not an opcode of any protocol, or one a snapshot never uses
  kTruncated,        // the input ends inside an opcode, or before STOP
  kLimit,            // one of the limits above is passed
  kMalformed,        // an opcode on a stack that does not fit it
};

struct FaultInfo {
  Fault fault = Fault::kNone;
  uint8_t opcode = 0;
  size_t offset = 0;
};

class Document {
 public:
  uint32_t root() const { return root_; }
  size_t size() const { return values_.size(); }
  const Value& at(uint32_t v) const { return values_[v]; }
  Kind kind(uint32_t v) const { return v < values_.size() ? values_[v].kind : Kind::kNone; }
  // A string's or bytes' text; empty for any other value.
  std::string_view Str(uint32_t v) const;
  // A list's or tuple's items; a dict's keys and values, alternating.
  std::span<const uint32_t> Items(uint32_t v) const;
  // A dict's value for a string key; kNoValue when absent or not a dict.
  uint32_t Get(uint32_t dict, std::string_view key) const;
  // An int (or bool) that fits in int64; nullopt for anything else.
  std::optional<int64_t> Int(uint32_t v) const;
  // An int in [0, 2^64); nullopt for anything else.
  std::optional<uint64_t> UInt(uint32_t v) const;
  // An int or a float as a double.
  std::optional<double> Number(uint32_t v) const;
  bool IsList(uint32_t v) const { return kind(v) == Kind::kList || kind(v) == Kind::kTuple; }

 private:
  friend class Decoder;
  std::string data_;
  std::vector<Value> values_;
  std::vector<std::vector<uint32_t>> items_;
  uint32_t root_ = kNoValue;
};

// Decodes `data`, a whole pickle (decoded from gzip if it was). Errors name
// `name` (already quoted), the opcode and its byte offset; `fault`, when
// given, says which kind of error it was.
Expected<Document> Decode(std::string data, const std::string& name, FaultInfo* fault = nullptr);

// The opcode's name in pickletools' spelling ("GLOBAL"), or empty.
std::string_view OpcodeName(uint8_t op);

}  // namespace memtl::pickle

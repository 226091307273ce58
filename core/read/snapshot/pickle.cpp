// The pickle subset decoder (pickle.h): a stack machine over the opcodes a
// snapshot's pickle uses, read from the protocol's definition (Python's
// Lib/pickletools.py documents every opcode and its argument).
#include "core/read/snapshot/pickle.h"

#include <bit>
#include <cstring>
#include <utility>

namespace memtl::pickle {

namespace {

// Every opcode of protocols 0 to 5: its constant, byte and pickletools name.
// The ones a snapshot's pickle uses are decoded; the ones that reach outside
// the data (imports, calls, object construction, persistent ids, out-of-band
// buffers) are refused as forbidden; the rest (protocol 0's text forms,
// sets) as not used by snapshots.
#define MEMTL_PICKLE_OPCODES(X)                 \
  X(kMark, '(', "MARK")                         \
  X(kStop, '.', "STOP")                         \
  X(kPop, '0', "POP")                           \
  X(kPopMark, '1', "POP_MARK")                  \
  X(kDup, '2', "DUP")                           \
  X(kFloat, 'F', "FLOAT")                       \
  X(kInt, 'I', "INT")                           \
  X(kBinInt, 'J', "BININT")                     \
  X(kBinInt1, 'K', "BININT1")                   \
  X(kLong, 'L', "LONG")                         \
  X(kBinInt2, 'M', "BININT2")                   \
  X(kNone, 'N', "NONE")                         \
  X(kPersId, 'P', "PERSID")                     \
  X(kBinPersId, 'Q', "BINPERSID")               \
  X(kReduce, 'R', "REDUCE")                     \
  X(kString, 'S', "STRING")                     \
  X(kBinString, 'T', "BINSTRING")               \
  X(kShortBinString, 'U', "SHORT_BINSTRING")    \
  X(kUnicode, 'V', "UNICODE")                   \
  X(kBinUnicode, 'X', "BINUNICODE")             \
  X(kAppend, 'a', "APPEND")                     \
  X(kBuild, 'b', "BUILD")                       \
  X(kGlobal, 'c', "GLOBAL")                     \
  X(kDict, 'd', "DICT")                         \
  X(kEmptyDict, '}', "EMPTY_DICT")              \
  X(kAppends, 'e', "APPENDS")                   \
  X(kGet, 'g', "GET")                           \
  X(kBinGet, 'h', "BINGET")                     \
  X(kInst, 'i', "INST")                         \
  X(kLongBinGet, 'j', "LONG_BINGET")            \
  X(kList, 'l', "LIST")                         \
  X(kEmptyList, ']', "EMPTY_LIST")              \
  X(kObj, 'o', "OBJ")                           \
  X(kPut, 'p', "PUT")                           \
  X(kBinPut, 'q', "BINPUT")                     \
  X(kLongBinPut, 'r', "LONG_BINPUT")            \
  X(kSetItem, 's', "SETITEM")                   \
  X(kTuple, 't', "TUPLE")                       \
  X(kEmptyTuple, ')', "EMPTY_TUPLE")            \
  X(kSetItems, 'u', "SETITEMS")                 \
  X(kBinFloat, 'G', "BINFLOAT")                 \
  X(kProto, 0x80, "PROTO")                      \
  X(kNewObj, 0x81, "NEWOBJ")                    \
  X(kExt1, 0x82, "EXT1")                        \
  X(kExt2, 0x83, "EXT2")                        \
  X(kExt4, 0x84, "EXT4")                        \
  X(kTuple1, 0x85, "TUPLE1")                    \
  X(kTuple2, 0x86, "TUPLE2")                    \
  X(kTuple3, 0x87, "TUPLE3")                    \
  X(kNewTrue, 0x88, "NEWTRUE")                  \
  X(kNewFalse, 0x89, "NEWFALSE")                \
  X(kLong1, 0x8a, "LONG1")                      \
  X(kLong4, 0x8b, "LONG4")                      \
  X(kBinBytes, 'B', "BINBYTES")                 \
  X(kShortBinBytes, 'C', "SHORT_BINBYTES")      \
  X(kShortBinUnicode, 0x8c, "SHORT_BINUNICODE") \
  X(kBinUnicode8, 0x8d, "BINUNICODE8")          \
  X(kBinBytes8, 0x8e, "BINBYTES8")              \
  X(kEmptySet, 0x8f, "EMPTY_SET")               \
  X(kAddItems, 0x90, "ADDITEMS")                \
  X(kFrozenSet, 0x91, "FROZENSET")              \
  X(kNewObjEx, 0x92, "NEWOBJ_EX")               \
  X(kStackGlobal, 0x93, "STACK_GLOBAL")         \
  X(kMemoize, 0x94, "MEMOIZE")                  \
  X(kFrame, 0x95, "FRAME")                      \
  X(kByteArray8, 0x96, "BYTEARRAY8")            \
  X(kNextBuffer, 0x97, "NEXT_BUFFER")           \
  X(kReadOnlyBuffer, 0x98, "READONLY_BUFFER")

enum Op : uint8_t {
#define MEMTL_PICKLE_ENUM(name, byte, text) name = (byte),
  MEMTL_PICKLE_OPCODES(MEMTL_PICKLE_ENUM)
#undef MEMTL_PICKLE_ENUM
};

bool Forbidden(uint8_t op) {
  switch (op) {
    case kPersId:
    case kBinPersId:
    case kReduce:
    case kBuild:
    case kGlobal:
    case kInst:
    case kObj:
    case kNewObj:
    case kExt1:
    case kExt2:
    case kExt4:
    case kNewObjEx:
    case kStackGlobal:
    case kNextBuffer:
    case kReadOnlyBuffer:
      return true;
    default:
      return false;
  }
}

std::string Hex(uint8_t b) {
  constexpr char kDigits[] = "0123456789abcdef";
  return std::string("0x") + kDigits[b >> 4] + kDigits[b & 15];
}

// Thrown inside the decoder, caught at its one entry point.
struct Stop {
  Fault fault;
  std::string what;
};

}  // namespace

std::string_view OpcodeName(uint8_t op) {
  switch (op) {
#define MEMTL_PICKLE_NAME(name, byte, text) \
  case name:                                \
    return text;
    MEMTL_PICKLE_OPCODES(MEMTL_PICKLE_NAME)
#undef MEMTL_PICKLE_NAME
    default:
      return {};
  }
}

std::string_view Document::Str(uint32_t v) const {
  const Kind k = kind(v);
  if (k != Kind::kString && k != Kind::kBytes) return {};
  return std::string_view(data_).substr(values_[v].b, values_[v].a);
}

std::span<const uint32_t> Document::Items(uint32_t v) const {
  const Kind k = kind(v);
  if (k != Kind::kList && k != Kind::kTuple && k != Kind::kDict) return {};
  return items_[values_[v].a];
}

uint32_t Document::Get(uint32_t dict, std::string_view key) const {
  if (kind(dict) != Kind::kDict) return kNoValue;
  const std::span<const uint32_t> items = Items(dict);
  for (size_t i = 0; i + 1 < items.size(); i += 2)
    if (kind(items[i]) == Kind::kString && Str(items[i]) == key) return items[i + 1];
  return kNoValue;
}

std::optional<int64_t> Document::Int(uint32_t v) const {
  const Kind k = kind(v);
  if (k != Kind::kInt && k != Kind::kBool) return std::nullopt;
  return static_cast<int64_t>(values_[v].b);
}

std::optional<uint64_t> Document::UInt(uint32_t v) const {
  const Kind k = kind(v);
  if (k == Kind::kUInt) return values_[v].b;
  if (k == Kind::kInt && static_cast<int64_t>(values_[v].b) >= 0) return values_[v].b;
  return std::nullopt;
}

std::optional<double> Document::Number(uint32_t v) const {
  switch (kind(v)) {
    case Kind::kInt:
    case Kind::kBool:
      return static_cast<double>(static_cast<int64_t>(values_[v].b));
    case Kind::kUInt:
      return static_cast<double>(values_[v].b);
    case Kind::kFloat:
      return std::bit_cast<double>(values_[v].b);
    default:
      return std::nullopt;
  }
}

class Decoder {
 public:
  Decoder(Document& d, std::string data) : d_(d) {
    d_.data_ = std::move(data);
    s_ = d_.data_;
  }

  void Run() {
    if (s_.size() < 2 || static_cast<uint8_t>(s_[0]) != kProto)
      throw Stop{Fault::kNotPickle, "not a pickle (no PROTO opcode at byte 0)"};
    while (true) {
      op_at_ = p_;
      if (p_ >= s_.size()) {
        op_at_end_ = true;
        throw Stop{Fault::kTruncated, "the pickle ends before its STOP opcode"};
      }
      op_ = Byte();
      if (op_ == kStop) break;
      Step();
    }
    if (stack_.empty()) Malformed("STOP on an empty stack");
    d_.root_ = stack_.back();
  }

  uint8_t op() const { return op_; }
  size_t op_at() const { return op_at_; }
  bool op_at_end() const { return op_at_end_; }

 private:
  [[noreturn]] void Malformed(const std::string& what) { throw Stop{Fault::kMalformed, what}; }
  [[noreturn]] void Limit(const std::string& what) { throw Stop{Fault::kLimit, what}; }

  void Need(uint64_t n) {
    if (n > s_.size() - p_) throw Stop{Fault::kTruncated, "the pickle ends inside it"};
  }
  uint8_t Byte() {
    Need(1);
    return static_cast<uint8_t>(s_[p_++]);
  }
  uint64_t Le(size_t n) {
    Need(n);
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t{static_cast<uint8_t>(s_[p_ + i])} << (8 * i);
    p_ += n;
    return v;
  }

  uint32_t New(Kind kind, uint32_t a = 0, uint64_t b = 0) {
    if (d_.values_.size() >= kMaxValues)
      Limit("more than " + std::to_string(kMaxValues) + " values");
    d_.values_.push_back({kind, a, b});
    return static_cast<uint32_t>(d_.values_.size() - 1);
  }
  uint32_t NewContainer(Kind kind) {
    const auto slot = static_cast<uint32_t>(d_.items_.size());
    const uint32_t v = New(kind, slot);
    d_.items_.emplace_back();
    return v;
  }
  void Push(uint32_t v) { stack_.push_back(v); }
  // The height of the stack's part above the last mark (the whole stack
  // when none is open).
  size_t Floor() const { return marks_.empty() ? 0 : marks_.back(); }
  uint32_t Pop() {
    if (stack_.size() <= Floor()) Malformed("nothing to take from the stack");
    const uint32_t v = stack_.back();
    stack_.pop_back();
    return v;
  }
  uint32_t Top() {
    if (stack_.size() <= Floor()) Malformed("nothing on the stack");
    return stack_.back();
  }
  // The values since the last mark, which goes.
  std::vector<uint32_t> PopMark() {
    if (marks_.empty()) Malformed("no MARK before it");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<uint32_t> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }
  void AddItems(uint32_t container, const uint32_t* items, size_t n) {
    items_total_ += n;
    if (items_total_ > kMaxItems)
      Limit("more than " + std::to_string(kMaxItems) + " container items");
    std::vector<uint32_t>& to = d_.items_[d_.values_[container].a];
    to.insert(to.end(), items, items + n);
  }
  void Append(const std::vector<uint32_t>& items) {
    const uint32_t list = Top();
    if (d_.values_[list].kind != Kind::kList) Malformed("appending to a value that is no list");
    AddItems(list, items.data(), items.size());
  }
  void SetItems(const std::vector<uint32_t>& items) {
    if (items.size() % 2 != 0) Malformed("a key without a value");
    const uint32_t dict = Top();
    if (d_.values_[dict].kind != Kind::kDict)
      Malformed("setting an item of a value that is no dict");
    AddItems(dict, items.data(), items.size());
  }
  void Tuple(std::vector<uint32_t> items) {
    const uint32_t t = NewContainer(Kind::kTuple);
    AddItems(t, items.data(), items.size());
    Push(t);
  }
  void Text(Kind kind, uint64_t n) {
    if (n > kMaxStringBytes)
      Limit("a string of " + std::to_string(n) + " bytes (more than " +
            std::to_string(kMaxStringBytes) + ")");
    Need(n);
    Push(New(kind, static_cast<uint32_t>(n), p_));
    p_ += n;
  }
  // LONG1 and LONG4: little-endian two's complement of `n` bytes; at most 64
  // bits of magnitude (an address is below 2^64).
  void Long(uint64_t n) {
    if (n > 9) Limit("an integer of " + std::to_string(n) + " bytes (more than 64 bits)");
    Need(n);
    const auto* b = reinterpret_cast<const uint8_t*>(s_.data() + p_);
    p_ += n;
    if (n == 9) {
      if (b[8] != 0) Limit("an integer of more than 64 bits");
      uint64_t v = 0;
      for (size_t i = 0; i < 8; ++i) v |= uint64_t{b[i]} << (8 * i);
      Push(New(static_cast<int64_t>(v) < 0 ? Kind::kUInt : Kind::kInt, 0, v));
      return;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t{b[i]} << (8 * i);
    if (n > 0 && n < 8 && (b[n - 1] & 0x80) != 0) v |= ~uint64_t{0} << (8 * n);  // sign-extend
    Push(New(Kind::kInt, 0, v));
  }
  void Put(uint64_t key) {
    if (key >= kMaxValues) Limit("memo key " + std::to_string(key) + " past the value limit");
    if (key >= memo_.size()) memo_.resize(key + 1, kNoValue);
    memo_[key] = Top();
  }
  void Get(uint64_t key) {
    if (key >= memo_.size() || memo_[key] == kNoValue)
      Malformed("memo key " + std::to_string(key) + " was never stored");
    Push(memo_[key]);
  }

  // One opcode: the framing, the stack's own, scalars and strings
  // (StepStack), then containers and the memo (StepContainer); anything
  // else is refused.
  void Step();
  bool StepStack();
  bool StepContainer();

  Document& d_;
  std::string_view s_;
  size_t p_ = 0;
  uint8_t op_ = 0;
  size_t op_at_ = 0;
  bool op_at_end_ = false;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::vector<uint32_t> memo_;
  size_t items_total_ = 0;
};

bool Decoder::StepStack() {
  switch (op_) {
    case kProto: {
      const uint8_t v = Byte();
      if (v < 2 || v > 5)
        throw Stop{Fault::kNotPickle,
                   "pickle protocol " + std::to_string(v) + " (memtl reads 2 to 5)"};
      return true;
    }
    case kFrame:
      Le(8);  // a hint for buffered reading; the input is whole here
      return true;
    case kMark:
      if (marks_.size() >= kMaxMarks)
        Limit("more than " + std::to_string(kMaxMarks) + " MARKs open (nested too deep)");
      marks_.push_back(stack_.size());
      return true;
    case kPop:
      if (!marks_.empty() && marks_.back() == stack_.size()) {
        marks_.pop_back();
      } else {
        Pop();
      }
      return true;
    case kPopMark:
      PopMark();
      return true;
    case kDup:
      Push(Top());
      return true;
    case kNone:
      Push(New(Kind::kNone));
      return true;
    case kNewTrue:
    case kNewFalse:
      Push(New(Kind::kBool, 0, op_ == kNewTrue ? 1 : 0));
      return true;
    case kBinInt:
      Push(New(Kind::kInt, 0,
               static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(Le(4))))));
      return true;
    case kBinInt1:
      Push(New(Kind::kInt, 0, Le(1)));
      return true;
    case kBinInt2:
      Push(New(Kind::kInt, 0, Le(2)));
      return true;
    case kLong1:
      Long(Le(1));
      return true;
    case kLong4:
      Long(Le(4));
      return true;
    case kBinFloat: {
      Need(8);
      uint64_t v = 0;  // big-endian
      for (size_t i = 0; i < 8; ++i) v = v << 8 | static_cast<uint8_t>(s_[p_ + i]);
      p_ += 8;
      Push(New(Kind::kFloat, 0, v));
      return true;
    }
    case kShortBinString:
    case kShortBinUnicode:
      Text(Kind::kString, Le(1));
      return true;
    case kBinString:
    case kBinUnicode:
      Text(Kind::kString, Le(4));
      return true;
    case kBinUnicode8:
      Text(Kind::kString, Le(8));
      return true;
    case kShortBinBytes:
      Text(Kind::kBytes, Le(1));
      return true;
    case kBinBytes:
      Text(Kind::kBytes, Le(4));
      return true;
    case kBinBytes8:
    case kByteArray8:
      Text(Kind::kBytes, Le(8));
      return true;
    default:
      return false;
  }
}

bool Decoder::StepContainer() {
  switch (op_) {
    case kEmptyDict:
      Push(NewContainer(Kind::kDict));
      return true;
    case kEmptyList:
      Push(NewContainer(Kind::kList));
      return true;
    case kEmptyTuple:
      Tuple({});
      return true;
    case kDict: {
      const std::vector<uint32_t> items = PopMark();
      const uint32_t d = NewContainer(Kind::kDict);
      Push(d);
      SetItems(items);
      return true;
    }
    case kList: {
      const std::vector<uint32_t> items = PopMark();
      Push(NewContainer(Kind::kList));
      Append(items);
      return true;
    }
    case kTuple:
      Tuple(PopMark());
      return true;
    case kTuple1:
    case kTuple2:
    case kTuple3: {
      std::vector<uint32_t> items(op_ - kTuple1 + 1);
      for (size_t i = items.size(); i-- > 0;) items[i] = Pop();
      Tuple(std::move(items));
      return true;
    }
    case kAppend: {
      const uint32_t v = Pop();
      Append({v});
      return true;
    }
    case kAppends:
      Append(PopMark());
      return true;
    case kSetItem: {
      const uint32_t v = Pop();
      const uint32_t k = Pop();
      SetItems({k, v});
      return true;
    }
    case kSetItems:
      SetItems(PopMark());
      return true;
    case kBinPut:
      Put(Le(1));
      return true;
    case kLongBinPut:
      Put(Le(4));
      return true;
    case kMemoize:
      Put(memo_.size());
      return true;
    case kBinGet:
      Get(Le(1));
      return true;
    case kLongBinGet:
      Get(Le(4));
      return true;
    default:
      return false;
  }
}

void Decoder::Step() {
  if (StepStack() || StepContainer()) return;
  const std::string_view name = OpcodeName(op_);
  if (Forbidden(op_)) {
    throw Stop{Fault::kForbiddenOpcode,
               "opcode " + std::string(name) + " (" + Hex(op_) +
                   ") would import, call or build an object: a memory snapshot holds only "
                   "dicts, lists, strings and numbers, and memtl never runs a pickle"};
  }
  throw Stop{Fault::kUnknownOpcode, name.empty() ? "unknown opcode " + Hex(op_)
                                                 : "opcode " + std::string(name) + " (" + Hex(op_) +
                                                       ") is not used by memory snapshots"};
}

Expected<Document> Decode(std::string data, const std::string& name, FaultInfo* fault) {
  Document d;
  Decoder dec(d, std::move(data));
  try {
    dec.Run();
  } catch (const Stop& s) {
    if (fault != nullptr) *fault = {s.fault, dec.op(), dec.op_at()};
    if (s.fault == Fault::kNotPickle)
      return Status::Error(StatusCode::kBadInput, name + ": " + s.what);
    std::string what = name + ": pickle byte " + std::to_string(dec.op_at()) + ": ";
    if (s.fault != Fault::kForbiddenOpcode && s.fault != Fault::kUnknownOpcode &&
        !dec.op_at_end()) {
      const std::string_view op = OpcodeName(dec.op());
      what += (op.empty() ? Hex(dec.op()) : std::string(op)) + ": ";
    }
    const StatusCode code =
        s.fault == Fault::kTruncated ? StatusCode::kTruncated : StatusCode::kBadInput;
    return Status::Error(code, what + s.what);
  }
  return d;
}

}  // namespace memtl::pickle

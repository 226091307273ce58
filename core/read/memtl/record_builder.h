// The trace reader's record builder: one JsonCursor pass per line, straight
// into the flat Trace arrays, with no per-line DOM. Keys may come in any
// order; every field is checked for presence and type so that a malformed
// trace yields "FILE: line N: ..." rather than a crash.
//
// Its methods are spread over one file per kind of record: the header
// (read_header.cpp), op, allocation and other records with their arguments
// (read_records.cpp), tensors (read_tensors.cpp), and python calls with
// their modules and optimizers (read_python.cpp). The small field readers
// below are inline: every record calls them several times.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/model/flat_map.h"
#include "core/model/quote.h"
#include "core/model/trace.h"
#include "core/read/common/json_cursor.h"

namespace memtl::read {

// Semantic errors inside a record; converted to a Status at the boundary.
struct RecordError : std::runtime_error {
  using std::runtime_error::runtime_error;
  bool not_a_trace = false;  // the header says the file is no memtl trace
};

[[noreturn]] inline void Fail(const std::string& what) { throw RecordError(what); }
[[noreturn]] inline void FailNotATrace(const std::string& what) {
  RecordError e(what);
  e.not_a_trace = true;
  throw e;
}

// Device strings as PyTorch parses them (c10::Device): "type" or
// "type:index", with a type PyTorch knows.
bool ValidDeviceName(std::string_view s);

// Whether `s` is the literal `lit`: the length first, then a comparison of
// a constant number of bytes, which the compiler turns into a few loads
// (string_view's operator== calls compare(), which the profile showed at
// 6% of reading).
template <size_t N>
bool Is(std::string_view s, const char (&lit)[N]) {
  return s.size() == N - 1 && std::memcmp(s.data(), lit, N - 1) == 0;
}

// The kind of the next value; text that is not JSON at all is a syntax
// error (JsonError), not a type error.
inline JsonCursor::Kind NextKind(JsonCursor& c) {
  const auto k = c.Peek();
  if (k == JsonCursor::Kind::kInvalid || k == JsonCursor::Kind::kEnd)
    c.SkipValue();  // throws JsonError
  return k;
}

// Tensor indices and impl numbers are 32-bit (kNone32 means none).
inline constexpr size_t kMaxTensors = size_t{1} << 31;

// The strings one block names (chunk mode), numbered in the order it first
// names them. They are views into the block's text, which lives until the
// block is appended, or into copies kept here for the few with escapes; so
// a block costs no allocation per string, where a StringTable of its own
// costs one or two each (a tenth of the workers' extra time).
class BlockNames {
 public:
  // `s`'s id; `stable`: `s` views the block's text (no copy needed).
  uint32_t Intern(std::string_view s, bool stable) {
    if (views_.size() * 2 >= slots_.size()) Grow();
    const size_t mask = slots_.size() - 1;
    for (size_t i = std::hash<std::string_view>()(s) & mask;; i = (i + 1) & mask) {
      const uint32_t id = slots_[i];
      if (id == 0) {
        if (!stable) s = copies_.emplace_back(s);
        views_.push_back(s);
        slots_[i] = static_cast<uint32_t>(views_.size());
        return slots_[i] - 1;
      }
      if (views_[id - 1] == s) return id - 1;
    }
  }
  const std::vector<std::string_view>& views() const { return views_; }
  void Clear() {
    views_.clear();
    std::fill(slots_.begin(), slots_.end(), 0);
    copies_.clear();
  }

 private:
  void Grow() {
    std::vector<uint32_t>(std::max<size_t>(slots_.size() * 2, 256), 0).swap(slots_);
    const size_t mask = slots_.size() - 1;
    for (uint32_t id = 1; id <= views_.size(); ++id) {
      size_t i = std::hash<std::string_view>()(views_[id - 1]) & mask;
      while (slots_[i] != 0) i = (i + 1) & mask;
      slots_[i] = id;
    }
  }
  std::vector<std::string_view> views_;  // by id
  std::vector<uint32_t> slots_;          // open addressing: id + 1, 0 empty
  std::deque<std::string> copies_;       // stable addresses
};

// What a block parsed on its own gives besides its records (Builder, chunk
// mode): what the merge needs to put them where the block's lines are.
struct ChunkExtras {
  BlockNames names;  // the string ids of its records (not its Trace's strings)
  // The "i" of the block's first event, assumed by the block's parse (the
  // events before it are not known yet) and checked by the merge; -1: the
  // block has no event.
  int64_t base = -1;
  std::vector<int64_t> t0;      // per event, its start time
  std::vector<uint64_t> impls;  // per tensor, its TensorImpl address (0: none)
  // Events whose parent is in an earlier block: (parent, start time), which
  // the merge compares for Trace::events_before_parent.
  std::vector<std::pair<uint32_t, int64_t>> outer;
};

class Builder {
 public:
  // `keep_shapes`: ReadOptions::keep_shapes.
  explicit Builder(Trace* trace, bool keep_shapes = false) : t_(trace), keep_shapes_(keep_shapes) {}
  // A builder of one block's records (the class comment), into `trace`
  // (empty but for its header) and `extras`. Without shapes.
  Builder(Trace* trace, ChunkExtras* extras) : t_(trace), chunk_(extras) {}

  // Keeps each event array reserved for `factor` times what it holds now
  // (the whole file, at the rate read so far); read_header.cpp says why.
  void ReserveFor(double factor);
  // The first line.
  void Header(JsonCursor& c);
  // The header's "model" (TraceHeader::model).
  void Model(JsonCursor& c);
  // Numbers the impls of the tensors read so far (Tensor::impl, and
  // Trace::num_impls); called once the records end.
  void FinishImpls();
  // Every later line.
  void Record(JsonCursor& c);
  // Puts the records a chunk-mode builder read from the next block of lines
  // after those read so far, exactly as reading its lines here would have;
  // false, changing nothing, when it cannot be sure to (read_merge.cpp).
  bool Append(Trace& part, const ChunkExtras& extras);

  // Device of a chunk-mode tensor that names none (a partial tensor), for
  // the merge to tell from a local device index.
  static constexpr DeviceIndex kNoTensorDevice = 0xffff;
  // state_begin of a chunk-mode parameter or optimizer with no "state" (in
  // order: 0, where a "state" at the start of the states also begins).
  static constexpr uint32_t kNoState = kNone32;

 private:
  enum class Kind : uint8_t { kOp, kAlloc, kPy, kOther, kSchema };

  // Every field a record may have; which ones are required depends on "k".
  struct Fields {
    Kind kind = Kind::kOther;
    bool has_k = false, has_i = false, has_p = false, has_name = false, has_t0 = false,
         has_t1 = false;
    bool has_t = false, has_ptr = false, has_bytes = false, has_dev = false, has_args = false;
    bool has_op = false, has_schemas = false;
    int64_t i = 0, p = 0, t0 = 0, t1 = 0, t = 0, seq = -1, bytes = 0;
    // PyTorch's thread ids are unsigned 64-bit: a python-tracer thread that
    // ran no op has 2^64-1.
    uint64_t tid = 0;
    uint32_t line = 0;  // a python call's line in its caller (0: not said)
    int64_t total_allocated = 0, total_reserved = 0, id = -1, aid = -1;
    uint64_t ptr = 0;
    uint32_t name = 0;
    DeviceIndex dev = 0;
    RecordScope scope = RecordScope::kFunction;
    uint32_t args_begin = 0, refs_begin = 0;
    uint32_t module = kNone32, optimizer = kNone32;
    std::string op;
    std::vector<std::string> schemas;
  };

  static void Require(bool present, const char* key) {
    if (!present) Fail(std::string("missing field \"") + key + "\"");
  }

  int64_t Int(JsonCursor& c, const char* key) {
    if (NextKind(c) != JsonCursor::Kind::kNumber)
      Fail(std::string("expected an integer for \"") + key + "\"");
    bool is_int = false, overflow = false;
    const int64_t v = c.ReadInt64(&is_int, &overflow);
    if (!is_int) Fail(std::string("expected an integer for \"") + key + "\"");
    if (overflow) Fail(std::string("\"") + key + "\" is out of range");
    return v;
  }

  int64_t OptInt(JsonCursor& c, const char* key, int64_t null_value) {
    if (c.Peek() == JsonCursor::Kind::kNull) {
      c.ReadNull();
      return null_value;
    }
    return Int(c, key);
  }

  uint64_t Uint64(JsonCursor& c, const char* key) {
    if (NextKind(c) != JsonCursor::Kind::kNumber)
      Fail(std::string("expected an unsigned integer for \"") + key + "\"");
    bool is_int = false, overflow = false;
    bool negative = false;
    const uint64_t v = c.ReadUint64(&is_int, &overflow, &negative);
    if (!is_int) Fail(std::string("expected an unsigned integer for \"") + key + "\"");
    if (negative) Fail(std::string("\"") + key + "\" must not be negative");
    if (overflow) Fail(std::string("\"") + key + "\" is out of range (more than 2^64-1)");
    return v;
  }

  // A nullable unsigned 64-bit integer (an address, a thread id): false for null, else true with
  // *out set.
  bool OptUint64(JsonCursor& c, const char* key, uint64_t* out) {
    if (c.Peek() == JsonCursor::Kind::kNull) {
      c.ReadNull();
      return false;
    }
    *out = Uint64(c, key);
    return true;
  }

  bool Bool(JsonCursor& c, const char* key) {
    if (NextKind(c) != JsonCursor::Kind::kBool)
      Fail(std::string("expected a boolean for \"") + key + "\"");
    return c.ReadBool();
  }

  // A string field's id: in the trace's strings, or in chunk mode the
  // block's (BlockNames).
  uint32_t Name(JsonCursor& c, const char* key) {
    const std::string_view s = String(c, key);
    if (chunk_ == nullptr) return t_->strings.Intern(s);
    // An escaped string is unescaped into scratch_, which the next reuses.
    return chunk_->names.Intern(s, s.data() != scratch_.data());
  }

  std::string_view String(JsonCursor& c, const char* key) {
    if (NextKind(c) != JsonCursor::Kind::kString)
      Fail(std::string("expected a string for \"") + key + "\"");
    return c.ReadString(&scratch_);
  }

  DeviceIndex Device(JsonCursor& c, const char* key) {
    const std::string_view name = String(c, key);
    // Nearly every tensor and allocation names the device of the one before.
    if (last_device_ != kNoDevice && name == last_device_name_) return last_device_;
    if (!ValidDeviceName(name)) {
      Fail("invalid device " + Quote(name) +
           " (PyTorch accepts \"type\" or \"type:index\" with a known type such as cpu or cuda)");
    }
    last_device_name_.assign(name);
    last_device_ = t_->InternDevice(name);
    return last_device_;
  }

  // read_records.cpp
  void Field(JsonCursor& c, std::string_view key, Fields& f);
  void Schema(Fields& f);
  void Op(const Fields& f, Event* e);
  void DropArgs(Fields& f);
  void Args(JsonCursor& c, Fields& f);
  Arg ParseArg(JsonCursor& c);
  void Alloc(const Fields& f, Event* e);
  // read_tensors.cpp
  uint32_t ParseTensor(JsonCursor& c, bool allow_partial);
  uint32_t TensorBody(JsonCursor& c, std::string_view key, bool allow_partial);
  bool TensorTooLarge(uint32_t element_size) const;
  void Dims(JsonCursor& c, const char* key, std::vector<int64_t>* out);
  // read_python.cpp
  void Params(JsonCursor& c, bool module, uint32_t* begin, uint32_t* count);
  void States(JsonCursor& c, uint32_t* begin, uint32_t* count);
  uint32_t Module(JsonCursor& c);
  uint32_t Optimizer(JsonCursor& c);
  void Py(const Fields& f, Event* e);

  Trace* t_;
  // Chunk mode's other output; null when reading in file order.
  ChunkExtras* chunk_ = nullptr;
  // TensorImpl address -> dense number (Tensor::impl); gone with the reader.
  DenseNumbering impls_;
  // A tensor's impl is numbered when the next tensor has been read, or
  // when the records end, in the order the tensors were read: the two cache
  // misses of a lookup in a large numbering (DenseNumbering::PrefetchSlot)
  // then overlap the parsing in between instead of stalling it.
  uint32_t pending_tensor_ = kNone32;
  uint64_t pending_impl_ = 0;
  void NumberPendingImpl() {
    if (pending_tensor_ == kNone32) return;
    t_->tensors[pending_tensor_].impl = impls_.Number(pending_impl_);
    pending_tensor_ = kNone32;
  }
  std::string scratch_;
  // The last device and dtype names read, and what they gave.
  static constexpr DeviceIndex kNoDevice = 0xffff;
  std::string last_device_name_;
  DeviceIndex last_device_ = kNoDevice;
  std::string last_dtype_;
  uint8_t last_element_size_ = 0;
  std::vector<Arg> arg_stack_;
  std::vector<uint32_t> list_scratch_;
  std::vector<int64_t> sizes_, strides_;
  bool keep_shapes_ = false;
  std::string shape_scratch_;
  // The id in Trace::shapes of the tensor just read (sizes_, last_dtype_).
  uint32_t InternShape();
};

// Gives each parameter record whose storage the header's model lists its
// name there (ParamInfo::qualname), then empties the list; readers call it
// once every record is in (read_python.cpp). Returns how many it named.
size_t NameModelParams(Trace& trace);

}  // namespace memtl::read

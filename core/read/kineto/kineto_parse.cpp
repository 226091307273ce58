// Kineto trace elements into compact records (kineto_parse.h).
#include "core/read/kineto/kineto_parse.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "core/model/checked.h"
#include "core/model/quote.h"
#include "core/read/common/json_cursor.h"

namespace memtl::read {

namespace {

using Kind = JsonCursor::Kind;

// c10::DeviceType's names, by its numbering (the trace's "Device Type").
constexpr std::string_view kDeviceTypes[] = {
    "cpu",  "cuda", "mkldnn", "opengl", "opencl", "ideep", "hip",
    "fpga", "maia", "xla",    "vulkan", "metal",  "xpu",   "mps",
    "meta", "hpu",  "ve",     "lazy",   "ipu",    "mtia",  "privateuseone"};

// The element size of a dtype as Kineto's "Input type" names it (c10's
// C++ type names: "float", "c10::Half", "long int", ...); 0 when unknown.
uint32_t KinetoElementSize(std::string_view type) {
  static constexpr std::pair<std::string_view, uint32_t> kCppNames[] = {
      {"long int", 8},
      {"unsigned char", 1},
      {"signed char", 1},
      {"short int", 2},
      {"c10::complex<float>", 8},
      {"c10::complex<double>", 16},
      {"c10::complex<c10::Half>", 4},
      {"unsigned short", 2},
      {"unsigned int", 4},
      {"long unsigned int", 8}};
  for (const auto& [name, size] : kCppNames)
    if (name == type) return size;
  if (type.starts_with("c10::")) type.remove_prefix(5);
  std::string lower(type);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ElementSize(lower);
}

// The raw text of the value at the cursor, which is skipped.
std::string_view RawValue(JsonCursor& c, std::string_view text) {
  c.Peek();
  const size_t begin = c.column() - 1;
  c.SkipValue();
  return text.substr(begin, c.column() - 1 - begin);
}

// A JSON number's text as an exact integer times 10^scale (scale 3: "12.3456"
// -> 12346, rounded half up); false when it is no plain decimal that fits.
bool ScaledInt(std::string_view s, int scale, int64_t* out) {
  size_t i = 0;
  const bool negative = !s.empty() && s[0] == '-';
  if (negative) ++i;
  if (i >= s.size() || s[i] < '0' || s[i] > '9') return false;
  // Every step is checked: a long run of digits wraps uint64_t well before
  // it is seen to pass the limit.
  uint64_t v = 0;
  constexpr uint64_t kLimit = uint64_t{1} << 62;
  const auto digit = [&v](char c) {
    const std::optional<uint64_t> times10 = CheckedMul<uint64_t>(v, 10);
    const std::optional<uint64_t> next =
        times10 ? CheckedAdd<uint64_t>(*times10, static_cast<uint64_t>(c - '0')) : std::nullopt;
    if (!next || *next >= kLimit) return false;
    v = *next;
    return true;
  };
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i)
    if (!digit(s[i])) return false;
  int digits = 0;
  bool round_up = false;
  if (i < s.size() && s[i] == '.') {
    for (++i; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
      if (digits < scale) {
        if (!digit(s[i])) return false;
        ++digits;
      } else if (digits == scale) {
        round_up = s[i] >= '5';
        ++digits;
      }
    }
  }
  if (i != s.size()) return false;  // an exponent: the caller goes through a double
  for (; digits < scale; ++digits)
    if (!digit('0')) return false;
  if (round_up && ++v >= kLimit) return false;  // v < kLimit before: no wrap
  *out = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return true;
}

enum class NumberRead : uint8_t { kOk, kString, kBad };

// A number from its raw JSON text, times 10^scale: a number, or a string
// holding one (counted apart: a producer wrote it so). NaN, infinities,
// null and anything else are kBad.
NumberRead ReadScaled(std::string_view raw, int scale, int64_t* out) {
  NumberRead how = NumberRead::kOk;
  if (raw.size() >= 2 && raw.front() == '"') {
    raw = raw.substr(1, raw.size() - 2);
    how = NumberRead::kString;
  }
  if (ScaledInt(raw, scale, out)) return how;
  // An exponent: through a double, exact enough for such rare text.
  double d = 0;
  try {
    d = std::stod(std::string(raw));
  } catch (...) {
    return NumberRead::kBad;
  }
  const double scaled = d * std::pow(10.0, scale);
  if (!std::isfinite(scaled) || std::fabs(scaled) > 4e18) return NumberRead::kBad;
  *out = std::llround(scaled);
  return how;
}

// An address written as an unsigned decimal integer of up to 2^64-1 (a
// writer that prints pointers unsigned); a signed one is read by
// ReadScaled. Written as a string it is not taken here, so that the string
// is counted as ReadScaled counts it.
bool UnsignedAddress(std::string_view raw, uint64_t* out) {
  const auto r = std::from_chars(raw.data(), raw.data() + raw.size(), *out);
  return r.ec == std::errc() && r.ptr == raw.data() + raw.size() && *out > INT64_MAX;
}

// Bare NaN, Infinity and -Infinity (Python's json.dump writes them) outside
// strings become strings of the same length, so that JsonCursor reads the
// element and the field is reported, not the element.
bool Sanitize(std::string_view in, std::string* out) {
  out->assign(in);
  bool changed = false;
  bool in_string = false;
  for (size_t i = 0; i < out->size(); ++i) {
    char& c = (*out)[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      continue;
    }
    for (std::string_view word : {"NaN", "-Infinity", "Infinity"}) {
      if (out->compare(i, word.size(), word) == 0) {
        (*out)[i] = '"';
        (*out)[i + word.size() - 1] = '"';
        for (size_t j = i + 1; j + 1 < i + word.size(); ++j) (*out)[j] = 'x';
        i += word.size() - 1;
        changed = true;
        break;
      }
    }
  }
  return changed;
}

}  // namespace

void KinetoParser::Member(std::string_view key, std::string_view value) {
  int64_t v = 0;
  if (key == "baseTimeNanoseconds") {
    if (ReadScaled(value, 0, &v) != NumberRead::kBad) base_ns = v;
  } else if (key == "profile_memory") {
    if (value == "true") profile_memory = 1;
    if (value == "false") profile_memory = 0;
    if (ReadScaled(value, 0, &v) != NumberRead::kBad) profile_memory = v != 0 ? 1 : 0;
  } else if (key == "schemaVersion") {
    if (ReadScaled(value, 0, &v) != NumberRead::kBad) schema_version = v;
  } else if (key == "distributedInfo") {
    // {"backend": "nccl", "rank": 0, "world_size": 8, ...}: a rank's trace.
    try {
      JsonCursor c(value);
      if (c.Peek() != Kind::kObject) return;
      c.BeginObject();
      std::string_view k;
      while (c.NextKey(&k)) {
        const std::string_view raw = RawValue(c, value);
        if ((k == "rank" || k == "world_size") && ReadScaled(raw, 0, &v) == NumberRead::kOk &&
            v >= 0 && v <= (int64_t{1} << 31))
          (k == "rank" ? rank : world_size) = v;
      }
    } catch (const JsonError&) {
      // A malformed member says nothing of the rank.
    }
  }
}

namespace {

// A pid or tid's raw JSON text as a key: a string without escapes keys as
// its contents, so that "25738" and 25738 name one thread (Kineto of 2021
// wrote the ops' tid as a string and the memory events' as a number).
std::string_view IdKey(std::string_view raw) {
  if (raw.size() >= 2 && raw.front() == '"' && raw.back() == '"' &&
      raw.find('\\') == std::string_view::npos)
    return raw.substr(1, raw.size() - 2);
  return raw;
}

}  // namespace

uint32_t KinetoParser::Thread(std::string_view pid, std::string_view tid) {
  thread_key_.assign(IdKey(pid));
  thread_key_ += '\x1f';
  thread_key_.append(IdKey(tid));
  if (!threads_.empty() && thread_key_ == last_thread_key_) return last_thread_;
  const auto [it, fresh] = threads_.emplace(thread_key_, static_cast<uint32_t>(threads_.size()));
  last_thread_key_ = thread_key_;
  last_thread_ = it->second;
  return it->second;
}

std::string KinetoParser::Where() const {
  return "event " + std::to_string(index_) + " (line " + std::to_string(line_) + ")";
}

void KinetoParser::Element(std::string_view text, uint64_t index, size_t line) {
  index_ = index;
  line_ = line;
  try {
    ParseElement(text);
    return;
  } catch (const JsonError& e) {
    if (!Sanitize(text, &sanitized_)) {
      diag_->Add("trace event that is not valid JSON (skipped)",
                 Where() + ", column " + std::to_string(e.column) + ": " + e.what);
      return;
    }
  }
  // Counted once per element; its fields then say which were not numbers.
  diag_->Add("NaN or Infinity in a trace event (not JSON: read as not a number)", Where());
  try {
    const std::string copy = std::move(sanitized_);
    ParseElement(copy);
  } catch (const JsonError& e) {
    diag_->Add("trace event that is not valid JSON (skipped)",
               Where() + ", column " + std::to_string(e.column) + ": " + e.what);
  }
}

// An op's "Record function id" in its "args" (PyTorch's 64-bit
// RecordFunctionHandle; 0 when absent or not an unsigned 64-bit integer:
// the op then joins no execution-trace node).
uint64_t KinetoParser::RecordFunctionId(std::string_view args) {
  JsonCursor a(args);
  if (a.Peek() != Kind::kObject) return 0;
  a.BeginObject();
  std::string_view key;
  uint64_t rf = 0;
  while (a.NextKey(&key)) {
    if (key != "Record function id" || a.Peek() != Kind::kNumber) {
      a.SkipValue();
      continue;
    }
    bool is_int = false, overflow = false;
    const uint64_t v = a.ReadUint64(&is_int, &overflow);
    if (is_int && !overflow) rf = v;
  }
  return rf;
}

int64_t KinetoParser::FirstInputBytes(std::string_view args) {
  JsonCursor a(args);
  if (a.Peek() != Kind::kObject) return 0;
  a.BeginObject();
  std::string_view key;
  std::optional<int64_t> numel;
  uint32_t element = 0;
  std::string scratch;
  while (a.NextKey(&key)) {
    if (key == "Input Dims" && a.Peek() == Kind::kArray) {
      a.BeginArray();
      bool first = true;
      while (a.NextItem()) {
        const bool take = first && a.Peek() == Kind::kArray;
        first = false;
        if (!take) {
          a.SkipValue();
          continue;
        }
        numel = 1;
        a.BeginArray();
        while (a.NextItem()) {
          if (!numel || a.Peek() != Kind::kNumber) {
            a.SkipValue();
            numel.reset();
            continue;
          }
          bool is_int = false, overflow = false;
          const int64_t d = a.ReadInt64(&is_int, &overflow);
          numel = is_int && !overflow && d >= 0 ? CheckedMul<int64_t>(*numel, d) : std::nullopt;
        }
      }
    } else if (key == "Input type" && a.Peek() == Kind::kArray) {
      a.BeginArray();
      bool first = true;
      while (a.NextItem()) {
        if (first && a.Peek() == Kind::kString)
          element = KinetoElementSize(a.ReadString(&scratch));
        else
          a.SkipValue();
        first = false;
      }
    } else {
      a.SkipValue();
    }
  }
  if (!numel || element == 0) return 0;
  const std::optional<int64_t> bytes = CheckedMul<int64_t>(*numel, element);
  return bytes && *bytes <= kMaxAllocBytes ? *bytes : 0;
}

// The fields of an element that memtl reads: views into its text, or into
// the strings here where a name or category had escapes (so it is neither
// copied nor moved).
struct KinetoParser::Fields {
  Fields() = default;
  Fields(const Fields&) = delete;
  Fields& operator=(const Fields&) = delete;
  std::string_view ph, cat, name, pid, tid, ts, dur, args;
  std::string name_scratch, cat_scratch;
};

// A [memory] event's arguments, as far as they were read.
struct KinetoParser::MemoryArgs {
  KinetoMemory m;
  int64_t device_type = 0, device_id = -1;
  bool has_bytes = false;
};

bool KinetoParser::ParseElement(std::string_view text) {
  Fields f;
  if (!ReadFields(text, f)) return false;
  KinetoEvent e;
  if (!KindOf(f, &e.kind)) return false;
  switch (ReadScaled(f.ts, 3, &e.ts)) {
    case NumberRead::kOk:
      break;
    case NumberRead::kString:
      diag_->Add("number written as a string (read as the number)", Where() + ": \"ts\"");
      break;
    case NumberRead::kBad:
      diag_->Add("trace event without a numeric \"ts\" (skipped)",
                 Where() + ": \"ts\" is " + (f.ts.empty() ? std::string("missing") : Quote(f.ts)));
      return false;
  }
  e.thread = Thread(f.pid, f.tid);
  return e.kind == KinetoKind::kMemory ? AddMemory(f.args, e) : AddSpan(f, e);
}

bool KinetoParser::ReadFields(std::string_view text, Fields& f) {
  JsonCursor c(text);
  if (c.Peek() != Kind::kObject) {
    c.SkipValue();
    c.ExpectEnd();
    diag_->Add("trace event that is not a JSON object (skipped)", Where());
    return false;
  }
  c.BeginObject();
  std::string_view key;
  while (c.NextKey(&key)) {
    const Kind k = c.Peek();
    if (key == "ph" && k == Kind::kString) {
      f.ph = c.ReadString(&scratch_);
    } else if (key == "cat" && k == Kind::kString) {
      f.cat = c.ReadString(&f.cat_scratch);
    } else if (key == "name" && k == Kind::kString) {
      f.name = c.ReadString(&f.name_scratch);
    } else if (key == "pid") {
      f.pid = RawValue(c, text);
    } else if (key == "tid") {
      f.tid = RawValue(c, text);
    } else if (key == "ts") {
      f.ts = RawValue(c, text);
    } else if (key == "dur") {
      f.dur = RawValue(c, text);
    } else if (key == "args") {
      f.args = RawValue(c, text);
    } else {
      c.SkipValue();
    }
  }
  c.ExpectEnd();
  return true;
}

bool KinetoParser::KindOf(const Fields& f, KinetoKind* kind) {
  const bool instant = f.ph == "i" || f.ph == "I";
  if (instant && f.name == "[memory]") {
    *kind = KinetoKind::kMemory;
  } else if (instant && f.name == "[OutOfMemory]") {
    ++out_of_memory;
    return false;
  } else if (f.ph == "X" && (f.cat == "cpu_op" || f.cat == "Operator" || f.cat == "operator")) {
    *kind = KinetoKind::kOp;
  } else if (f.ph == "X" && f.cat == "user_annotation") {
    *kind = KinetoKind::kAnnotation;
  } else if (f.ph == "X" && (f.cat == "python_function" || f.cat == "python")) {
    *kind = KinetoKind::kPython;
  } else {
    // GPU kernels, runtime calls, copies, flows, metadata, the profiler's
    // own spans.
    return false;
  }
  return true;
}

bool KinetoParser::AddSpan(const Fields& f, KinetoEvent e) {
  e.dur = 0;
  const NumberRead r = ReadScaled(f.dur, 3, &e.dur);
  if (r == NumberRead::kBad || e.dur < 0) {
    diag_->Add("op without a valid \"dur\" (taken as 0)",
               Where() + ": \"dur\" is " + (f.dur.empty() ? std::string("missing") : Quote(f.dur)));
    e.dur = 0;
  } else if (r == NumberRead::kString) {
    diag_->Add("number written as a string (read as the number)", Where() + ": \"dur\"");
  }
  if (t_->strings.size() >= kMaxNames && !t_->strings.Contains(f.name)) {
    diag_->Add("trace event past 2^24 distinct names (skipped)", Where());
    return false;
  }
  e.ref = t_->strings.Intern(f.name);
  if (want_rf_ids && e.kind != KinetoKind::kPython && !f.args.empty()) {
    if (const uint64_t rf = RecordFunctionId(f.args); rf != 0) {
      if (rf_ids.empty()) rf_ids.push_back(0);
      e.rf = static_cast<uint32_t>(rf_ids.size());
      rf_ids.push_back(rf);
    }
  }
  if (e.kind == KinetoKind::kOp && f.name == "torch::autograd::AccumulateGrad" && !f.args.empty()) {
    if (const int64_t bytes = FirstInputBytes(f.args); bytes > 0)
      leaves.push_back({static_cast<uint32_t>(events.size()), bytes});
  }
  events.push_back(e);
  return true;
}

bool KinetoParser::AddMemory(std::string_view args, KinetoEvent e) {
  MemoryArgs a;
  if (!args.empty() && !ReadMemoryArgs(args, a)) return false;
  const int64_t bytes = a.m.bytes;
  if (!a.has_bytes || bytes == 0 || bytes > kMaxAllocBytes || bytes < -kMaxAllocBytes) {
    diag_->Add("[memory] event without a usable \"Bytes\" (skipped)", Where());
    return false;
  }
  constexpr auto kTypes = static_cast<int64_t>(std::size(kDeviceTypes));
  if (a.device_type < 0 || a.device_type >= kTypes || a.device_id > 999) {
    diag_->Add("[memory] event on an unknown device (skipped)",
               Where() + ": Device Type " + std::to_string(a.device_type) + ", Device Id " +
                   std::to_string(a.device_id));
    return false;
  }
  std::string device(kDeviceTypes[a.device_type]);
  if (a.device_type != 0 && a.device_id >= 0) device += ":" + std::to_string(a.device_id);
  a.m.device = t_->InternDevice(device);
  e.ref = static_cast<uint32_t>(memory.size());
  memory.push_back(a.m);
  events.push_back(e);
  return true;
}

// A memory event's arguments, in any order.
bool KinetoParser::ReadMemoryArgs(std::string_view args, MemoryArgs& a) {
  JsonCursor c(args);
  if (c.Peek() != Kind::kObject) {
    diag_->Add("[memory] event without \"args\" (skipped)", Where());
    return false;
  }
  c.BeginObject();
  std::string_view key;
  while (c.NextKey(&key)) MemoryArg(key, RawValue(c, args), a);
  return true;
}

void KinetoParser::MemoryArg(std::string_view key, std::string_view raw, MemoryArgs& a) {
  static constexpr std::string_view kRead[] = {"Bytes",          "Addr",        "Total Allocated",
                                               "Total Reserved", "Device Type", "Device Id"};
  if (std::find(std::begin(kRead), std::end(kRead), key) == std::end(kRead)) return;
  KinetoMemory& m = a.m;
  uint64_t addr = 0;
  if (key == "Addr" && UnsignedAddress(raw, &addr)) {
    m.addr = addr;
    m.has_addr = true;
    return;
  }
  int64_t v = 0;
  const NumberRead r = ReadScaled(raw, 0, &v);
  if (r == NumberRead::kBad) {
    diag_->Add("[memory] argument that is not a number (ignored)",
               Where() + ": \"" + std::string(key) + "\" is " + Quote(raw));
    return;
  }
  if (r == NumberRead::kString)
    diag_->Add("number written as a string (read as the number)",
               Where() + ": \"" + std::string(key) + "\"");
  if (key == "Bytes") {
    m.bytes = v;
    a.has_bytes = true;
  } else if (key == "Addr") {
    // Addresses are unsigned; a writer that prints them signed gives
    // negative numbers for the upper half.
    m.addr = static_cast<uint64_t>(v);
    m.has_addr = true;
  } else if (key == "Total Allocated") {
    m.total_allocated = v;
    m.has_total = true;
  } else if (key == "Total Reserved") {
    m.total_reserved = v;
    m.has_reserved = true;
  } else if (key == "Device Type") {
    a.device_type = v;
  } else {
    a.device_id = v;
  }
}

}  // namespace memtl::read

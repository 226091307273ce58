// Format detection (format.h): a scan of the top-level JSON structure of the
// first bytes, skipping values by bracket matching (strings and escapes
// respected) until a key or a shape decides.
#include "core/read/common/format.h"

#include <utility>

#include "core/model/quote.h"
#include "core/read/common/json_cursor.h"

namespace memtl {

namespace {

// Decoded bytes read at most to decide; past them the input goes to the
// memtl reader, which reports what it finds. A Kineto trace's metadata
// before "traceEvents" is a few KiB.
constexpr size_t kMaxHead = size_t{16} << 20;
constexpr size_t kHeadStep = size_t{64} << 10;

// Thrown when the head ends inside what is being scanned.
struct NeedMore {};

class Scan {
 public:
  explicit Scan(std::string_view s) : s_(s) {}

  void Ws() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\t' || s_[p_] == '\n' || s_[p_] == '\r'))
      ++p_;
  }
  // The next byte after whitespace, without consuming it.
  char Peek() {
    Ws();
    if (p_ >= s_.size()) throw NeedMore{};
    return s_[p_];
  }
  void Take() { ++p_; }
  size_t pos() const { return p_; }
  // A string's raw text (escapes left as they are), the quotes consumed.
  std::string_view String() {
    const size_t begin = ++p_;
    while (true) {
      if (p_ >= s_.size()) throw NeedMore{};
      if (s_[p_] == '\\') {
        p_ += 2;
      } else if (s_[p_] == '"') {
        return s_.substr(begin, p_++ - begin);
      } else {
        ++p_;
      }
    }
  }
  // Skips one value; returns its first byte.
  char Skip() {
    const char first = Peek();
    if (first == '"') {
      String();
      return first;
    }
    if (first != '{' && first != '[') {
      while (p_ < s_.size() && s_[p_] != ',' && s_[p_] != '}' && s_[p_] != ']' && s_[p_] != ' ' &&
             s_[p_] != '\n' && s_[p_] != '\r' && s_[p_] != '\t')
        ++p_;
      if (p_ >= s_.size()) throw NeedMore{};
      return first;
    }
    int depth = 0;
    while (true) {
      if (p_ >= s_.size()) throw NeedMore{};
      const char c = s_[p_];
      if (c == '"') {
        String();
        continue;
      }
      ++p_;
      if (c == '{' || c == '[') ++depth;
      if ((c == '}' || c == ']') && --depth == 0) return first;
    }
  }

 private:
  std::string_view s_;
  size_t p_ = 0;
};

// SniffObject and SniffArray answer kOtherJson for a value that has none of
// the formats' keys or shapes, without checking it is JSON: SniffFormat
// does (OtherJsonOr).
InputFormat SniffObject(Scan& s) {
  s.Take();  // '{'
  while (true) {
    char c = s.Peek();
    if (c == '}') return InputFormat::kOtherJson;  // none of the keys
    if (c == ',') {
      s.Take();
      c = s.Peek();
    }
    if (c != '"') return InputFormat::kMemtlTrace;
    const std::string_view key = s.String();
    if (s.Peek() != ':') return InputFormat::kMemtlTrace;
    s.Take();
    // "format" is the memtl header's (another value is the reader's error);
    // "k" a memtl record (a trace without its header).
    if (key == "format" || key == "k") return InputFormat::kMemtlTrace;
    if (key == "traceEvents") return InputFormat::kKineto;
    if (key == "nodes") return InputFormat::kExecutionTrace;
    s.Skip();
  }
}

InputFormat SniffArray(Scan& s) {
  s.Take();  // '['
  char c = s.Peek();
  if (c == ']') return InputFormat::kRawTimeline;  // a device with no events
  if (c == '{') return InputFormat::kKineto;       // Chrome's array form
  if (c != '[') return InputFormat::kOtherJson;    // a list of scalars
  // Raw: [[t, action, bytes, category], [t, ...], ...]; sizes:
  // [[t, ...], [[0, sizes...], ...]]: the second element tells them apart.
  s.Skip();
  c = s.Peek();
  if (c == ']') return InputFormat::kRawTimeline;  // one event
  if (c != ',') return InputFormat::kMemtlTrace;
  s.Take();
  if (s.Peek() != '[') return InputFormat::kOtherJson;
  s.Take();
  c = s.Peek();
  return c == '[' || c == ']' ? InputFormat::kSizesTimeline : InputFormat::kRawTimeline;
}

}  // namespace

std::string_view FormatName(InputFormat f) {
  switch (f) {
    case InputFormat::kMemtlTrace:
      return "memtl trace";
    case InputFormat::kKineto:
      return "Kineto trace";
    case InputFormat::kRawTimeline:
      return "PyTorch raw memory timeline";
    case InputFormat::kSizesTimeline:
      return "PyTorch memory timeline (sizes)";
    case InputFormat::kExecutionTrace:
      return "PyTorch execution trace";
    case InputFormat::kOtherJson:
      return "JSON document of another kind";
    case InputFormat::kSnapshot:
      return "CUDA memory snapshot";
    case InputFormat::kNeedMore:
      break;
  }
  return "unknown";
}

// A first value with none of the formats' marks (SniffObject's and
// SniffArray's kOtherJson, or a scalar): kOtherJson when it is valid JSON
// and either spans lines (a pretty-printed document: the memtl reader would
// call its first line invalid JSON) or is all the input; else kMemtlTrace,
// the memtl reader then saying what is wrong (a JSON Lines file whose first
// line is no header, JSON with a syntax error).
InputFormat OtherJsonOr(std::string_view head, bool at_end) {
  Scan s(head);
  s.Peek();
  const size_t begin = s.pos();
  s.Skip();
  const std::string_view value = head.substr(begin, s.pos() - begin);
  JsonCursor cursor(value);
  try {
    cursor.SkipValue();
    cursor.ExpectEnd();
  } catch (const JsonError&) {
    return InputFormat::kMemtlTrace;
  }
  if (value.find('\n') != std::string_view::npos) return InputFormat::kOtherJson;
  s.Ws();
  if (s.pos() < head.size()) return InputFormat::kMemtlTrace;  // more lines follow
  if (!at_end) throw NeedMore{};
  return InputFormat::kOtherJson;
}

InputFormat SniffFormat(std::string_view head, bool at_end) {
  // A pickle starts with PROTO and its protocol (2 and up: Python 3's
  // pickle.dump writes 4 or 5); no JSON text starts with byte 0x80.
  if (!head.empty() && static_cast<unsigned char>(head[0]) == 0x80) {
    if (head.size() < 2) return at_end ? InputFormat::kMemtlTrace : InputFormat::kNeedMore;
    const auto protocol = static_cast<unsigned char>(head[1]);
    if (protocol >= 2 && protocol <= 5) return InputFormat::kSnapshot;
  }
  // A UTF-8 byte order mark is not JSON, but editors write one (OpenInput
  // drops it before the readers see the text).
  if (head.starts_with("\xef\xbb\xbf")) head.remove_prefix(3);
  Scan s(head);
  try {
    const char c = s.Peek();
    const InputFormat f = c == '{'   ? SniffObject(s)
                          : c == '[' ? SniffArray(s)
                                     : InputFormat::kOtherJson;
    return f == InputFormat::kOtherJson ? OtherJsonOr(head, at_end) : f;
  } catch (const NeedMore&) {
    return at_end ? InputFormat::kMemtlTrace : InputFormat::kNeedMore;
  }
}

namespace {

// JSON is UTF-8 here: a file in UTF-16 or UTF-32 (a Windows editor's
// "Unicode", PowerShell's redirection) is named as such, not reported as
// invalid JSON. Told by a byte-order mark, or else by the zero bytes
// around the first character, which in a JSON text is ASCII (RFC 4627,
// section 3): only its opening bracket or whitespace counts, so that a
// binary file is not called UTF-16.
bool IsUtf16Or32(std::string_view h) {
  const auto at = [&](size_t i) { return i < h.size() ? static_cast<unsigned char>(h[i]) : -1; };
  if ((at(0) == 0xff && at(1) == 0xfe) || (at(0) == 0xfe && at(1) == 0xff)) return true;
  if (at(0) == 0 && at(1) == 0 && at(2) == 0xfe && at(3) == 0xff) return true;
  const auto opener = [&](size_t i) {
    const int c = at(i);
    return c == '{' || c == '[' || c == ' ' || c == '\t' || c == '\n' || c == '\r';
  };
  if (h.size() < 4) return false;
  return (opener(0) && at(1) == 0 && at(3) == 0) ||              // UTF-16LE, UTF-32LE
         (at(0) == 0 && opener(1) && at(2) == 0) ||              // UTF-16BE
         (at(0) == 0 && at(1) == 0 && at(2) == 0 && opener(3));  // UTF-32BE
}

constexpr std::string_view kUtf8Bom = "\xef\xbb\xbf";

Expected<OpenedInput> Decide(std::unique_ptr<LineSource> src) {
  OpenedInput in;
  in.src = std::move(src);
  bool first = true;
  while (true) {
    // Bytes, not lines: a Kineto trace saved on one line is decided on its
    // first bytes instead of being read whole (the JSON readers cut their
    // input by its syntax).
    const size_t want = in.head.size() + kHeadStep;
    bool more = false;
    while (in.head.size() < want && in.src->ReadBytes(&in.head, want - in.head.size())) more = true;
    if (first) {
      first = false;
      if (IsUtf16Or32(in.head)) {
        return Status::Error(QuotePath(in.src->name()) +
                             ": is UTF-16 (or UTF-32); memtl reads UTF-8 (convert it, e.g. "
                             "iconv -f UTF-16 -t UTF-8)");
      }
      // A UTF-8 byte-order mark is no JSON, but Windows tools write one:
      // it is skipped, for every format, before any reader sees the text.
      if (in.head.starts_with(kUtf8Bom)) in.head.erase(0, kUtf8Bom.size());
    }
    // An input that stops (its end, an error) is decided on what was read;
    // its reader reports the rest.
    const bool at_end = !more || in.head.size() >= kMaxHead;
    in.format = SniffFormat(in.head, at_end);
    if (in.format == InputFormat::kNeedMore) continue;
    // The memtl reader takes whole lines: the head ends where a line does
    // (or where the input does; an over-long line is the reader's error),
    // and, as ReadLines hands them out, without the partial line before a
    // decoding error (which the reader reports).
    if (in.format == InputFormat::kMemtlTrace && !in.head.empty() && in.head.back() != '\n') {
      in.src->ReadLines(&in.head, 1);
      if (!in.src->status().ok() && in.head.back() != '\n') {
        const size_t nl = in.head.rfind('\n');
        in.head.resize(nl == std::string::npos ? 0 : nl + 1);
      }
    }
    return in;
  }
}

}  // namespace

Expected<OpenedInput> OpenInput(const std::string& path) {
  auto src = LineSource::Open(path);
  if (!src.ok()) return src.status();
  return Decide(std::move(src.value()));
}

Expected<OpenedInput> OpenMemoryInput(std::string data, std::string name) {
  return Decide(LineSource::FromMemory(std::move(data), std::move(name)));
}

OpenedInput OpenInputFromMemory(std::string data, std::string name) {
  auto in = OpenMemoryInput(data, name);
  if (in.ok()) return std::move(in.value());
  // Refused by its encoding: decided as the memtl reader's, which calls
  // it invalid (the callers that want the refusal use OpenMemoryInput).
  OpenedInput plain;
  plain.src = LineSource::FromMemory(std::move(data), std::move(name));
  return plain;
}

std::string FormatAdvice(InputFormat format) {
  constexpr const char* kRecord =
      "record with torch.profiler.profile(record_shapes=True, profile_memory=True, "
      "with_stack=True) and save with memtl.save(prof, \"run.trace.jsonl.gz\") (or "
      "prof.export_chrome_trace(\"trace.json\"))";
  std::string reads =
      "memtl reads memtl traces, Kineto traces (export_chrome_trace or "
      "tensorboard_trace_handler with profile_memory=True), CUDA memory snapshots "
      "(torch.cuda.memory._dump_snapshot) and PyTorch's raw memory "
      "timelines (export_memory_timeline(\"*.raw.json.gz\")); " +
      std::string(kRecord);
  switch (format) {
    case InputFormat::kSizesTimeline:
      return "this is a PyTorch memory timeline export ([times, sizes] from "
             "export_memory_timeline(\"*.json\")), which keeps no events; give memtl the "
             ".raw.json.gz that export_memory_timeline writes, or the trace itself; " +
             std::string(kRecord);
    case InputFormat::kExecutionTrace:
      return "this is a PyTorch execution trace (ExecutionTraceObserver); give memtl the "
             "Kineto trace of the same run (export_chrome_trace, recorded with "
             "profile_memory=True) with this file as --et, or " +
             std::string(kRecord);
    case InputFormat::kOtherJson:
      return "this is JSON, but not a trace memtl reads; " + reads;
    default:
      return reads;
  }
}

}  // namespace memtl

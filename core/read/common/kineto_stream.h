// Cuts a Kineto (Chrome) trace into its parts without holding the
// document: the top-level object's members one at a time, and the
// "traceEvents" array's elements one at a time, each found by bracket and
// brace matching over the decoded stream (strings and escapes respected).
// The input is read as bytes, not lines, so a trace saved on one line (by
// tensorboard_trace_handler or json.dump without indent) is read as one
// pretty-printed: memory is a read block plus the current element (or
// member), and an element longer than the source's line limit
// (LineSource::max_line(), 64 MiB) is an error. Each part is then parsed
// with JsonCursor by its caller.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "core/model/progress.h"
#include "core/read/common/line_source.h"

namespace memtl::read {

// The trace's structure is broken (not an object or array, a missing ',').
struct KinetoStructureError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class KinetoStream {
 public:
  // `head`: whole lines already read from `src` (format detection).
  KinetoStream(LineSource& src, std::string head, Progress* progress);

  enum class Part : uint8_t {
    kMember,  // a top-level member other than traceEvents: key(), value()
    kEvent,   // an element of traceEvents: value()
    kEnd,     // the document ended well
    kCut,     // the input ended inside the document (a killed run), or is bad
              // after it (LineSource::status() says what)
  };
  // The next part; views stay valid until the next call. Throws
  // KinetoStructureError.
  Part Next();
  // The array whose elements are the events: "traceEvents" (a Kineto
  // trace) unless set before the first Next() ("nodes": an execution trace).
  void set_array_key(std::string key) { array_key_ = std::move(key); }
  std::string_view key() const { return {buf_.data() + key_pos_, key_len_}; }
  std::string_view value() const { return {buf_.data() + value_pos_, value_len_}; }
  // The line the current part starts on (1-based), for messages.
  size_t line() const { return line_; }
  // Events read so far, and whether the array was entered.
  uint64_t events() const { return events_; }

 private:
  enum class State : uint8_t { kStart, kMembers, kAfterMember, kEvents, kAfterEvent, kDone };
  // Ensures a byte at pos_ after whitespace; false at the end of input.
  bool PeekByte(char* c);
  // Scans the value starting at pos_ to its end; false at the end of input.
  // A value longer than the source's line limit is an error (TooLong).
  bool ScanValue(size_t* len);
  bool Refill();
  [[noreturn]] void Fail(const char* what);
  [[noreturn]] void TooLong();
  void CountLines(size_t from, size_t to);

  LineSource& src_;
  Progress* progress_;
  std::string buf_;
  size_t pos_ = 0;
  size_t mark_ = 0;  // where the current part starts: kept by Refill
  size_t key_pos_ = 0, key_len_ = 0, value_pos_ = 0, value_len_ = 0;
  size_t line_ = 1, counted_ = 0;  // lines before buf_[counted_]
  uint64_t consumed_ = 0;          // decoded bytes dropped from buf_
  uint64_t events_ = 0;
  State state_ = State::kStart;
  bool bare_ = false;   // Chrome's array form: the document is the array
  bool first_ = true;   // no member or element yet in the open container
  bool ended_ = false;  // the source has nothing more
  std::string array_key_ = "traceEvents";
};

}  // namespace memtl::read

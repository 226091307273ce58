// The Kineto trace's parts (kineto_stream.h).
#include "core/read/common/kineto_stream.h"

#include <algorithm>
#include <atomic>
#include <utility>

namespace memtl::read {

namespace {

constexpr size_t kBlock = size_t{1} << 20;

bool IsWs(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

}  // namespace

KinetoStream::KinetoStream(LineSource& src, std::string head, Progress* progress)
    : src_(src), progress_(progress), buf_(std::move(head)) {}

// Reads about a block more of the input, first dropping what the parts
// before the current one used. Bytes, not lines: a trace saved on one line
// is cut as one pretty-printed, and the buffer holds the current part and
// a block, never the line.
bool KinetoStream::Refill() {
  if (ended_) return false;
  if (mark_ > 0) {
    CountLines(counted_, mark_);
    buf_.erase(0, mark_);
    consumed_ += mark_;
    pos_ -= mark_;
    key_pos_ = key_pos_ >= mark_ ? key_pos_ - mark_ : 0;
    counted_ = 0;
    mark_ = 0;
  }
  const size_t want = buf_.size() + kBlock;
  bool any = false;
  while (buf_.size() < want && src_.ReadBytes(&buf_, want - buf_.size())) any = true;
  if (!any) {
    ended_ = true;
    return false;
  }
  if (progress_ != nullptr) {
    progress_->done.store(consumed_ + buf_.size(), std::memory_order_relaxed);
    progress_->total.store(src_.EstimatedSize(), std::memory_order_relaxed);
  }
  return true;
}

void KinetoStream::CountLines(size_t from, size_t to) {
  if (to > from)
    line_ += static_cast<size_t>(std::count(buf_.data() + from, buf_.data() + to, '\n'));
  counted_ = std::max(counted_, to);
}

bool KinetoStream::PeekByte(char* c) {
  while (true) {
    const size_t ws = pos_;
    while (pos_ < buf_.size() && IsWs(buf_[pos_])) ++pos_;
    if (pos_ < buf_.size()) {
      *c = buf_[pos_];
      return true;
    }
    // Whitespace to the end of the buffer is dropped before reading on
    // (its lines counted), not held with the part it follows: memory is
    // bounded by the parts, whatever the whitespace between them (a
    // gigabyte of spaces inflates from a megabyte of gzip).
    if (pos_ > ws) {
      CountLines(counted_, pos_);
      consumed_ += pos_ - ws;
      buf_.resize(ws);
      pos_ = counted_ = ws;
    }
    if (!Refill()) return false;
  }
}

// The scan resumes after each refill where it stopped (`off`, `depth` and
// `in_string` are relative to the value, which a refill never drops), so
// each byte is scanned once however long the value.
bool KinetoStream::ScanValue(size_t* len) {
  const char first = buf_[pos_];
  const bool scalar = first != '"' && first != '{' && first != '[';
  size_t off = 0;
  int depth = 0;
  bool in_string = false;
  while (true) {
    const char* s = buf_.data() + pos_;
    const size_t n = buf_.size() - pos_;
    bool done = false;
    if (scalar) {
      while (off < n && !IsWs(s[off]) && s[off] != ',' && s[off] != '}' && s[off] != ']') ++off;
      done = off < n || ended_;
    } else {
      while (off < n) {
        const char c = s[off++];
        if (in_string) {
          if (c == '\\') {
            ++off;  // the escaped byte, perhaps not read yet
          } else if (c == '"') {
            in_string = false;
            if (depth == 0) {
              done = true;
              break;
            }
          }
        } else if (c == '"') {
          in_string = true;
        } else if (c == '{' || c == '[') {
          ++depth;
        } else if ((c == '}' || c == ']') && --depth == 0) {
          done = true;
          break;
        }
      }
    }
    // Checked whether or not the value is complete, so that the limit does
    // not depend on where the read blocks end.
    if (off > src_.max_line()) TooLong();
    if (done) {
      *len = off;
      return true;
    }
    if (!Refill()) return false;
  }
}

void KinetoStream::TooLong() {
  const size_t limit = src_.max_line();
  const std::string size = limit % (size_t{1} << 20) == 0 ? std::to_string(limit >> 20) + " MiB"
                                                          : std::to_string(limit) + " bytes";
  if (state_ == State::kEvents) {
    const std::string array = bare_ ? std::string("the array") : "\"" + array_key_ + "\"";
    Fail(("element " + std::to_string(events_ + 1) + " of " + array + " is longer than " + size +
          " (memtl holds one element at a time)")
             .c_str());
  }
  Fail(("a member of the trace object is longer than " + size).c_str());
}

void KinetoStream::Fail(const char* what) {
  CountLines(counted_, pos_);  // line() is where it went wrong
  throw KinetoStructureError(what);
}

KinetoStream::Part KinetoStream::Next() {
  while (true) {
    char c = 0;
    mark_ = pos_;
    // A document that ended well still ends cut when the input after it
    // is bad (a gzip member without its trailer, bytes after it): the
    // whole input is checked, as the memtl trace reader checks it.
    if (!PeekByte(&c))
      return state_ == State::kDone && src_.status().ok() ? Part::kEnd : Part::kCut;
    mark_ = pos_;
    switch (state_) {
      case State::kStart:
        if (c == '{') {
          state_ = State::kMembers;
        } else if (c == '[') {
          state_ = State::kEvents;
          bare_ = true;
        } else {
          Fail(("expected a JSON object with \"" + array_key_ + "\"").c_str());
        }
        ++pos_;
        first_ = true;
        continue;
      case State::kMembers: {
        if (c == '}' && first_) {
          ++pos_;
          state_ = State::kDone;
          continue;
        }
        if (c != '"') Fail("expected a key in the trace object");
        size_t len = 0;
        if (!ScanValue(&len)) return Part::kCut;
        key_pos_ = pos_ + 1;
        key_len_ = len - 2;
        pos_ += len;
        if (!PeekByte(&c)) return Part::kCut;
        if (c != ':') Fail("expected ':' after a key of the trace object");
        ++pos_;
        if (!PeekByte(&c)) return Part::kCut;
        if (key() == array_key_ && c == '[') {
          ++pos_;
          state_ = State::kEvents;
          first_ = true;
          continue;
        }
        if (!ScanValue(&len)) return Part::kCut;
        value_pos_ = pos_;
        value_len_ = len;
        pos_ += len;
        state_ = State::kAfterMember;
        CountLines(counted_, value_pos_);
        return Part::kMember;
      }
      case State::kAfterMember:
        ++pos_;
        if (c == '}') {
          state_ = State::kDone;
        } else if (c == ',') {
          state_ = State::kMembers;
          first_ = false;
        } else {
          Fail("expected ',' or '}' after a member of the trace object");
        }
        continue;
      case State::kEvents: {
        if (c == ']' && first_) {
          ++pos_;
          state_ = bare_ ? State::kDone : State::kAfterMember;
          continue;
        }
        size_t len = 0;
        if (!ScanValue(&len)) return Part::kCut;
        value_pos_ = pos_;
        value_len_ = len;
        pos_ += len;
        state_ = State::kAfterEvent;
        ++events_;
        CountLines(counted_, value_pos_);
        return Part::kEvent;
      }
      case State::kAfterEvent:
        ++pos_;
        if (c == ']') {
          state_ = bare_ ? State::kDone : State::kAfterMember;
        } else if (c == ',') {
          state_ = State::kEvents;
          first_ = false;
        } else {
          Fail(("expected ',' or ']' after an element of \"" + array_key_ + "\"").c_str());
        }
        continue;
      case State::kDone:
        Fail("text after the end of the trace");
    }
  }
}

}  // namespace memtl::read

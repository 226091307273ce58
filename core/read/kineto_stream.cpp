// The Kineto trace's parts (kineto_stream.h).
#include "core/read/kineto_stream.h"

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

// Reads more of the input, first dropping what the parts before the current
// one used. Reads at least as much as the current part holds already, so
// that a part rescanned after each refill costs linear time in all.
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
  const size_t want = std::max(kBlock, buf_.size());
  if (!src_.ReadLines(&buf_, want)) {
    ended_ = true;
    return false;
  }
  if (src_.line_too_long()) ended_ = true;  // what was read is all there is
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
    while (pos_ < buf_.size() && IsWs(buf_[pos_])) ++pos_;
    if (pos_ < buf_.size()) {
      *c = buf_[pos_];
      return true;
    }
    if (!Refill()) return false;
  }
}

bool KinetoStream::ScanValue(size_t* len) {
  while (true) {
    const char* s = buf_.data();
    const size_t n = buf_.size();
    size_t p = pos_;
    int depth = 0;
    bool done = false;
    const char first = s[p];
    if (first == '"') {
      ++p;
      while (p < n) {
        if (s[p] == '\\') {
          p += 2;
        } else if (s[p++] == '"') {
          done = true;
          break;
        }
      }
    } else if (first != '{' && first != '[') {
      while (p < n && !IsWs(s[p]) && s[p] != ',' && s[p] != '}' && s[p] != ']') ++p;
      done = p < n || ended_;
    } else {
      while (p < n) {
        const char c = s[p++];
        if (c == '"') {
          while (p < n) {
            if (s[p] == '\\') {
              p += 2;
            } else if (s[p++] == '"') {
              break;
            }
          }
        } else if (c == '{' || c == '[') {
          ++depth;
        } else if ((c == '}' || c == ']') && --depth == 0) {
          done = true;
          break;
        }
      }
    }
    if (done && p <= n) {
      *len = p - pos_;
      return true;
    }
    if (!Refill()) return false;
  }
}

void KinetoStream::Fail(const char* what) {
  CountLines(counted_, pos_);  // line() is where it went wrong
  throw KinetoStructureError(what);
}

KinetoStream::Part KinetoStream::Next() {
  while (true) {
    char c = 0;
    mark_ = pos_;
    if (!PeekByte(&c)) return state_ == State::kDone ? Part::kEnd : Part::kCut;
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

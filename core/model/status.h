// Status and Expected<T>: how stages at the edges (files, parsing) report
// failure. A status carries one line that says where and what, e.g.
// "run.trace.gz: line 812: expected an integer for \"ptr\"", for people,
// and a code, for the code that decides what to do with it: callers branch
// on the code, never on the message.
#pragma once

#include <cstdint>

#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace memtl {

enum class StatusCode : uint8_t {
  kOk,
  kBadInput,       // the input is not what it should be: most errors
  kTruncated,      // the input ends early (a cut gzip member): --partial reads what came before
  kNotThisFormat,  // refused at its start: another format, which the caller may name
  kOutOfMemory,    // the input needs more memory than there is (OutOfMemoryIsAnError)
  kInternal,       // memtl's own bug: one stage made what the next refuses
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status Error(std::string message) {
    return Status(StatusCode::kBadInput, std::move(message));
  }
  static Status Error(StatusCode code, std::string message) {
    return Status(code, std::move(message));
  }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // The same error, its message with `prefix` (a file's name, say) before it.
  Status Prefixed(const std::string& prefix) const { return Status(code_, prefix + message_); }
  // The same error, its message with `suffix` (advice) after it.
  Status Suffixed(const std::string& suffix) const { return Status(code_, message_ + suffix); }

 private:
  Status(StatusCode code, std::string m) : code_(code), message_(std::move(m)) {}
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}       // NOLINT: implicit by design
  Expected(Status error) : v_(std::move(error)) {}  // NOLINT
  bool ok() const { return std::holds_alternative<T>(v_); }
  T& value() { return std::get<T>(v_); }
  const T& value() const { return std::get<T>(v_); }
  const Status& status() const { return std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

// Runs `read` (which returns an Expected): memory that runs out in it
// becomes the one-line error "NAME: out of memory", as any other bad input.
// What `read` built is gone by then, so making the message can allocate.
template <typename Read>
auto OutOfMemoryIsAnError(const std::string& name, Read&& read) -> decltype(read()) {
  try {
    return read();
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  return Status::Error(StatusCode::kOutOfMemory, name + ": out of memory");
}

}  // namespace memtl

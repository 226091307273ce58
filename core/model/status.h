// Status and Expected<T>: how stages at the edges (files, parsing) report
// failure. A status carries one line that says where and what, e.g.
// "run.trace.gz: line 812: expected an integer for \"ptr\"".
#pragma once

#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace memtl {

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status Error(std::string message) { return Status(std::move(message)); }
  bool ok() const { return !message_.has_value(); }
  const std::string& message() const { return *message_; }

 private:
  explicit Status(std::string m) : message_(std::move(m)) {}
  std::optional<std::string> message_;
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
  return Status::Error(name + ": out of memory");
}

}  // namespace memtl

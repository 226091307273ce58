// Status and Expected<T>: how stages at the edges (files, parsing) report
// failure. A status carries one line that says where and what, e.g.
// "run.trace.gz: line 812: expected an integer for \"ptr\"".
#pragma once

#include <optional>
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

}  // namespace memtl

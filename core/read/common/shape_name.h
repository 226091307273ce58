// A tensor's shape and dtype as memtl prints them ("[32, 64] float32"):
// Trace::shapes, kept when ReadOptions::keep_shapes asks, by every reader
// that makes tensor records (the memtl reader, the execution-trace join).
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace memtl::read {

inline void ShapeName(std::string& s, const int64_t* sizes, size_t num_sizes,
                      std::string_view dtype) {
  s.assign("[");
  char buf[24];
  for (size_t i = 0; i < num_sizes; ++i) {
    if (i > 0) s += ", ";
    const auto r = std::to_chars(buf, buf + sizeof buf, sizes[i]);
    s.append(buf, r.ptr);
  }
  s += "] ";
  s += dtype;
}

}  // namespace memtl::read

// Counted diagnostics: defects inside a trace that do not invalidate the
// analysis (a free whose size disagrees with its allocation, ids that differ
// from the producer's). Each kind is counted, with the first example kept, so
// that outputs can summarize them deterministically. An example may hold text
// from the trace: it is kept as one line (OneLine), since each kind is one
// line on stderr.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/model/quote.h"

namespace memtl {

class Diagnostics {
 public:
  void Add(const std::string& kind, const std::string& example, uint64_t count = 1) {
    auto& e = entries_[kind];
    if (e.count == 0) e.example = OneLine(example);
    e.count += count;
  }
  struct Entry {
    uint64_t count = 0;
    std::string example;
  };
  // Adds every entry of `other`, as if its Add calls had come after ours.
  void Merge(const Diagnostics& other) {
    for (const auto& [kind, e] : other.entries_) Add(kind, e.example, e.count);
  }
  const std::map<std::string, Entry>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }

 private:
  std::map<std::string, Entry> entries_;  // ordered: deterministic output
};

}  // namespace memtl

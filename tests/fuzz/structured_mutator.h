// The structure-aware mutator of fuzz_structured: it parses a trace into
// JSON Lines records and mutates what the analysis reads: numbers (with the
// extremes of every range the reader checks: -2^63, 2^63-1, 2^64, 2^47,
// 2^46, text no integer parser takes), field presence and types, the tree's
// shape (parents, order, ids, subtrees moved, copied, dropped), times,
// tensors shared between ops, pointers reused by allocations, names,
// devices and schemas. Three structural mutations in four renumber the
// records, so that the tree stays valid and the input reaches the graph,
// the passes and the timeline; the others leave what they broke.
#pragma once

#include <cstddef>
#include <cstdint>

namespace memtl_fuzz {

// Mutates the trace in data[0, size) in place; returns its new size, at
// most max_size (subtrees are dropped until it fits).
size_t MutateTrace(uint8_t* data, size_t size, size_t max_size, unsigned int seed);

// The first trace's lines up to a point, then the second's from a point;
// renumbered half the time. Writes at most max_out_size bytes to `out`.
size_t CrossOverTraces(const uint8_t* data1, size_t size1, const uint8_t* data2, size_t size2,
                       uint8_t* out, size_t max_out_size, unsigned int seed);

}  // namespace memtl_fuzz

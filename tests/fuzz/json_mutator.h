// The structure-aware mutator of fuzz_kineto, fuzz_et and fuzz_raw: it
// parses the input as one JSON document (fuzz_json.h) and edits values,
// keys and arrays, then writes it back on one line (a Kineto trace, an
// execution trace and a raw timeline are each one document, read as bytes,
// not lines). Byte mutations stop at the JSON cursor; these reach the
// readers' checks of each field and what the pipeline does with the values
// that pass them. What it writes: numbers at the limits the readers check
// (mutation_values.h) and floats past them, NaN, negative sizes and times,
// values copied between members of the same key (shared addresses, equal
// times, record function ids and storage ids that join), members dropped,
// duplicated, renamed and retyped, array elements dropped, duplicated,
// swapped and copied from elsewhere, strings with bad UTF-8 and bad escapes,
// and nesting deeper than any reader's limit. One mutation in eight is
// libFuzzer's byte mutation of the whole text, so broken JSON is reached
// too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace memtl_fuzz {

// What the values and keys written are drawn from.
enum class JsonFlavor : uint8_t { kKineto, kExecutionTrace, kRawTimeline };

// fuzz_et's input: the execution trace, this line, then the Kineto trace
// of the same run (without it, the whole input is the execution trace).
inline constexpr std::string_view kEtKinetoSeparator = "\n#kineto\n";

// Mutates the document in data[0, size) in place; returns its new size, at
// most max_size (array elements are dropped until it fits). kExecutionTrace
// mutates one of the two documents of fuzz_et's input, mostly the first.
size_t MutateJsonDoc(uint8_t* data, size_t size, size_t max_size, unsigned int seed,
                     JsonFlavor flavor);

// The first document with an element of the second's arrays put into one
// of its arrays of the same key (or any array). Writes at most
// max_out_size bytes to `out`.
size_t CrossOverJsonDocs(const uint8_t* data1, size_t size1, const uint8_t* data2, size_t size2,
                         uint8_t* out, size_t max_out_size, unsigned int seed);

}  // namespace memtl_fuzz

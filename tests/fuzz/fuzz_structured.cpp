// Fuzz target: the whole pipeline, driven by a structure-aware mutator
// (structured_mutator.h). Byte mutations (fuzz_pipeline) rarely get past
// the JSON and the record checks with a trace whose tree, ids and times
// still hang together; this one edits records, numbers and the tree.
//
// The target: read, analyze, categorize (with the peak and the HTML report's
// data), the graph's dump and what RunOutputs runs (fuzz_outputs.h: every
// other dump and both JSON exports of every device, with its traps).
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "core/pipeline/analysis.h"
#include "tests/fuzz/fuzz_outputs.h"
#include "tests/fuzz/structured_mutator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (64u << 10)) return 0;
  memtl::ReadOptions read_options;
  read_options.keep_shapes = true;  // as memtl events and explain read
  auto trace = memtl::ReadTraceString(std::string(reinterpret_cast<const char*>(data), size),
                                      "fuzz", read_options);
  if (!trace.ok()) return 0;
  auto analysis = memtl::Analyze(std::move(trace.value()), "fuzz");
  if (!analysis.ok()) return 0;
  (void)memtl::FormatDataFlow(analysis.value()->trace, analysis.value()->keys,
                              *analysis.value()->graph);
  memtl::PipelineOptions options;
  options.explain_peak = 5;
  options.report = true;
  auto c = memtl::Categorize(std::move(analysis.value()), options);
  if (!c.ok()) return 0;
  memtl_fuzz::RunOutputs(*c.value());
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  return memtl_fuzz::MutateTrace(data, size, max_size, seed);
}

extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t* data1, size_t size1,
                                            const uint8_t* data2, size_t size2, uint8_t* out,
                                            size_t max_out_size, unsigned int seed) {
  return memtl_fuzz::CrossOverTraces(data1, size1, data2, size2, out, max_out_size, seed);
}

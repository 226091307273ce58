// Fuzz target: the raw-timeline reader (raw_timeline.h: rows cut from the
// stream, each checked as [int, 1..4, int, 0..7], microseconds told from
// nanoseconds) and the timeline, peak, report and exports the pipeline
// makes of the rows, driven by json_mutator.h's mutator: rows dropped,
// duplicated, moved and copied, times and sizes at their limits.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_file_pipeline.h"
#include "tests/fuzz/json_mutator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static memtl_fuzz::MemFile file("raw");
  memtl_fuzz::RunInputOfFormat(data, size, memtl::InputFormat::kRawTimeline, file);
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  return memtl_fuzz::MutateJsonDoc(data, size, max_size, seed,
                                   memtl_fuzz::JsonFlavor::kRawTimeline);
}

extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t* data1, size_t size1,
                                            const uint8_t* data2, size_t size2, uint8_t* out,
                                            size_t max_out_size, unsigned int seed) {
  return memtl_fuzz::CrossOverJsonDocs(data1, size1, data2, size2, out, max_out_size, seed);
}

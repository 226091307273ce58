// Fuzz target: the Kineto reader (kineto_stream.h's cutting of the
// document, kineto_reader.h's events, memory pairing and totals) and the
// pipeline on what it reads (the categories inferred, the timeline, the
// peak, the report, the exports), driven by json_mutator.h's mutator: it
// edits the events and their args rather than bytes.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_file_pipeline.h"
#include "tests/fuzz/json_mutator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static memtl_fuzz::MemFile file("kineto");
  memtl_fuzz::RunInputOfFormat(data, size, memtl::InputFormat::kKineto, file);
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  return memtl_fuzz::MutateJsonDoc(data, size, max_size, seed, memtl_fuzz::JsonFlavor::kKineto);
}

extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t* data1, size_t size1,
                                            const uint8_t* data2, size_t size2, uint8_t* out,
                                            size_t max_out_size, unsigned int seed) {
  return memtl_fuzz::CrossOverJsonDocs(data1, size1, data2, size2, out, max_out_size, seed);
}

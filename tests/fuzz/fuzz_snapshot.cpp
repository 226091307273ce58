// Fuzz target: the CUDA memory snapshot reader (core/read/snapshot/): the
// pickle decoder, which must refuse any opcode that would import, call or
// build an object and stay within its limits on any bytes, then the
// snapshot's entries, segments and frames, the inferred categories and
// the pipeline's outputs (fuzz_file_pipeline.h). Pickles are binary, so
// libFuzzer's own byte mutations drive it; inputs of other formats are
// other targets'.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_file_pipeline.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static memtl_fuzz::MemFile file("snapshot");
  memtl_fuzz::RunInputOfFormat(data, size, memtl::InputFormat::kSnapshot, file);
  return 0;
}

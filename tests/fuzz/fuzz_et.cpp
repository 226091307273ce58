// Fuzz target: the execution-trace reader (et_reader.h: both schema
// versions, tensors, lists, attrs) and its join to a Kineto trace
// (et_join.h), then the pipeline on the joined trace. The input is the
// execution trace, json_mutator.h's separator line and the Kineto trace of
// the same run; the mutator edits mostly the execution trace, sometimes
// the Kineto trace, so that record function ids, storage ids and
// allocations still meet. Without the separator, or with a second part that
// is no Kineto trace, the execution-trace reader runs alone.
//
// The join builds a memtl trace and reads it back: a refusal of that trace
// is the join's bug, not the files' (JoinExecutionTrace, StatusCode::kInternal),
// so it stops the run as a crash would.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "core/read/common/format.h"
#include "core/read/et/et_reader.h"
#include "tests/fuzz/fuzz_file_pipeline.h"
#include "tests/fuzz/json_mutator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t sep = in.find(memtl_fuzz::kEtKinetoSeparator);
  const std::string et(in.substr(0, sep));
  const std::string kineto(sep == std::string_view::npos
                               ? std::string_view()
                               : in.substr(sep + memtl_fuzz::kEtKinetoSeparator.size()));
  if (kineto.empty() ||
      memtl::OpenInputFromMemory(kineto, "fuzz").format != memtl::InputFormat::kKineto) {
    (void)memtl::read::ReadExecutionTraceString(et, "fuzz");
    return 0;
  }
  static memtl_fuzz::MemFile et_file("et");
  static memtl_fuzz::MemFile kineto_file("kineto");
  memtl::ReadOptions options;
  options.et_path = et_file.Set(et);  // read by the join, as memtl reads --et
  const memtl::Status status = memtl_fuzz::RunFilePipeline(kineto_file.Set(kineto), options);
  if (status.code() == memtl::StatusCode::kInternal) {
    std::fprintf(stderr, "%s\n", status.message().c_str());  // what was refused, for the report
    __builtin_trap();
  }
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  return memtl_fuzz::MutateJsonDoc(data, size, max_size, seed,
                                   memtl_fuzz::JsonFlavor::kExecutionTrace);
}

extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t* data1, size_t size1,
                                            const uint8_t* data2, size_t size2, uint8_t* out,
                                            size_t max_out_size, unsigned int seed) {
  return memtl_fuzz::CrossOverJsonDocs(data1, size1, data2, size2, out, max_out_size, seed);
}

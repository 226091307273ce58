// Fuzz target: the whole pipeline, driven by a structure-aware mutator
// (structured_mutator.h). Byte mutations (fuzz_pipeline) rarely get past
// the JSON and the record checks with a trace whose tree, ids and times
// still hang together; this one edits records, numbers and the tree.
//
// The target: read, analyze, categorize (with the peak and the HTML report's
// data), every dump (graph, categories, events in three formats, peak text
// and JSON) and both JSON exports of every device. A trace with no counted
// defect must not give a negative total in any row of any device, nor a
// negative peak (a free larger than its allocation, a diagnostic, can: as
// in PyTorch, the timeline subtracts what the free says).
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "core/explain/events.h"
#include "core/explain/peak.h"
#include "core/pipeline/analysis.h"
#include "core/timeline/timeline.h"
#include "export/export.h"
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
  const memtl::Categorized& cz = *c.value();
  const memtl::Analysis& a = *cz.analysis;
  const bool clean = a.diagnostics.empty();
  (void)memtl::FormatTimeline(a.trace, a.keys, cz.timeline, cz.categories);
  memtl::ExplainInput in{a.trace, a.keys, *a.tree, *a.graph, cz.categories, cz.timeline, cz.device};
  in.key_shapes = &a.key_shapes;
  for (const auto f :
       {memtl::EventsFormat::kText, memtl::EventsFormat::kTsv, memtl::EventsFormat::kJsonLines}) {
    (void)memtl::FormatEvents(in, f);
  }
  if (cz.peak) {
    if (cz.peak->bytes < 0 && clean) __builtin_trap();
    (void)memtl::FormatPeak(*cz.peak);
    (void)memtl::PeakJson(*cz.peak);
  }
  for (size_t d = 0; d < a.trace.devices.size(); ++d) {
    const auto device = static_cast<memtl::DeviceIndex>(d);
    if (memtl::FindPeak(cz.timeline, cz.categories, device).bytes < 0 && clean) __builtin_trap();
    const memtl::CoalescedTimeline rows = memtl::Coalesce(cz.timeline, cz.categories, device);
    for (const auto& sizes : rows.sizes) {
      int64_t total = 0;
      for (const int64_t b : sizes) total += b;
      if (total < 0 && clean) __builtin_trap();  // the live bytes below zero
    }
    (void)memtl::SizesJson(rows);
    (void)memtl::RawJson(cz.timeline, cz.categories, device);
  }
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

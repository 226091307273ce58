// Fuzz target: the whole analysis on small traces: identity, op tree,
// data-flow graph, passes, timeline and the JSON exports of every device.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/pipeline/analysis.h"
#include "core/timeline/timeline.h"
#include "export/export.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (64u << 10)) return 0;
  auto trace =
      memtl::ReadTraceString(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  if (!trace.ok()) return 0;
  auto analysis = memtl::Analyze(std::move(trace.value()), "fuzz");
  if (!analysis.ok()) return 0;
  auto c = memtl::Categorize(std::move(analysis.value()));
  if (!c.ok()) return 0;
  const memtl::Analysis& a = *c.value()->analysis;
  const auto& cats = c.value()->categories;
  const auto& timeline = c.value()->timeline;
  (void)memtl::FormatTimeline(a.trace, a.keys, timeline, cats);
  (void)memtl::FormatDataFlow(a.trace, a.keys, *a.graph);
  for (size_t d = 0; d < a.trace.devices.size(); ++d) {
    const auto device = static_cast<memtl::DeviceIndex>(d);
    (void)memtl::SizesJson(memtl::Coalesce(timeline, cats, device));
    (void)memtl::RawJson(timeline, cats, device);
  }
  return 0;
}

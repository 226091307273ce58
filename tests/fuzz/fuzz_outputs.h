// What every pipeline fuzz target runs on a categorized trace (or a raw
// timeline, of which the timeline's outputs): every dump
// (categories, events in three formats, peak text and JSON) and both JSON
// exports of every device. A trace with no counted defect must not give a
// negative total in any row of any device, nor a negative peak (a free
// larger than its allocation, a diagnostic, can: as in PyTorch, the
// timeline subtracts what the free says): those trap.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/explain/events.h"
#include "core/explain/peak.h"
#include "core/pipeline/analysis.h"
#include "core/timeline/timeline.h"
#include "export/export.h"

namespace memtl_fuzz {

// The outputs of the timeline alone (what a raw timeline has): the peak,
// and every device's rows and JSON exports.
inline void RunTimelineOutputs(const memtl::Trace& trace, const memtl::CategorizedTimeline& cz,
                               bool clean) {
  if (cz.peak) {
    if (cz.peak->bytes < 0 && clean) __builtin_trap();
    (void)memtl::FormatPeak(*cz.peak);
    (void)memtl::PeakJson(*cz.peak);
  }
  for (size_t d = 0; d < trace.devices.size(); ++d) {
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
}

inline void RunOutputs(const memtl::Categorized& cz) {
  const memtl::Analysis& a = *cz.analysis;
  (void)memtl::FormatTimeline(a.trace, a.keys, cz.timeline, cz.categories);
  memtl::ExplainInput in{a.trace, a.keys, *a.tree, *a.graph, cz.categories, cz.timeline, cz.device};
  in.key_shapes = &a.key_shapes;
  if (cz.inferred) in.inferred = &a.inferred;
  for (const auto f :
       {memtl::EventsFormat::kText, memtl::EventsFormat::kTsv, memtl::EventsFormat::kJsonLines}) {
    (void)memtl::FormatEvents(in, f);
  }
  RunTimelineOutputs(a.trace, cz, a.diagnostics.empty());
}

}  // namespace memtl_fuzz

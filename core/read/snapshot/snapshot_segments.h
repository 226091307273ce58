// The allocator's segments alive at each device's allocated peak, with the
// allocation records alive in each (DeviceInfo::segments_at_peak), from a
// memory snapshot: its segments at the end, with the trace entries after
// the peak undone, and the blocks alive then found in them by address.
// Segment entries of an expandable segment (segment_map, segment_unmap)
// count as segments of their own range, as the reserved total counts them,
// and a block counts in each range it overlaps by the overlap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/model/ids.h"
#include "core/model/trace.h"

namespace memtl::read {

// One trace entry, as the segments read it, in the trace's time order.
struct SegmentEntry {
  enum class Kind : uint8_t { kAlloc, kFree, kGrow, kShrink, kOther };
  uint64_t addr = 0;
  int64_t size = 0;
  uint32_t record = kNone32;  // the allocation record an alloc or free made
  DeviceIndex device = 0;
  Kind kind = Kind::kOther;
};

// A segment of the snapshot, or a block alive from before the trace with
// the record that stands for it.
struct AddressRange {
  uint64_t addr = 0;
  int64_t size = 0;
  DeviceIndex device = 0;
  uint32_t record = kNone32;
};

// `peak_after`: per device, how many of `entries` (all devices') had been
// replayed when its allocated total peaked (0: before every entry).
// `early`: the blocks alive from before the trace to its end. Per device,
// its segments at the peak in address order.
std::vector<std::vector<DeviceInfo::Segment>> SegmentsAtPeak(
    const std::vector<AddressRange>& segments, const std::vector<SegmentEntry>& entries,
    const std::vector<size_t>& peak_after, const std::vector<AddressRange>& early,
    size_t num_devices);

}  // namespace memtl::read

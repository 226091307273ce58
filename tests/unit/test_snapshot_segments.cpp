// The segments alive at a snapshot's peak (core/read/snapshot/
// snapshot_segments.h) and the free memory in them by what holds each
// (core/explain/peak.h, FreeInSegments), on entries laid out here.
#include <doctest/doctest.h>

#include <vector>

#include "core/explain/peak.h"
#include "core/read/snapshot/snapshot_segments.h"

using namespace memtl;
using read::AddressRange;
using read::SegmentEntry;
using Kind = SegmentEntry::Kind;

namespace {

constexpr uint64_t kMiB = 1 << 20;

SegmentEntry Entry(Kind kind, uint64_t addr, int64_t size, uint32_t record = kNone32) {
  return {addr, size, record, 0, kind};
}

}  // namespace

TEST_CASE("snapshot segments: what was alive at the peak, and where") {
  // Segments at the end: A (2 MiB at 0x100000000) and C (1 MiB), made after
  // the peak; B (2 MiB at 0x200000000) freed after the peak. A block from
  // before the trace (record 0) in A; record 1 (1 MiB) in B, allocated
  // before the peak, freed after; record 2 after the peak in C.
  const std::vector<AddressRange> end = {{0x100000000, 2 * kMiB, 0}, {0x300000000, 1 * kMiB, 0}};
  const std::vector<SegmentEntry> entries = {
      Entry(Kind::kGrow, 0x200000000, 2 * kMiB),
      Entry(Kind::kAlloc, 0x200000000, 1 * kMiB, 1),
      // the peak: after these two
      Entry(Kind::kFree, 0x200000000, 1 * kMiB, 3),
      Entry(Kind::kShrink, 0x200000000, 2 * kMiB),
      Entry(Kind::kGrow, 0x300000000, 1 * kMiB),
      Entry(Kind::kAlloc, 0x300000000, 512 << 10, 2),
      // a block from before the trace, freed after the peak: alive then
      Entry(Kind::kFree, 0x100100000, 256 << 10, 4),
  };
  const std::vector<AddressRange> early = {{0x100000000, 512 << 10, 0, 0}};
  const auto segs = read::SegmentsAtPeak(end, entries, {2}, early, 1);
  REQUIRE(segs.size() == 1);
  REQUIRE(segs[0].size() == 2);  // A and B; C came later
  CHECK(segs[0][0].bytes == 2 * kMiB);
  CHECK(segs[0][0].held ==
        std::vector<std::pair<uint32_t, int64_t>>{{0, 512 << 10}, {4, 256 << 10}});
  CHECK(segs[0][1].bytes == 2 * kMiB);
  CHECK(segs[0][1].held == std::vector<std::pair<uint32_t, int64_t>>{{1, 1 * kMiB}});
}

TEST_CASE("snapshot segments: a block over two mapped ranges counts in each by its overlap") {
  // An expandable segment mapped in two ranges, one 3 MiB block over both.
  const std::vector<AddressRange> end = {{0x100000000, 2 * kMiB, 0}, {0x100200000, 2 * kMiB, 0}};
  const std::vector<SegmentEntry> entries = {Entry(Kind::kAlloc, 0x100000000, 3 * kMiB, 7)};
  const auto segs = read::SegmentsAtPeak(end, entries, {1}, {}, 1);
  REQUIRE(segs[0].size() == 2);
  CHECK(segs[0][0].held == std::vector<std::pair<uint32_t, int64_t>>{{7, 2 * kMiB}});
  CHECK(segs[0][1].held == std::vector<std::pair<uint32_t, int64_t>>{{7, 1 * kMiB}});
}

TEST_CASE("snapshot segments: free memory by the category holding each segment most") {
  DeviceInfo device;
  // Segment 1: 2 MiB with an ACTIVATION of 1 MiB and a GRADIENT of 256 KiB
  // (768 KiB free, held by ACTIVATION); segment 2: 1 MiB holding nothing.
  device.segments_at_peak = {{2 * kMiB, {{0, 1 * kMiB}, {1, 256 << 10}}}, {1 * kMiB, {}}};
  InferredCategories inferred;
  inferred.category = {static_cast<uint8_t>(Category::kActivation),
                       static_cast<uint8_t>(Category::kGradient)};
  const SegmentFree f = FreeInSegments(device, inferred);
  CHECK(f.any);
  CHECK(f.by_holder[ExportIndex(Category::kActivation)] == (768 << 10));
  CHECK(f.in_empty == 1 * kMiB);
  CHECK(SegmentFreeLine(f, true) ==
        "free inside segments, by what holds each most: ACTIVATION (inferred) 768.0 KiB; in "
        "segments holding nothing 1.0 MiB\n");
  // No segments named: nothing said.
  CHECK_FALSE(FreeInSegments(DeviceInfo{}, inferred).any);
  CHECK(SegmentFreeLine(SegmentFree{}, true).empty());
}

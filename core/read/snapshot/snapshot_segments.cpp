// The segments alive at the peak (snapshot_segments.h).
#include "core/read/snapshot/snapshot_segments.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace memtl::read {

namespace {

using Kind = SegmentEntry::Kind;

// One device's segments at its peak: the end's, with every later segment
// entry undone, last first.
std::map<uint64_t, int64_t> SegmentsThen(const std::vector<AddressRange>& segments,
                                         const std::vector<SegmentEntry>& entries, size_t peak,
                                         DeviceIndex d) {
  std::map<uint64_t, int64_t> segs;
  for (const AddressRange& s : segments)
    if (s.device == d && s.size > 0) segs[s.addr] = s.size;
  for (size_t i = entries.size(); i-- > peak;) {
    const SegmentEntry& e = entries[i];
    if (e.device != d) continue;
    if (e.kind == Kind::kGrow) segs.erase(e.addr);
    if (e.kind == Kind::kShrink) segs[e.addr] = e.size;
  }
  return segs;
}

// One device's blocks alive at its peak, by address: their sizes and
// records. Those from before the trace, those allocated before the peak
// and not freed by then, and those the trace frees after the peak without
// having allocated them (from before the trace too: their free's record).
std::map<uint64_t, std::pair<int64_t, uint32_t>> BlocksThen(
    const std::vector<SegmentEntry>& entries, size_t peak, const std::vector<AddressRange>& early,
    DeviceIndex d) {
  std::map<uint64_t, std::pair<int64_t, uint32_t>> live;
  for (const AddressRange& b : early)
    if (b.device == d) live[b.addr] = {b.size, b.record};
  std::set<uint64_t> freed_early;
  for (size_t i = 0; i < peak && i < entries.size(); ++i) {
    const SegmentEntry& e = entries[i];
    if (e.device != d) continue;
    if (e.kind == Kind::kAlloc) live[e.addr] = {e.size, e.record};
    if (e.kind == Kind::kFree && live.erase(e.addr) == 0) freed_early.insert(e.addr);
  }
  std::set<uint64_t> allocated_after;
  for (size_t i = peak; i < entries.size(); ++i) {
    const SegmentEntry& e = entries[i];
    if (e.device != d) continue;
    if (e.kind == Kind::kAlloc) allocated_after.insert(e.addr);
    if (e.kind == Kind::kFree && !allocated_after.contains(e.addr) && !live.contains(e.addr) &&
        !freed_early.contains(e.addr))
      live[e.addr] = {e.size, e.record};
  }
  return live;
}

}  // namespace

std::vector<std::vector<DeviceInfo::Segment>> SegmentsAtPeak(
    const std::vector<AddressRange>& segments, const std::vector<SegmentEntry>& entries,
    const std::vector<size_t>& peak_after, const std::vector<AddressRange>& early,
    size_t num_devices) {
  std::vector<std::vector<DeviceInfo::Segment>> out(num_devices);
  for (size_t dev = 0; dev < num_devices && dev < peak_after.size(); ++dev) {
    const auto d = static_cast<DeviceIndex>(dev);
    const std::map<uint64_t, int64_t> segs = SegmentsThen(segments, entries, peak_after[dev], d);
    if (segs.empty()) continue;
    std::map<uint64_t, size_t> index;
    for (const auto& [addr, size] : segs) {
      index[addr] = out[dev].size();
      out[dev].push_back({size, {}});
    }
    // A block counts in each segment it overlaps, by the overlap: an
    // expandable segment's block may span ranges mapped apart.
    for (const auto& [addr, block] : BlocksThen(entries, peak_after[dev], early, d)) {
      const uint64_t end = addr + static_cast<uint64_t>(block.first);
      auto it = segs.upper_bound(addr);
      if (it != segs.begin()) --it;
      for (; it != segs.end() && it->first < end; ++it) {
        const uint64_t seg_end = it->first + static_cast<uint64_t>(it->second);
        const uint64_t from = std::max(addr, it->first), to = std::min(end, seg_end);
        if (from >= to) continue;
        out[dev][index[it->first]].held.emplace_back(block.second, static_cast<int64_t>(to - from));
      }
    }
  }
  return out;
}

}  // namespace memtl::read

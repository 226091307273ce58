// The memory timeline (PyTorch's MemoryProfile.timeline): every change of
// live memory as (time, action, (key, version), bytes), sorted by
// (time, action) with ties in PyTorch's insertion order, plus the coalescing
// into per-category sizes that PyTorch's exports use.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/categories/category.h"
#include "core/graph/data_flow.h"
#include "core/graph/op_tree.h"
#include "core/graph/size_map.h"
#include "core/model/diagnostics.h"
#include "core/model/key_table.h"
#include "core/model/status.h"

namespace memtl {

// PyTorch's Action enum; the value is the export index (1..4).
enum class Action : uint8_t { kPreexisting = 1, kCreate = 2, kIncrementVersion = 3, kDestroy = 4 };
std::string_view ActionName(Action a);

// 24 bytes (a timeline holds about one event per edge of the graph and two
// per untracked allocation).
struct TimelineEvent {
  int64_t time = 0;        // ns; -1 for pre-existing
  int64_t bytes : 48 = 0;  // >= 0; at most kMaxAllocBytes
  DeviceIndex device : 16 = 0;
  // The key slot's value (KeyTable), read as key(); KeySlot::kNone: an
  // allocation with no tensor identity.
  uint32_t slot = KeySlot::kNone;
  // A keyed event's version, read as version(); at most kMaxVersion
  // (DataFlowGraph::Build). An event with no key has no version: it keeps
  // the category inferred for its allocation (core/infer/), as the
  // Category's value plus one, read as inferred(); 0 when none was (unknown).
  int32_t ver : 29 = 0;
  Action action : 3 = Action::kCreate;

  KeySlot key() const { return KeySlot(slot); }
  Version version() const { return Version(ver); }
  bool has_key() const { return slot != KeySlot::kNone; }
  // The inferred category of an event with no key (none for a keyed one).
  std::optional<Category> inferred() const {
    if (has_key() || ver <= 0) return std::nullopt;
    return static_cast<Category>(ver - 1);
  }
};
static_assert(sizeof(TimelineEvent) == 24);

// `untracked_live` is UntrackedAllocationsLive's result for this trace (one
// bit per allocation record), computed before the addresses went; a vector
// of another size is an error (an internal one: the pipeline always passes
// the right one), never recomputed here. `inferred`, when not empty, is the
// inferred category per allocation record (InferredCategories::category,
// core/infer/infer.h): the events of an allocation with no key keep it
// (TimelineEvent::inferred); another size is an error too.
Expected<std::vector<TimelineEvent>> BuildTimeline(const OpTree& tree, const KeyTable& keys,
                                                   const DataFlowGraph& graph, const SizeMap& sizes,
                                                   const std::vector<bool>& untracked_live,
                                                   const CategoryDict& cats, Diagnostics& diag,
                                                   const std::vector<uint8_t>& inferred = {});

// Whether every sum the exports form from `timeline` fits in 64 bits
// (PyTorch's are Python integers and cannot overflow): per device, after
// every event, the bytes of each category and the sum of their magnitudes
// are at most 2^63-1. Otherwise an error naming the event that passes it.
// The same walk counts the rows whose live bytes are below zero, as the
// diagnostic "live bytes below zero". Run before exporting.
Status CheckTimelineSums(const Trace& trace, const KeyTable& keys,
                         const std::vector<TimelineEvent>& timeline, const CategoryDict& cats,
                         Diagnostics& diag);

// PyTorch's stable sort by (time, action), for runs that are nearly in
// order: insertion sort while its work stays linear, then std::stable_sort
// for whatever is left (correct and stable either way; only the cost
// differs). Exposed for tests.
void SortNearlySorted(TimelineEvent* first, TimelineEvent* last);

// Category export index (0..7) of a timeline entry at `version`; an entry
// with no key has its inferred category's (unknown when none).
int CategoryIndexOf(const CategoryDict& cats, const TimelineEvent& e, Version version);

// PyTorch's `int(t / 1000)`: the quotient correctly rounded to a double, then
// truncated, which is not always t / 1000 in integers.
int64_t PyTrueDivTrunc1000(int64_t t);

// An event's time in us as PyTorch's _coalesce_timeline computes it: -1
// stays -1 (pre-existing; the exports show the smallest time instead). The
// exports' rows are the runs of events with one such time.
int64_t MicrosOf(const TimelineEvent& e);

// PyTorch's _coalesce_timeline for one device: times in us (pre-existing
// moved to the smallest time) and, per time, 9 sizes (a leading 0 and the 8
// categories by export index).
struct CoalescedTimeline {
  std::vector<int64_t> times;
  std::vector<std::array<int64_t, 9>> sizes;
};
CoalescedTimeline Coalesce(const std::vector<TimelineEvent>& timeline, const CategoryDict& cats,
                           DeviceIndex device);

// The same rows one at a time, for exports that stream them instead of
// holding them (a row per distinct time is 80 bytes). CoalescedTimes calls
// `time(t)` per row; CoalescedSizes calls `row(sizes)` per row.
void CoalescedTimes(const std::vector<TimelineEvent>& timeline, DeviceIndex device,
                    const std::function<void(int64_t)>& time);
void CoalescedSizes(const std::vector<TimelineEvent>& timeline, const CategoryDict& cats,
                    DeviceIndex device,
                    const std::function<void(const std::array<int64_t, 9>&)>& row);
// Both at once: `row(time, sizes)` per row.
void CoalescedRows(const std::vector<TimelineEvent>& timeline, const CategoryDict& cats,
                   DeviceIndex device,
                   const std::function<void(int64_t, const std::array<int64_t, 9>&)>& row);

// Per device (indexed as Trace::devices, `num_devices` of them), the
// largest live bytes of a row (the total after every event of one
// microsecond, as the exports' rows are), or -1 for a device without
// events.
std::vector<int64_t> PeakPerDevice(const std::vector<TimelineEvent>& timeline, size_t num_devices);

// The timeline as text, one event per line, e.g.
//   create             T3(v0)              96 B  ACTIVATION
// with `OLD -> NEW` categories when a version bump changes the category and
// `[memory]` for allocations with no tensor identity. Devices other than the
// first are named at the end of the line.
std::string FormatTimeline(const Trace& trace, const KeyTable& keys,
                           const std::vector<TimelineEvent>& timeline, const CategoryDict& cats);

}  // namespace memtl

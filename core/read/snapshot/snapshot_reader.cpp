// Memory snapshots into the Trace (snapshot_reader.h): the pickle decoded
// whole (pickle.h), the trace entries of every device merged in time order
// and replayed twice: once for the addresses (what is alive at the end,
// what was freed but never allocated in the trace, the segments' changes),
// then, with the memory from before the trace known, into events.
#include "core/read/snapshot/snapshot_reader.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "core/model/quote.h"
#include "core/read/snapshot/pickle.h"
#include "core/read/snapshot/snapshot_frames.h"
#include "core/read/snapshot/snapshot_segments.h"

namespace memtl {

namespace {

using pickle::Document;
using pickle::kNoValue;
using read::FrameStacks;
using read::StackLevel;

// The most devices a snapshot may list (device_traces' length).
constexpr size_t kMaxDevices = 1024;
// Events may outnumber the pickle's values by this much (the frames of an
// entry become several events, shared with the entries around it), and at
// least kMinEventBudget may be made: a small pickle that names one deep
// stack many times cannot make unbounded events.
constexpr size_t kEventsPerValue = 32;
constexpr size_t kMinEventBudget = size_t{1} << 22;

enum class Action : uint8_t {
  kAlloc,
  kFreeRequested,
  kFreeCompleted,
  kSegmentAlloc,
  kSegmentFree,
  kSegmentMap,
  kSegmentUnmap,
  kOom,
  kSnapshot,
  kUnknown,
};

Action ActionOf(std::string_view a) {
  if (a == "alloc") return Action::kAlloc;
  if (a == "free_requested") return Action::kFreeRequested;
  if (a == "free_completed" || a == "free") return Action::kFreeCompleted;
  if (a == "segment_alloc") return Action::kSegmentAlloc;
  if (a == "segment_free") return Action::kSegmentFree;
  if (a == "segment_map") return Action::kSegmentMap;
  if (a == "segment_unmap") return Action::kSegmentUnmap;
  if (a == "oom") return Action::kOom;
  if (a == "snapshot") return Action::kSnapshot;
  return Action::kUnknown;
}

// What an entry is to the segments at the peak (snapshot_segments.h).
read::SegmentEntry::Kind KindOf(Action a) {
  using Kind = read::SegmentEntry::Kind;
  switch (a) {
    case Action::kAlloc:
      return Kind::kAlloc;
    case Action::kFreeCompleted:
      return Kind::kFree;
    case Action::kSegmentAlloc:
    case Action::kSegmentMap:
      return Kind::kGrow;
    case Action::kSegmentFree:
    case Action::kSegmentUnmap:
      return Kind::kShrink;
    default:
      return Kind::kOther;
  }
}

// One trace entry, read.
struct Entry {
  int64_t t_ns = 0;
  uint64_t addr = 0;
  int64_t size = 0;
  uint32_t frames = kNoValue;  // the frames list (a pickle value)
  uint32_t value = kNoValue;   // the entry's dict
  uint32_t order = 0;          // position in the device's list
  DeviceIndex device = 0;
  Action action = Action::kUnknown;
};

struct LiveKey {
  uint64_t addr;
  DeviceIndex device;
  bool operator==(const LiveKey&) const = default;
};
struct LiveKeyHash {
  size_t operator()(const LiveKey& k) const {
    return std::hash<uint64_t>()(k.addr) ^ (size_t{k.device} << 48);
  }
};
using LiveMap = std::unordered_map<LiveKey, int64_t, LiveKeyHash>;

class Builder {
 public:
  Builder(const Document& doc, std::string name, SnapshotRead& r)
      : doc_(doc), name_(std::move(name)), r_(r), t_(r.trace), stacks_(doc, r.trace) {}

  Status Run();

 private:
  Status Fail(const std::string& what) const { return Status::Error(name_ + ": " + what); }
  Status ReadEntries(uint32_t traces);
  Status ReadSegments(uint32_t segments);
  void FirstReplay();
  void AddPreProfile();
  Status Emit();
  uint32_t Under(uint32_t stack, int64_t t);
  Status AddEvent(Event e, int64_t t);
  // `replayed`: how many entries the totals hold.
  void NotePeak(DeviceIndex d, size_t replayed);
  void SegmentsAtPeak();
  DeviceIndex Device(int64_t index);

  const Document& doc_;
  std::string name_;
  SnapshotRead& r_;
  Trace& t_;
  FrameStacks stacks_;
  std::vector<Entry> entries_;
  // Per device index (Trace::devices).
  std::vector<int64_t> first_ns_, segments_total_, reserved_delta_, unseen_, freed_unseen_;
  std::vector<int64_t> running_, reserved_, peak_;
  std::vector<bool> has_segments_;
  // What the segments at the peak are found from (snapshot_segments.h): the
  // segments at the end, each entry as they read it, how many entries each
  // device's peak follows, the blocks from before the trace and the record
  // standing for them per device.
  std::vector<read::AddressRange> segment_ranges_, early_;
  std::vector<read::SegmentEntry> segment_entries_;
  std::vector<size_t> peak_after_;
  std::vector<uint32_t> pre_record_;
  // Blocks allocated at the snapshot, by address: their sizes.
  LiveMap active_;
  size_t event_budget_ = 0;
  bool over_budget_ = false;
  std::vector<std::pair<StackLevel, uint32_t>> open_;  // the open levels and their events
};

DeviceIndex Builder::Device(int64_t index) {
  const DeviceIndex d = t_.InternDevice("cuda:" + std::to_string(index));
  if (first_ns_.size() <= d) {
    const size_t n = size_t{d} + 1;
    first_ns_.resize(n, INT64_MAX);
    for (auto* v : {&segments_total_, &reserved_delta_, &unseen_, &freed_unseen_, &running_,
                    &reserved_, &peak_})
      v->resize(n, 0);
    has_segments_.resize(n, false);
    peak_after_.resize(n, 0);
    pre_record_.resize(n, kNone32);
  }
  return d;
}

Status Builder::ReadEntries(uint32_t traces) {
  const std::span<const uint32_t> devices = doc_.Items(traces);
  if (devices.size() > kMaxDevices)
    return Fail("\"device_traces\" lists " + std::to_string(devices.size()) +
                " devices (more than " + std::to_string(kMaxDevices) + ")");
  size_t bad = 0, unknown = 0;
  std::string unknown_example;
  for (size_t dev = 0; dev < devices.size(); ++dev) {
    if (!doc_.IsList(devices[dev])) {
      ++bad;
      continue;
    }
    const std::span<const uint32_t> list = doc_.Items(devices[dev]);
    if (list.empty()) continue;
    // Entries are dicts of their own: more than the pickle's values is a
    // list named again and again through the memo.
    if (entries_.size() + list.size() > doc_.size())
      return Fail("\"device_traces\" names more entries than the pickle holds values");
    const DeviceIndex d = Device(static_cast<int64_t>(dev));
    int64_t last_ns = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      const uint32_t v = list[i];
      Entry e;
      e.value = v;
      e.device = d;
      e.order = static_cast<uint32_t>(i);
      const std::string_view action = doc_.Str(doc_.Get(v, "action"));
      e.action = ActionOf(action);
      if (e.action == Action::kUnknown) {
        if (unknown++ == 0) unknown_example = Quote(action);
        continue;
      }
      const std::optional<int64_t> us = doc_.Int(doc_.Get(v, "time_us"));
      if (us && *us >= 0 && *us < (int64_t{1} << 53)) last_ns = *us * 1000;
      e.t_ns = last_ns;
      const std::optional<int64_t> size = doc_.Int(doc_.Get(v, "size"));
      const std::optional<uint64_t> addr = doc_.UInt(doc_.Get(v, "addr"));
      e.frames = doc_.Get(v, "frames");
      const bool needs_addr = e.action != Action::kOom && e.action != Action::kSnapshot;
      if (!size || *size < 0 || *size > kMaxAllocBytes || (needs_addr && !addr) ||
          (addr && *addr >= kPreProfileAddress) || (e.action == Action::kAlloc && *size == 0)) {
        ++bad;
        continue;
      }
      e.size = *size;
      e.addr = addr.value_or(0);
      first_ns_[d] = std::min(first_ns_[d], e.t_ns);
      entries_.push_back(e);
    }
  }
  if (bad > 0)
    r_.diagnostics.Add("snapshot trace entry without a usable addr, size or action (skipped)",
                       "size 0 to 2^47-1 bytes, addr 0 to 2^63", bad);
  if (unknown > 0)
    r_.diagnostics.Add("snapshot trace entry of an unknown action (skipped)", unknown_example,
                       unknown);
  // Devices in time order, ties in device order then the trace's own.
  std::stable_sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
    if (a.t_ns != b.t_ns) return a.t_ns < b.t_ns;
    if (a.device != b.device) return a.device < b.device;
    return a.order < b.order;
  });
  return {};
}

Status Builder::ReadSegments(uint32_t segments) {
  size_t blocks_seen = 0;
  for (const uint32_t s : doc_.Items(segments)) {
    const std::optional<int64_t> device = doc_.Int(doc_.Get(s, "device"));
    const std::optional<int64_t> total = doc_.Int(doc_.Get(s, "total_size"));
    if (!device || *device < 0 || static_cast<size_t>(*device) >= kMaxDevices || !total ||
        *total < 0 || *total > kMaxAllocBytes) {
      r_.diagnostics.Add("snapshot segment without a usable device or total_size (skipped)",
                         "device 0 to 1023, total_size 0 to 2^47-1 bytes");
      continue;
    }
    const DeviceIndex d = Device(*device);
    has_segments_[d] = true;
    segments_total_[d] = std::min(segments_total_[d] + *total, kMaxAllocBytes);
    if (const std::optional<uint64_t> addr = doc_.UInt(doc_.Get(s, "address")))
      segment_ranges_.push_back({*addr, *total, d});
    const std::span<const uint32_t> blocks = doc_.Items(doc_.Get(s, "blocks"));
    blocks_seen += blocks.size();
    if (blocks_seen > doc_.size())
      return Fail("\"segments\" names more blocks than the pickle holds values");
    for (const uint32_t b : blocks) {
      const std::string_view state = doc_.Str(doc_.Get(b, "state"));
      if (state != "active_allocated" && state != "active_pending_free") continue;
      const std::optional<uint64_t> addr = doc_.UInt(doc_.Get(b, "address"));
      const std::optional<int64_t> size = doc_.Int(doc_.Get(b, "size"));
      if (!addr || !size || *size <= 0 || *size > kMaxAllocBytes || *addr >= kPreProfileAddress) {
        r_.diagnostics.Add("snapshot block without a usable address or size (skipped)",
                           "size 1 to 2^47-1 bytes, address 0 to 2^63");
        continue;
      }
      active_[{*addr, d}] = *size;
    }
  }
  return {};
}

// The addresses alone: what the trace allocates and leaves alive, frees
// without having allocated, and how it changes the reserved total.
void Builder::FirstReplay() {
  LiveMap live;
  for (const Entry& e : entries_) {
    switch (e.action) {
      case Action::kAlloc:
        live[{e.addr, e.device}] = e.size;
        break;
      case Action::kFreeCompleted:
        if (live.erase({e.addr, e.device}) == 0)
          freed_unseen_[e.device] = std::min(freed_unseen_[e.device] + e.size, kMaxAllocBytes);
        break;
      case Action::kSegmentAlloc:
      case Action::kSegmentMap:
        reserved_delta_[e.device] += e.size;
        break;
      case Action::kSegmentFree:
      case Action::kSegmentUnmap:
        reserved_delta_[e.device] -= e.size;
        break;
      default:
        break;
    }
  }
  // Blocks allocated at the snapshot that the trace never allocated.
  std::vector<uint64_t> blocks(unseen_.size(), 0);
  for (const auto& [key, size] : active_) {
    if (live.contains(key)) continue;
    unseen_[key.device] = std::min(unseen_[key.device] + size, kMaxAllocBytes);
    early_.push_back({key.addr, size, key.device});
    ++blocks[key.device];
  }
  for (size_t d = 0; d < unseen_.size(); ++d) {
    if (blocks[d] == 0 && freed_unseen_[d] == 0) continue;
    r_.diagnostics.Add(
        "snapshot whose trace starts after memory was allocated (max_entries wrapped, or "
        "history was recorded late): that memory is one allocation from before the trace",
        t_.devices[d].name + ": " + std::to_string(blocks[d]) + " blocks (" +
            std::to_string(unseen_[d]) + " bytes) allocated at the snapshot and " +
            std::to_string(freed_unseen_[d]) + " bytes freed in the trace, never allocated in it",
        blocks[d] + (freed_unseen_[d] > 0 ? 1 : 0));
  }
  uint64_t missing = 0;
  std::string example;
  for (const auto& [key, size] : live) {
    if (active_.contains(key) || !has_segments_[key.device]) continue;
    if (missing++ == 0) example = t_.devices[key.device].name + " at " + std::to_string(key.addr);
  }
  if (missing > 0)
    r_.diagnostics.Add(
        "allocation alive at the end of the trace that no block of the "
        "snapshot's segments holds",
        example, missing);
}

// Memory from before the trace that the trace never frees: one allocation
// per device at its first entry, before every event (the Kineto reader's).
void Builder::AddPreProfile() {
  uint64_t next = kPreProfileAddress;
  for (size_t d = 0; d < unseen_.size(); ++d) {
    // What the trace frees without allocating is the timeline's own
    // pre-existing memory; the running total starts with both.
    running_[d] = std::min(unseen_[d] + freed_unseen_[d], kMaxAllocBytes);
    reserved_[d] = segments_total_[d] - reserved_delta_[d];
    if (reserved_[d] < 0) {
      r_.diagnostics.Add(
          "reserved total below 0 at the trace's start (the segments and the "
          "trace's segment entries disagree): counted from 0",
          t_.devices[d].name + ": " + std::to_string(reserved_[d]) + " bytes");
      reserved_[d] = 0;
    }
    if (first_ns_[d] == INT64_MAX) first_ns_[d] = entries_.empty() ? 0 : entries_.front().t_ns;
    if (has_segments_[d] || reserved_delta_[d] != 0)
      r_.reserved.push_back({first_ns_[d], reserved_[d], static_cast<DeviceIndex>(d)});
    if (unseen_[d] <= 0) continue;
    Event e;
    e.kind = EventKind::kAlloc;
    e.payload = static_cast<uint32_t>(t_.allocs.size());
    AllocInfo a;
    a.bytes = unseen_[d];
    a.device = static_cast<DeviceIndex>(d);
    pre_record_[d] = static_cast<uint32_t>(t_.allocs.size());
    t_.allocs.push_back(a);
    t_.alloc_ptrs.push_back(next++);
    t_.events.push_back(e);
    t_.event_t0.push_back(first_ns_[d]);
  }
}

Status Builder::AddEvent(Event e, int64_t t) {
  if (t_.events.size() >= event_budget_)
    return Fail("the snapshot's entries and frames make more than " +
                std::to_string(event_budget_) + " events");
  t_.events.push_back(e);
  t_.event_t0.push_back(t);
  return {};
}

// Opens the levels of `stack` that differ from the ones open (the entries
// before it share the rest), at time `t`; returns the innermost event, the
// parent of the entry's own (kNone32: a root). Past the event budget it
// sets `over_budget_` and opens nothing more.
uint32_t Builder::Under(uint32_t stack, int64_t t) {
  const std::vector<StackLevel>& levels = stacks_.Levels(stack);
  size_t common = 0;
  while (common < open_.size() && common < levels.size() && open_[common].first == levels[common])
    ++common;
  open_.resize(common);
  for (size_t i = common; i < levels.size(); ++i) {
    const StackLevel& l = levels[i];
    Event e;
    e.parent = open_.empty() ? kNone32 : open_.back().second;
    e.kind = l.kind;
    if (l.kind == EventKind::kOp) {
      OpInfo op;
      op.name = l.name;
      op.scope = l.scope;
      e.payload = static_cast<uint32_t>(t_.ops.size());
      t_.ops.push_back(op);
    } else {
      e.payload = static_cast<uint32_t>(t_.py_names.size());
      t_.py_names.push_back(l.name);
      t_.py_lines.push_back(l.caller_line);
      t_.py_linked.push_back(false);
    }
    if (!AddEvent(e, t).ok()) {
      over_budget_ = true;
      return kNone32;
    }
    open_.emplace_back(l, static_cast<uint32_t>(t_.events.size() - 1));
  }
  return open_.empty() ? kNone32 : open_.back().second;
}

void Builder::NotePeak(DeviceIndex d, size_t replayed) {
  DeviceInfo& info = t_.devices[d];
  if (running_[d] > peak_[d]) {
    peak_[d] = running_[d];
    peak_after_[d] = replayed;
    info.max_total_allocated = running_[d];
    info.reserved_at_peak = has_segments_[d] ? reserved_[d] : 0;
  }
  info.max_total_reserved = std::max(info.max_total_reserved, reserved_[d]);
}

Status Builder::Emit() {
  LiveMap live;
  std::unordered_map<LiveKey, uint32_t, LiveKeyHash> requested;  // free_requested's frames
  uint64_t ooms = 0;
  std::string oom_example;
  for (size_t d = 0; d < running_.size(); ++d) NotePeak(static_cast<DeviceIndex>(d), 0);
  segment_entries_.reserve(entries_.size());
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& x = entries_[i];
    segment_entries_.push_back({x.addr, x.size, kNone32, x.device, KindOf(x.action)});
    const LiveKey key{x.addr, x.device};
    int64_t bytes = 0;
    uint32_t frames = x.frames;
    switch (x.action) {
      case Action::kAlloc:
        bytes = live.emplace(key, x.size).second ? x.size : 0;
        if (bytes == 0)
          r_.diagnostics.Add(
              "allocation at an address already live (a free missing from the "
              "snapshot's trace?)",
              "counted as PyTorch counts it: no change of the total");
        break;
      case Action::kFreeRequested:
        requested[key] = x.frames;
        continue;
      case Action::kFreeCompleted: {
        const auto it = live.find(key);
        bytes = -(it != live.end() ? it->second : x.size);
        if (it != live.end()) live.erase(it);
        if (const auto r = requested.find(key); r != requested.end()) {
          frames = r->second;
          requested.erase(r);
        }
        break;
      }
      case Action::kSegmentAlloc:
      case Action::kSegmentMap:
      case Action::kSegmentUnmap:
      case Action::kSegmentFree: {
        const bool grows = x.action == Action::kSegmentAlloc || x.action == Action::kSegmentMap;
        reserved_[x.device] += grows ? x.size : -x.size;
        r_.reserved.push_back({x.t_ns, std::max<int64_t>(reserved_[x.device], 0), x.device});
        break;
      }
      case Action::kOom:
        if (ooms++ == 0) {
          const std::optional<int64_t> free_bytes = doc_.Int(doc_.Get(x.value, "device_free"));
          oom_example = t_.devices[x.device].name + " at t=" + std::to_string(x.t_ns) +
                        " ns: " + std::to_string(x.size) + " bytes requested" +
                        (free_bytes ? ", " + std::to_string(*free_bytes) + " free on the device"
                                    : std::string());
        }
        break;
      default:
        break;
    }
    if (x.action == Action::kAlloc || x.action == Action::kFreeCompleted) {
      const uint32_t parent = Under(stacks_.Of(frames), x.t_ns);
      if (over_budget_) return AddEvent(Event{}, x.t_ns);
      Event e;
      e.parent = parent;
      e.kind = EventKind::kAlloc;
      e.payload = static_cast<uint32_t>(t_.allocs.size());
      AllocInfo a;
      a.bytes = x.action == Action::kAlloc ? x.size : bytes;
      a.device = x.device;
      segment_entries_.back().record = static_cast<uint32_t>(t_.allocs.size());
      t_.allocs.push_back(a);
      t_.alloc_ptrs.push_back(x.addr);
      if (Status s = AddEvent(e, x.t_ns); !s.ok()) return s;
      running_[x.device] = std::clamp<int64_t>(running_[x.device] + bytes, 0, kMaxAllocBytes);
    }
    // A device's row ends where its time does (the timeline's rows).
    const bool row_ends = i + 1 == entries_.size() || entries_[i + 1].t_ns != x.t_ns ||
                          entries_[i + 1].device != x.device;
    if (row_ends) NotePeak(x.device, i + 1);
  }
  if (ooms > 0)
    r_.diagnostics.Add("out-of-memory error in the snapshot's trace", oom_example, ooms);
  if (stacks_.bad_frames() > 0)
    r_.diagnostics.Add("snapshot frame that is no dict (skipped)",
                       "frames are dicts of "
                       "filename, line and name",
                       stacks_.bad_frames());
  return {};
}

void Builder::SegmentsAtPeak() {
  for (read::AddressRange& b : early_) b.record = pre_record_[b.device];
  auto per_device = read::SegmentsAtPeak(segment_ranges_, segment_entries_, peak_after_, early_,
                                         t_.devices.size());
  for (size_t d = 0; d < per_device.size(); ++d)
    t_.devices[d].segments_at_peak = std::move(per_device[d]);
}

Status Builder::Run() {
  const uint32_t root = doc_.root();
  const uint32_t segments = doc_.Get(root, "segments");
  const uint32_t traces = doc_.Get(root, "device_traces");
  if (!doc_.IsList(segments) || !doc_.IsList(traces)) {
    return Fail(
        "this pickle is no CUDA memory snapshot (a dict with \"segments\" and "
        "\"device_traces\" lists, as torch.cuda.memory._dump_snapshot writes)");
  }
  event_budget_ =
      std::min<size_t>(std::max(kMinEventBudget, doc_.size() * kEventsPerValue), kMaxEvents);
  if (Status s = ReadEntries(traces); !s.ok()) return s;
  if (Status s = ReadSegments(segments); !s.ok()) return s;
  FirstReplay();
  AddPreProfile();
  if (Status s = Emit(); !s.ok()) return s;
  SegmentsAtPeak();
  if (t_.allocs.empty()) {
    return Fail(
        "the snapshot holds no allocation (no trace entry, no allocated block); record with "
        "torch.cuda.memory._record_memory_history(max_entries=100000) before the run, then "
        "torch.cuda.memory._dump_snapshot(\"snapshot.pickle\")");
  }
  if (t_.strings.size() >= kMaxNames) return Fail("more than 2^24 distinct frames");
  t_.header.version = kTraceFormatVersion;
  t_.header.producer = "CUDA memory snapshot";
  t_.header.profile_memory = 1;
  t_.header.pairs_in_time_order = true;
  t_.header.py_names_at_line = true;
  t_.Finish();
  return {};
}

Expected<SnapshotRead> Read(OpenedInput in) {
  LineSource& src = *in.src;
  const std::string name = QuotePath(src.name());
  std::string data = std::move(in.head);
  constexpr size_t kStep = size_t{1} << 20;
  while (src.ReadBytes(&data, kStep)) {
    if (data.size() > kMaxSnapshotBytes)
      return Status::Error(name + ": the snapshot is larger than " +
                           std::to_string(kMaxSnapshotBytes >> 30) + " GiB decoded");
  }
  if (!src.status().ok()) return src.status();
  auto doc = pickle::Decode(std::move(data), name);
  if (!doc.ok()) return doc.status();
  SnapshotRead r;
  Builder b(doc.value(), name, r);
  if (Status s = b.Run(); !s.ok()) return s;
  r.info.lines = 0;
  return r;
}

}  // namespace

Expected<SnapshotRead> ReadSnapshotInput(OpenedInput input, const ReadOptions& options) {
  const std::string name = QuotePath(input.src->name());
  if (!options.et_path.empty())
    return Status::Error(name + ": --et goes with a Kineto trace; this is a CUDA memory snapshot");
  return OutOfMemoryIsAnError(name, [&] { return Read(std::move(input)); });
}

Expected<SnapshotRead> ReadSnapshotString(std::string data, const std::string& name) {
  auto opened = OpenMemoryInput(std::move(data), name);
  if (!opened.ok()) return opened.status();
  if (opened.value().format != InputFormat::kSnapshot)
    return Status::Error(QuotePath(name) + ": not a memory snapshot (" +
                         std::string(FormatName(opened.value().format)) + ")");
  return ReadSnapshotInput(std::move(opened.value()));
}

}  // namespace memtl

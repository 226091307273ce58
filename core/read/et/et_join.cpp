// The execution trace joined to a Kineto trace (et_join.h): the ops joined
// by record-function id, storage ids mapped to allocation addresses, and
// the two built into one Trace (et_join_trace.cpp).
#include "core/read/et/et_join.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/model/quote.h"
#include "core/read/et/et_join_impl.h"
#include "core/read/et/et_reader.h"

namespace memtl {

namespace et_join_detail {

void Join::JoinOps(JoinedTrace& out) {
  std::unordered_map<uint64_t, uint32_t> by_rf;
  for (uint32_t i = 0; i < et_.nodes.size(); ++i)
    if (et_.nodes[i].rf != 0) by_rf.emplace(et_.nodes[i].rf, i);
  node_of_op_.assign(t_.ops.size(), kNone32);
  uint64_t mismatched = 0, unjoined = 0;
  std::string mismatch_example, unjoined_example;
  for (uint32_t op = 0; op < t_.ops.size(); ++op) {
    const std::string& name = t_.strings.Get(t_.ops[op].name);
    const uint64_t rf = op < k_.op_rf.size() ? k_.op_rf[op] : 0;
    const auto it = rf != 0 ? by_rf.find(rf) : by_rf.end();
    if (it != by_rf.end() && et_.strings.Get(et_.nodes[it->second].name) == name) {
      node_of_op_[op] = it->second;
      ++out.joined_ops;
      continue;
    }
    if (it != by_rf.end()) {
      if (mismatched++ == 0)
        mismatch_example = Quote(name) + " (record function id " + std::to_string(rf) + ") is " +
                           Quote(et_.strings.Get(et_.nodes[it->second].name));
    } else if (unjoined++ == 0) {
      unjoined_example =
          Quote(name) + (rf == 0 ? " (no \"Record function id\")"
                                 : " (record function id " + std::to_string(rf) + ")");
    }
  }
  out.ops = t_.ops.size();
  if (mismatched > 0)
    out.diagnostics.Add(
        "Kineto op whose record function id names another execution-trace node (not joined)",
        mismatch_example, mismatched);
  if (unjoined > 0)
    out.diagnostics.Add(
        "Kineto op that joins no execution-trace node (no arguments: its tensors are unknown)",
        unjoined_example, unjoined);
}

void Join::FindWrappers() {
  std::unordered_set<uint64_t> wrapped, read;
  auto storages = [&](const EtNode& node, std::unordered_set<uint64_t>& into) {
    read::FindInput(et_, node, [&](uint32_t index, uint32_t) {
      into.insert(et_.tensors[index].storage_id);
      return false;
    });
  };
  for (uint32_t e = 0; e < t_.events.size(); ++e) {
    const Event& ev = t_.events[e];
    if (ev.kind != EventKind::kOp || node_of_op_[ev.payload] == kNone32) continue;
    const EtNode& node = et_.nodes[node_of_op_[ev.payload]];
    if (et_.strings.Get(node.name) != "PythonSubclass") continue;
    wrapped.clear();
    read.clear();
    storages(node, wrapped);
    for (uint32_t d = e + 1; d < end_[e]; ++d) {
      const Event& in = t_.events[d];
      if (in.kind == EventKind::kOp && node_of_op_[in.payload] != kNone32)
        storages(et_.nodes[node_of_op_[in.payload]], read);
    }
    for (const uint64_t storage : wrapped)
      if (storage != 0 && !read.contains(storage)) dataless_.insert(storage);
  }
}

void Join::FindDataless() {
  std::unordered_set<uint64_t> inputs;
  for (const EtNode& node : et_.nodes) {
    inputs.clear();
    auto input = [&](uint32_t index) {
      const EtTensor& tensor = et_.tensors[index];
      if (tensor.storage_id == 0) return;
      inputs.insert(tensor.storage_id);
      if (et_.strings.Get(tensor.device) == "meta") dataless_.insert(tensor.storage_id);
    };
    read::ForEachTensor(
        et_, node, [&](uint32_t index, uint32_t) { input(index); },
        [&](uint32_t index) {
          const EtTensor& tensor = et_.tensors[index];
          if (tensor.storage_id == 0) return;
          // An empty output of a storage none of the inputs
          // has: created with no bytes, at the null data
          // pointer. (An empty view of an input keeps the
          // input's storage.)
          if (et_.strings.Get(tensor.device) == "meta" ||
              (tensor.numel == 0 && !inputs.contains(tensor.storage_id)))
            dataless_.insert(tensor.storage_id);
        });
  }
}

void Join::MapStorages(JoinedTrace& out) {
  const size_t n = t_.events.size();
  std::vector<uint32_t>& end = end_;
  end.resize(n);
  for (uint32_t e = 0; e < n; ++e) end[e] = e + 1;
  for (size_t e = n; e-- > 0;) {
    const uint32_t p = t_.events[e].parent;
    if (p != kNone32) end[p] = std::max(end[p], end[e]);
  }
  FindDataless();
  FindWrappers();
  by_time_.resize(n);
  for (uint32_t e = 0; e < n; ++e) by_time_[e] = e;
  std::stable_sort(by_time_.begin(), by_time_.end(),
                   [&](uint32_t x, uint32_t y) { return t_.event_t0[x] < t_.event_t0[y]; });
  time_pos_.resize(n);
  for (uint32_t p = 0; p < n; ++p) time_pos_[by_time_[p]] = p;
  // Each allocation's free, by event, and each address's lifetimes.
  std::vector<uint32_t> free_of(n, kNone32);
  std::vector<uint32_t> frees_before;  // frees of blocks allocated before the profile
  {
    std::unordered_map<AddrKey, uint32_t, AddrHash> live;
    for (const uint32_t e : by_time_) {
      const Event& ev = t_.events[e];
      if (ev.kind != EventKind::kAlloc) continue;
      const AllocInfo& a = t_.allocs[ev.payload];
      const AddrKey key{t_.alloc_ptrs[ev.payload], a.device};
      std::vector<Lifetime>& lifetimes = lifetimes_[key];
      if (a.bytes > 0) {
        if (live.contains(key)) lifetimes.back().end = time_pos_[e];  // a free is missing
        live[key] = e;
        lifetimes.push_back({time_pos_[e] + 1, static_cast<uint32_t>(n)});
      } else if (const auto it = live.find(key); it != live.end()) {
        free_of[it->second] = e;
        live.erase(it);
        lifetimes.back().end = time_pos_[e];
      } else if (a.bytes < 0 && lifetimes.empty()) {  // allocated before the profile
        lifetimes.push_back({0, time_pos_[e]});
        frees_before.push_back(e);
      }
    }
  }
  // Each storage's reads (a joined op's inputs) and creations (a joined
  // op's output that is none of its inputs), in time order.
  std::unordered_set<uint64_t> inputs;
  for (const uint32_t e : by_time_) {
    const Event& ev = t_.events[e];
    if (ev.kind != EventKind::kOp || node_of_op_[ev.payload] == kNone32) continue;
    const EtNode& node = et_.nodes[node_of_op_[ev.payload]];
    inputs.clear();
    auto note = [&](uint32_t index, bool output) {
      const EtTensor& tensor = et_.tensors[index];
      if (!HasData(tensor)) return;
      if (output && inputs.contains(tensor.storage_id)) return;
      if (!output) inputs.insert(tensor.storage_id);
      std::vector<uint32_t>& at = (output ? creations_ : reads_)[tensor.storage_id];
      if (at.empty() || at.back() != time_pos_[e]) at.push_back(time_pos_[e]);
    };
    read::ForEachTensor(
        et_, node, [&](uint32_t index, uint32_t) { note(index, false); },
        [&](uint32_t index) { note(index, true); });
  }
  // The storage that allocation event `e` holds, by Candidate's rules.
  auto candidate_of = [&](uint32_t e) {
    uint32_t op_event = t_.events[e].parent;
    while (op_event != kNone32 && t_.events[op_event].kind != EventKind::kOp)
      op_event = t_.events[op_event].parent;
    if (op_event == kNone32 || node_of_op_[t_.events[op_event].payload] == kNone32) {
      // Outside any joined op (a python call that the nesting by time
      // put around it): only a tensor read before it is freed, exactly.
      return Candidate(e, kNone32, free_of[e] != kNone32 ? free_of[e] : kNone32, true);
    }
    // Freed inside the op (a workspace, a temporary): only what the ops
    // before its free read can be in it.
    const bool freed_inside = free_of[e] != kNone32 && free_of[e] > e && free_of[e] < end[op_event];
    return Candidate(e, op_event, freed_inside ? free_of[e] : end[op_event], freed_inside);
  };
  std::unordered_map<AddrKey, uint64_t, AddrHash> storage_at;
  std::vector<uint32_t> compiled;  // unmapped, inside a compiled region, in time order
  for (const uint32_t e : by_time_) {
    const Event& ev = t_.events[e];
    if (ev.kind != EventKind::kAlloc) continue;
    const AllocInfo& a = t_.allocs[ev.payload];
    const AddrKey key{t_.alloc_ptrs[ev.payload], a.device};
    if (a.bytes <= 0 || IsPreProfile(e)) continue;  // no tensor's: PreProfile
    ++out.allocations;
    if (const auto held = storage_at.find(key); held != storage_at.end()) {
      // The same data pointer: the same storage id, unless the storage
      // first mapped here only tied with another (both read in the first
      // block) and that other explains this block too (AddressGoesTo).
      // The checks of the held storage alone come first: they rule out
      // nearly every reused block without a scan for its candidate.
      ++out.mapped_allocations;
      const std::vector<Lifetime>& lifetimes = lifetimes_.at(key);
      if (!MayGiveUp(held->second, e, lifetimes)) continue;
      if (const uint64_t other = candidate_of(e);
          other != 0 && other != held->second && AddressGoesTo(other, held->second, lifetimes)) {
        addr_of_.erase(held->second);
        addr_of_.emplace(other, key.addr);
        held->second = other;
      }
      continue;
    }
    const uint64_t storage = candidate_of(e);
    if (storage == 0) {
      if (InCompiledRegion(e)) compiled.push_back(e);
      continue;
    }
    addr_of_.emplace(storage, key.addr);
    storage_at.emplace(key, storage);
    ++out.mapped_allocations;
  }
  out.mapped_allocations += MapCompiled(compiled, free_of);
  MapFreedBefore(frees_before);
  for (const EtTensor& tensor : et_.tensors)
    if (HasData(tensor)) nonempty_.insert(tensor.storage_id);
}

void Join::PreProfile(JoinedTrace& out) {
  std::unordered_map<uint64_t, int64_t> bytes;  // by storage id
  std::unordered_map<uint64_t, uint32_t> device;
  for (uint32_t op = 0; op < t_.ops.size(); ++op) {
    if (node_of_op_[op] == kNone32) continue;
    const EtNode& node = et_.nodes[node_of_op_[op]];
    auto observe = [&](uint32_t index) {
      const EtTensor& tensor = et_.tensors[index];
      if (!PreExisting(tensor)) return;
      const int64_t* dims = et_.dims.data() + tensor.dims_begin;
      const int64_t size =
          SizeOfObservation(dims, tensor.num_sizes, dims + tensor.num_sizes, tensor.num_strides,
                            ElementSize(DtypeOfItemsize(tensor.itemsize)));
      int64_t& b = bytes[tensor.storage_id];
      b = std::max(b, size);
      device.emplace(tensor.storage_id, tensor.device);
    };
    read::FindInput(et_, node, [&](uint32_t index, uint32_t) {
      observe(index);
      return false;
    });
  }
  std::vector<int64_t> in_tensors(t_.devices.size(), 0);
  for (const auto& [storage, b] : bytes) {
    const std::string& name = et_.strings.Get(device.at(storage));
    for (size_t d = 0; d < t_.devices.size(); ++d)
      // Clamped: compared only with an allocation's bytes (at most
      // kMaxAllocBytes), and b is at most kMaxTensorBytes, so no sum wraps.
      if (t_.devices[d].name == (name.empty() ? "cpu" : name))
        in_tensors[d] = std::min(in_tensors[d] + b, kMaxAllocBytes);
  }
  for (uint32_t e = 0; e < t_.events.size(); ++e) {
    if (!IsPreProfile(e)) continue;
    const AllocInfo& a = t_.allocs[t_.events[e].payload];
    const int64_t rest = std::max<int64_t>(a.bytes - in_tensors[a.device], 0);
    pre_profile_bytes_.emplace(e, rest);
    out.pre_profile_in_tensors += a.bytes - rest;
  }
}

uint64_t Join::Candidate(uint32_t e, uint32_t op, uint32_t end, bool freed_inside) const {
  static constexpr uint32_t kScan = 1024;
  const AllocInfo& a = t_.allocs[t_.events[e].payload];
  const std::string& device = t_.devices[a.device].name;
  const std::vector<Lifetime>& lifetimes =
      lifetimes_.at(AddrKey{t_.alloc_ptrs[t_.events[e].payload], a.device});
  uint64_t fits = 0;  // the first fitting storage of the scan, then of the outputs
  auto consider = [&](uint32_t index) {
    const EtTensor& tensor = et_.tensors[index];
    if (!HasData(tensor) || addr_of_.contains(tensor.storage_id)) return false;
    if (et_.strings.Get(tensor.device) != device) return false;
    const int64_t need = tensor.extent;
    if (need > a.bytes || (need < a.bytes && fits != 0)) return false;
    // A block larger than the tensor is its storage only if an op of the
    // profile creates that storage (an output resized smaller, a size the
    // allocator rounds up). A storage that ops only read was allocated
    // before the profile, or outside any op: what it shares with a larger
    // block is its bytes alone, and a block that no tensor owns (the
    // random-number-generator state torch.utils.checkpoint saves) would
    // take it, and it would lose its own, pre-existing row.
    if (need < a.bytes && !creations_.contains(tensor.storage_id)) return false;
    if (!FitsLifetimes(tensor.storage_id, lifetimes)) return false;
    if (need == a.bytes) return true;
    fits = tensor.storage_id;
    return false;
  };
  // Scans the joined ops among events `from`: in op's subtree by index,
  // or by time up to `end`.
  const size_t n = t_.events.size();
  const uint32_t first = op != kNone32 ? e + 1 : time_pos_[e] + 1;
  const uint32_t last =
      op != kNone32 ? end : (end != kNone32 ? time_pos_[end] : static_cast<uint32_t>(n));
  const uint32_t scan_end = std::min(last, first + kScan - 1);
  for (uint32_t p = first; p < scan_end; ++p) {
    const Event& ev = t_.events[op != kNone32 ? p : by_time_[p]];
    if (ev.kind != EventKind::kOp || node_of_op_[ev.payload] == kNone32) continue;
    const EtNode& node = et_.nodes[node_of_op_[ev.payload]];
    if (const uint32_t found =
            read::FindInput(et_, node, [&](uint32_t index, uint32_t) { return consider(index); });
        found != kNone32)
      return et_.tensors[found].storage_id;
  }
  if (op == kNone32) return 0;
  if (!freed_inside) {
    // An op allocates its outputs in their order (structured kernels'
    // set_output), so an output that fits comes before a later read
    // that fits (on CUDA, where blocks are rounded up to 512 bytes,
    // every small tensor fits).
    const uint64_t fits_scan = fits;
    fits = 0;
    const EtNode& node = et_.nodes[node_of_op_[t_.events[op].payload]];
    for (uint32_t i = node.outs_begin; i < node.outs_begin + node.outs_count; ++i)
      if (consider(et_.items[i])) return et_.tensors[et_.items[i]].storage_id;
    if (fits == 0) fits = fits_scan;
  }
  return fits;
}

bool Join::MayGiveUp(uint64_t held, uint32_t e, const std::vector<Lifetime>& lifetimes) const {
  // A storage an op creates was mapped for that, not by a tie of reads.
  if (creations_.contains(held)) return false;
  const auto reads = reads_.find(held);
  if (reads == reads_.end()) return false;
  // `e`'s block begins at the position after it (and is empty when freed
  // at once: then nothing is read in it).
  const size_t block = LifetimeAt(time_pos_[e] + 1, lifetimes);
  if (block == lifetimes.size()) return true;
  const auto first =
      std::lower_bound(reads->second.begin(), reads->second.end(), lifetimes[block].begin);
  return first == reads->second.end() || *first >= lifetimes[block].end;
}

std::vector<size_t> Join::LifetimesRead(uint64_t storage,
                                        const std::vector<Lifetime>& lifetimes) const {
  std::vector<size_t> read;
  const auto reads = reads_.find(storage);
  if (reads == reads_.end()) return read;
  for (const uint32_t p : reads->second) {
    const size_t index = LifetimeAt(p, lifetimes);
    if (index != lifetimes.size() && (read.empty() || read.back() != index)) read.push_back(index);
  }
  return read;
}

bool Join::AddressGoesTo(uint64_t other, uint64_t held,
                         const std::vector<Lifetime>& lifetimes) const {
  const std::vector<size_t> by_other = LifetimesRead(other, lifetimes);
  const std::vector<size_t> by_held = LifetimesRead(held, lifetimes);
  return !by_held.empty() && by_other.size() > by_held.size() &&
         std::includes(by_other.begin(), by_other.end(), by_held.begin(), by_held.end());
}

size_t Join::LifetimeAt(uint32_t p, const std::vector<Lifetime>& lifetimes) {
  const auto l = std::upper_bound(lifetimes.begin(), lifetimes.end(), p,
                                  [](uint32_t x, const Lifetime& y) { return x < y.begin; });
  if (l == lifetimes.begin() || p >= std::prev(l)->end) return lifetimes.size();
  return static_cast<size_t>(std::prev(l) - lifetimes.begin());
}

bool Join::FitsLifetimes(uint64_t storage, const std::vector<Lifetime>& lifetimes) const {
  const auto reads = reads_.find(storage);
  if (reads != reads_.end() && Inside(reads->second, lifetimes) != reads->second.size())
    return false;
  const auto creations = creations_.find(storage);
  return creations == creations_.end() || Inside(creations->second, lifetimes) == 0;
}

size_t Join::Inside(const std::vector<uint32_t>& at, const std::vector<Lifetime>& lifetimes) {
  size_t inside = 0;
  if (at.size() <= lifetimes.size()) {
    for (const uint32_t p : at) inside += LifetimeAt(p, lifetimes) != lifetimes.size() ? 1 : 0;
    return inside;
  }
  for (const Lifetime& l : lifetimes)
    inside += static_cast<size_t>(std::lower_bound(at.begin(), at.end(), l.end) -
                                  std::lower_bound(at.begin(), at.end(), l.begin));
  return inside;
}

}  // namespace et_join_detail

namespace {

using et_join_detail::Join;
using read::ExecutionTrace;

std::string Percent(uint64_t part, uint64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", whole == 0 ? 100.0 : 100.0 * part / whole);
  return buf;
}

}  // namespace

Expected<JoinedTrace> BuildJoinedTrace(const KinetoRead& kineto, const ExecutionTrace& et,
                                       const std::string& et_name, bool keep_shapes) {
  JoinedTrace out;
  Join join(kineto, et);
  join.JoinOps(out);
  if (out.joined_ops == 0) {
    return Status::Error(
        QuotePath(et_name) + ": the execution trace joins none of the Kineto trace's " +
        std::to_string(out.ops) +
        " ops (no node has their record function id and name): are both of one run? Record "
        "them together: torch.profiler.profile(..., execution_trace_observer="
        "ExecutionTraceObserver().register_callback(\"et.json\")) and "
        "prof.export_chrome_trace(\"trace.json\")");
  }
  join.MapStorages(out);
  join.PreProfile(out);
  join.TracerRecords();
  if (Status built = join.Build(out, keep_shapes); !built.ok()) return built;
  out.note = "execution trace " + QuotePath(et_name) + ": joined " +
             std::to_string(out.joined_ops) + " of " + std::to_string(out.ops) + " ops (" +
             Percent(out.joined_ops, out.ops) + ") by record function id; " +
             std::to_string(out.mapped_allocations) + " of " + std::to_string(out.allocations) +
             " allocations (" + Percent(out.mapped_allocations, out.allocations) +
             ") are a tensor's storage";
  if (out.pre_profile_in_tensors > 0) {
    out.note += "; " + std::to_string(out.pre_profile_in_tensors) +
                " bytes allocated before the profile are its tensors";
  }
  return out;
}

Expected<KinetoRead> JoinExecutionTrace(KinetoRead kineto, const ReadOptions& options) {
  ReadOptions et_options = options;
  et_options.et_path.clear();
  auto et = read::ReadExecutionTrace(options.et_path, et_options);
  if (!et.ok()) return et.status();
  auto joined = BuildJoinedTrace(kineto, et.value(), options.et_path, options.keep_shapes);
  if (!joined.ok()) return joined.status();
  KinetoRead r;
  r.trace = std::move(joined.value().trace);
  r.diagnostics = std::move(kineto.diagnostics);
  r.diagnostics.Merge(joined.value().diagnostics);
  r.info = kineto.info;
  r.info.note = joined.value().note;
  return r;
}

namespace {

Expected<KinetoRead> JoinGuarded(Expected<KinetoRead> kineto, const std::string& name,
                                 const ReadOptions& options) {
  if (!kineto.ok()) return kineto;
  return OutOfMemoryIsAnError(
      name, [&] { return JoinExecutionTrace(std::move(kineto.value()), options); });
}

}  // namespace

Expected<KinetoRead> ReadKinetoJoinedInput(OpenedInput input, const ReadOptions& options) {
  const std::string name = QuotePath(input.src->name());
  return JoinGuarded(ReadKinetoInput(std::move(input), options), name, options);
}

Expected<KinetoRead> ReadKinetoJoinedString(std::string data, const std::string& name,
                                            const ReadOptions& options) {
  return JoinGuarded(ReadKinetoString(std::move(data), name, options), QuotePath(name), options);
}

}  // namespace memtl

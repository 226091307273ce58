// Memory tables by op, by module and by call site (tables.h). One pre-order
// walk of the event tree gives every allocation event its place: a node of
// a trie of the ops, module calls and user frames around it, shared by
// every allocation made in the same surroundings (a trace repeats a few
// thousand of them), so the walk keeps a number per allocation, not a path. Untracked allocations
// are counted there; tensors through the timeline, which also replays the live bytes up to each
// device's peak row. The rows come from the places last.
#include "core/explain/tables.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <utility>

#include "core/explain/names.h"
#include "core/explain/peak.h"
#include "core/explain/places.h"

namespace memtl {

using tables_detail::PlaceLabels;
using tables_detail::Places;

namespace {

constexpr std::string_view kModulePrefix = "nn.Module: ";

// What the walks accumulate for one device.
struct DeviceUse {
  std::vector<MemoryUse> by_place;
  // Bytes alive at the peak with no allocation in the window, by the place
  // of the module call whose parameter they are (kNone32: none).
  std::map<uint32_t, int64_t> before_profile;
  int64_t no_identity = 0;  // untracked bytes alive at the peak
  // The model's state alive at the peak, by the module that owns it
  // (indexes into Owners::modules): the module table counts it there,
  // not where it was made. `moved` is what leaves each place's module row
  // for it; `owned_before` is what of it comes from before the profile.
  std::map<uint32_t, int64_t> owned, owned_before;
  std::map<uint32_t, int64_t> moved;

  MemoryUse& At(uint32_t place, size_t num_places) {
    if (by_place.size() <= place) by_place.resize(std::max<size_t>(num_places, place + 1));
    return by_place[place];
  }
};

MemoryUse Negated(const MemoryUse& u) { return {-u.allocated, -u.freed, -u.count, -u.at_peak}; }

// The row `name` of `rows`, added empty when missing.
MemoryRow& RowOf(std::map<std::string, MemoryRow, std::less<>>& rows, std::string_view name) {
  auto it = rows.find(name);
  if (it == rows.end()) {
    MemoryRow row;
    row.name = name;
    it = rows.emplace(std::string(name), std::move(row)).first;
  }
  return it->second;
}

// Adds `u` to the row `name` of `rows`, to its self part when `self`.
void AddTo(std::map<std::string, MemoryRow, std::less<>>& rows, std::string_view name,
           const MemoryUse& u, bool self) {
  MemoryRow& row = RowOf(rows, name);
  row.total += u;
  if (self) row.self += u;
}

// Adds `u` to the self part of the row `name` of `rows`, and to its total
// when `total` (the totals of names inside ops and call sites come from
// PlaceLabels' changes).
void AddSelf(std::map<std::string, MemoryRow, std::less<>>& rows, std::string_view name,
             const MemoryUse& u, bool total) {
  MemoryRow& row = RowOf(rows, name);
  row.self += u;
  if (total) row.total += u;
}

std::vector<MemoryRow> Sorted(std::map<std::string, MemoryRow, std::less<>>& rows) {
  std::vector<MemoryRow> out;
  out.reserve(rows.size());
  for (auto& [name, row] : rows) out.push_back(std::move(row));
  std::stable_sort(out.begin(), out.end(), [](const MemoryRow& a, const MemoryRow& b) {
    if (a.total.at_peak != b.total.at_peak) return a.total.at_peak > b.total.at_peak;
    return a.total.allocated > b.total.allocated;
  });
  return out;
}

// Every prefix of a module path ("A", "A > B", "A > B > C"), outermost first.
std::vector<std::string_view> Prefixes(std::string_view path) {
  std::vector<std::string_view> out;
  constexpr std::string_view kSep = " > ";
  for (size_t at = path.find(kSep); at != std::string_view::npos; at = path.find(kSep, at + 1))
    out.push_back(path.substr(0, at));
  out.push_back(path);
  return out;
}

// Adds `u` to module path `path` (self) and every path around it (total);
// to the row `none` when the path is empty.
void AddToModule(std::map<std::string, MemoryRow, std::less<>>& rows, const std::string& path,
                 const MemoryUse& u, std::string_view none) {
  if (path.empty()) {
    AddTo(rows, none, u, true);
    return;
  }
  const std::vector<std::string_view> prefixes = Prefixes(path);
  for (size_t i = 0; i < prefixes.size(); ++i)
    AddTo(rows, prefixes[i], u, i + 1 == prefixes.size());
}

// Per key, the module that owns it as a model's parameter, gradient or
// state (names.h), as an index into `modules`; kNone32: none.
struct Owners {
  PerKey<uint32_t> of_key;
  std::vector<std::string> modules;
};

Owners OwnersOf(const ExplainInput& in) {
  Owners owners{PerKey<uint32_t>(in.keys.size(), kNone32), {}};
  if (in.inferred != nullptr) return owners;
  std::map<std::string, uint32_t, std::less<>> ids;
  for (auto& [key, name] : NameModelState(in, nullptr)) {
    if (name.module.empty()) continue;
    const auto [it, added] =
        ids.try_emplace(name.module, static_cast<uint32_t>(owners.modules.size()));
    if (added) owners.modules.push_back(name.module);
    owners.of_key[KeySlot(key)] = it->second;
  }
  return owners;
}

// Where each tensor was allocated and freed, and where each parameter's
// module was called, as places of the op tree's walk.
struct PlaceWalk {
  Places places;
  PerKey<uint32_t> alloc_place, free_place, param_place;
  // A trace without tensors: per allocation record, its place, so that the
  // inference's pairing can put what is alive at the peak there.
  std::vector<uint32_t> place_of_alloc;
};

// The walk: a stack of the events around the current one, each with its
// place once an allocation below it asked (most ops allocate nothing).
// Untracked allocations are counted into `use` where they happen.
PlaceWalk WalkPlaces(const ExplainInput& in, std::vector<DeviceUse>& use) {
  const Trace& trace = in.trace;
  const uint32_t num_keys = in.keys.size();
  PlaceWalk w{{},
              PerKey<uint32_t>(num_keys, kNone32),
              PerKey<uint32_t>(num_keys, kNone32),
              PerKey<uint32_t>(num_keys, kNone32),
              std::vector<uint32_t>(in.inferred != nullptr ? trace.allocs.size() : 0, kNone32)};
  Places& places = w.places;
  struct Frame {
    uint32_t event;
    uint32_t place;  // kNone32 until resolved
  };
  std::vector<Frame> stack;
  // Per string id of a python call: 0 not yet known, 1 a module call, 2 a
  // user frame, 3 neither (each name is tested once).
  std::vector<uint8_t> py_kind(trace.strings.size(), 0);
  auto kind_of = [&](uint32_t name) {
    uint8_t& kind = py_kind[name];
    if (kind == 0) {
      const std::string& s = trace.strings.Get(name);
      kind = s.starts_with(kModulePrefix) ? 1 : IsUserFrame(s) ? 2 : 3;
    }
    return kind;
  };
  // `parent_event` is the event around `event` (kNone32: a root).
  auto label = [&](uint32_t event, uint32_t parent, uint32_t parent_event) {
    const Event& ev = trace.events[event];
    if (ev.kind == EventKind::kOp)
      return places.Child(parent, trace.ops[ev.payload].name, Places::Kind::kOp, event);
    if (ev.kind == EventKind::kPy) {
      // A call a user frame made, at a line the trace gives: that line first.
      const uint32_t line = trace.PyLine(ev.payload);
      if (line != 0 && parent_event != kNone32 &&
          trace.events[parent_event].kind == EventKind::kPy &&
          kind_of(trace.py_names[trace.events[parent_event].payload]) == 2)
        parent = places.Child(parent, line, Places::Kind::kLine, event);
      const uint32_t name = trace.py_names[ev.payload];
      const uint8_t kind = kind_of(name);
      if (kind == 1) return places.Child(parent, name, Places::Kind::kModule, event);
      if (kind == 2) return places.Child(parent, name, Places::Kind::kCallSite, event);
    }
    return parent;
  };
  auto place_of_top = [&] {
    size_t i = stack.size();
    while (i > 0 && stack[i - 1].place == kNone32) --i;
    uint32_t p = i == 0 ? 0 : stack[i - 1].place;
    for (; i < stack.size(); ++i)
      stack[i].place = p = label(stack[i].event, p, i == 0 ? kNone32 : stack[i - 1].event);
    return p;
  };
  for (const uint32_t e : in.tree.preorder()) {
    const Event& ev = trace.events[e];
    while (!stack.empty() && stack.back().event != ev.parent) stack.pop_back();
    if (ev.kind != EventKind::kAlloc) {
      stack.push_back({e, kNone32});
      if (ev.kind != EventKind::kPy) continue;
      // A module call's parameters belong to it (the first call that
      // reports them, as identity counts them).
      const uint32_t module = trace.Py(ev.payload).module();
      if (module == kNone32) continue;
      const uint32_t place = place_of_top();
      const ModuleInfo& m = trace.modules[module];
      for (uint32_t p = m.params_begin; p < m.params_begin + m.params_count; ++p) {
        const KeySlot key = in.keys.SlotOfTensor(trace.params[p].tensor);
        if (key.valid() && w.param_place[key] == kNone32) w.param_place[key] = place;
      }
      continue;
    }
    const AllocInfo& a = trace.allocs[ev.payload];
    const uint32_t place = place_of_top();
    if (const KeySlot key = in.keys.SlotOfAlloc(ev.payload); key.valid()) {
      (a.bytes > 0 ? w.alloc_place : w.free_place)[key] = place;
      continue;
    }
    if (!w.place_of_alloc.empty()) w.place_of_alloc[ev.payload] = place;
    // As the timeline counts untracked allocations (BuildTimeline): more
    // than 0 bytes allocates (a re-allocation of a live address too).
    MemoryUse& u = use[a.device].At(place, places.size());
    if (a.bytes > 0) {
      u.allocated += a.bytes;
      ++u.count;
    } else {
      u.freed -= a.bytes;
    }
  }
  return w;
}

// The timeline: tensors' allocations and frees, and the bytes alive up to
// the end of each device's peak row (the rows the exports write).
void CountTimeline(const ExplainInput& in, const PlaceWalk& w, const Owners& owners,
                   const std::vector<PeakReport>& peaks, std::vector<DeviceUse>& use) {
  const size_t num_places = w.places.size();
  struct Rows {
    size_t row = 0;
    int64_t last = 0;
    bool started = false;
  };
  std::vector<Rows> rows(use.size());
  for (const TimelineEvent& e : in.timeline) {
    Rows& r = rows[e.device];
    const int64_t t = MicrosOf(e);
    if (r.started && t != r.last) ++r.row;
    r.started = true;
    r.last = t;
    DeviceUse& u = use[e.device];
    const bool to_peak = peaks[e.device].any && r.row <= peaks[e.device].row;
    const int64_t sign = e.action == Action::kDestroy ? -1 : 1;
    if (!e.has_key()) {
      if (to_peak && e.action != Action::kIncrementVersion) u.no_identity += sign * e.bytes;
      continue;
    }
    // A tensor allocated in the window is counted where it was allocated;
    // one from before it as a parameter of its module or from before the
    // profile.
    const uint32_t made = w.alloc_place[e.key()];
    switch (e.action) {
      case Action::kCreate: {
        MemoryUse& m = u.At(made == kNone32 ? 0 : made, num_places);
        m.allocated += e.bytes;
        ++m.count;
        break;
      }
      case Action::kDestroy: {
        const uint32_t freed = w.free_place[e.key()];
        u.At(freed == kNone32 ? 0 : freed, num_places).freed += e.bytes;
        break;
      }
      case Action::kPreexisting:
      case Action::kIncrementVersion:
        break;
    }
    if (!to_peak || e.action == Action::kIncrementVersion) continue;
    const uint32_t owned_by = owners.of_key[e.key()];
    if (made != kNone32) {
      u.At(made, num_places).at_peak += sign * e.bytes;
      if (owned_by != kNone32) {
        u.owned[owned_by] += sign * e.bytes;
        u.moved[made] += sign * e.bytes;
      }
    } else if (owned_by != kNone32) {
      u.owned[owned_by] += sign * e.bytes;
      u.owned_before[owned_by] += sign * e.bytes;
    } else {
      u.before_profile[w.param_place[e.key()]] += sign * e.bytes;
    }
  }
}

// A trace without tensors: the untracked bytes alive at the peak go to the
// places that allocated them, as the inference pairs allocations with
// frees; memory from before the profile to "(before the profile)". Only
// where the pairing accounts for the timeline's own untracked bytes at
// the peak exactly: otherwise they stay "(no tensor identity)".
void PlaceInferredAtPeak(const ExplainInput& in, const PlaceWalk& w,
                         const std::vector<PeakReport>& peaks, std::vector<DeviceUse>& use) {
  const Trace& trace = in.trace;
  for (size_t d = 0; d < use.size(); ++d) {
    if (!peaks[d].any) continue;
    const std::vector<uint32_t> alive =
        AllocationsAliveAt(trace, *in.inferred, static_cast<DeviceIndex>(d), peaks[d].time_us);
    int64_t sum = 0;
    for (const uint32_t a : alive) sum += std::abs(int64_t{trace.allocs[a].bytes});
    DeviceUse& u = use[d];
    if (sum != u.no_identity) continue;
    for (const uint32_t a : alive) {
      const AllocInfo& info = trace.allocs[a];
      const bool before = info.bytes < 0 || in.inferred->rule[a] == InferRule::kBeforeProfile;
      if (before)
        u.before_profile[kNone32] += std::abs(int64_t{info.bytes});
      else
        u.At(w.place_of_alloc[a], w.places.size()).at_peak += info.bytes;
    }
    u.no_identity = 0;
  }
}

// One device's tables from its bytes by place. `below` is scratch: per
// place, its bytes and those of the places under it.
MemoryTables TablesOf(const Trace& trace, const Places& places, const PlaceLabels& labels,
                      const DeviceUse& u, const std::vector<std::string>& owners,
                      std::vector<MemoryUse>& below) {
  MemoryTables t;
  std::map<std::string, MemoryRow, std::less<>> by_op, by_module, by_site;
  // Totals: a name counts the places under each place where it enters the
  // names around them, less those under a place where it leaves.
  below.assign(u.by_place.begin(), u.by_place.end());
  for (size_t p = below.size(); p-- > 1;)
    below[places[static_cast<uint32_t>(p)].parent] += below[p];
  for (const PlaceLabels::Change& c : labels.changes) {
    if (c.place >= below.size() || below[c.place] == MemoryUse{}) continue;
    MemoryUse m = below[c.place];
    if (c.leaves) m = Negated(m);
    if (c.label.op) {
      AddTo(by_op, trace.strings.Get(c.label.name), m, false);
    } else {
      AddTo(by_site,
            CallSiteLabel(trace.strings.Get(c.label.name), c.label.line,
                          trace.header.py_names_at_line),
            m, false);
    }
  }
  for (uint32_t p = 0; p < u.by_place.size(); ++p) {
    const MemoryUse& m = u.by_place[p];
    if (m == MemoryUse{}) continue;
    t.device += m;
    const uint32_t op = labels.innermost_op[p];
    AddSelf(by_op, op == kNone32 ? kOutsideOps : trace.strings.Get(op), m, op == kNone32);
    const PlaceLabels::Label& site = labels.innermost_site[p];
    if (site.name == kNone32)
      AddTo(by_site, kNoCallSite, m, true);
    else
      AddSelf(by_site,
              CallSiteLabel(trace.strings.Get(site.name), site.line, trace.header.py_names_at_line),
              m, false);
    // The model's state made here counts under its module instead.
    MemoryUse in_module = m;
    if (const auto it = u.moved.find(p); it != u.moved.end()) in_module.at_peak -= it->second;
    AddToModule(by_module, labels.ModulePathOf(p), in_module, kOutsideModules);
  }
  for (const auto& [id, bytes] : u.owned) {
    if (bytes == 0) continue;
    MemoryUse m;
    m.at_peak = bytes;
    AddToModule(by_module, owners[id], m, kOutsideModules);
  }
  // Bytes from before the profile: one row in the op and call-site tables.
  auto before_profile = [&](int64_t bytes) {
    MemoryUse m;
    m.at_peak = bytes;
    t.device += m;
    AddTo(by_op, kBeforeProfile, m, true);
    AddTo(by_site, kBeforeProfile, m, true);
    return m;
  };
  for (const auto& [id, bytes] : u.owned_before) {
    if (bytes != 0) before_profile(bytes);  // the module row: with `owned`
  }
  for (const auto& [place, bytes] : u.before_profile) {
    if (bytes == 0) continue;
    AddToModule(by_module, place == kNone32 ? std::string() : labels.ModulePathOf(place),
                before_profile(bytes), kBeforeProfile);
  }
  if (u.no_identity != 0) {
    MemoryUse m;
    m.at_peak = u.no_identity;
    t.device += m;
    AddTo(by_op, kNoIdentity, m, true);
    AddTo(by_module, kNoIdentity, m, true);
    AddTo(by_site, kNoIdentity, m, true);
  }
  t.by_op = Sorted(by_op);
  t.by_module = Sorted(by_module);
  t.by_call_site = Sorted(by_site);
  return t;
}

}  // namespace

std::vector<MemoryTables> ComputeTables(const ExplainInput& in) {
  const size_t num_devices = in.trace.devices.size();
  std::vector<DeviceUse> use(num_devices);
  const Owners owners = OwnersOf(in);
  const PlaceWalk walk = WalkPlaces(in, use);
  std::vector<PeakReport> peaks(num_devices);
  for (size_t d = 0; d < num_devices; ++d)
    peaks[d] = FindPeak(in.timeline, in.categories, static_cast<DeviceIndex>(d));
  CountTimeline(in, walk, owners, peaks, use);
  if (in.inferred != nullptr) PlaceInferredAtPeak(in, walk, peaks, use);
  const PlaceLabels labels = LabelPlaces(in.trace, walk.places);
  std::vector<MemoryTables> tables(num_devices);
  std::vector<MemoryUse> below;
  for (size_t d = 0; d < num_devices; ++d)
    tables[d] = TablesOf(in.trace, walk.places, labels, use[d], owners.modules, below);
  return tables;
}

bool HasCallSites(const std::vector<MemoryRow>& rows) {
  for (const MemoryRow& r : rows) {
    if (r.name != kNoCallSite && r.name != kBeforeProfile && r.name != kNoIdentity) return true;
  }
  return false;
}

std::string FormatTables(const MemoryTables& t, size_t top) {
  std::string out;
  char buf[512];
  auto table = [&](const char* title, const std::vector<MemoryRow>& rows) {
    std::snprintf(buf, sizeof buf, "%s\n  %12s %12s %8s %12s  %12s %12s %8s %12s  %s\n", title,
                  "allocated", "freed", "count", "at peak", "self alloc", "self freed", "self n",
                  "self peak", "name");
    out += buf;
    for (size_t i = 0; i < rows.size() && i < top; ++i) {
      const MemoryRow& r = rows[i];
      std::snprintf(buf, sizeof buf, "  %12s %12s %8lld %12s  %12s %12s %8lld %12s  %s\n",
                    HumanBytes(r.total.allocated).c_str(), HumanBytes(r.total.freed).c_str(),
                    static_cast<long long>(r.total.count), HumanBytes(r.total.at_peak).c_str(),
                    HumanBytes(r.self.allocated).c_str(), HumanBytes(r.self.freed).c_str(),
                    static_cast<long long>(r.self.count), HumanBytes(r.self.at_peak).c_str(),
                    TextCell(r.name).c_str());
      out += buf;
    }
  };
  table("by op (total, then self):", t.by_op);
  out += "\n";
  table("by module (total, then self):", t.by_module);
  if (HasCallSites(t.by_call_site)) {
    out += "\n";
    table("by call site (total, then self):", t.by_call_site);
  }
  return out;
}

}  // namespace memtl

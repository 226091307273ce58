// The names around each place of the memory tables (places.h).
#include "core/explain/places.h"

#include <unordered_map>

#include "core/explain/context.h"

namespace memtl::tables_detail {

PlaceLabels LabelPlaces(const Trace& trace, const Places& places) {
  const size_t n = places.size();
  PlaceLabels out;
  out.innermost_op.assign(n, kNone32);
  out.innermost_site.assign(n, PlaceLabels::Label{});
  out.module_place.assign(n, 0);
  out.module_paths.resize(n);
  // Children in CSR form (a place's id is above its parent's), for a
  // depth-first walk that keeps the set of names around the current place.
  std::vector<uint32_t> first(n + 1, 0), kids(n > 0 ? n - 1 : 0);
  for (uint32_t p = 1; p < n; ++p) ++first[places[p].parent + 1];
  for (size_t p = 0; p < n; ++p) first[p + 1] += first[p];
  {
    std::vector<uint32_t> fill(first.begin(), first.end() - 1);
    for (uint32_t p = 1; p < n; ++p) kids[fill[places[p].parent]++] = p;
  }
  std::vector<uint8_t> op_around(trace.strings.size(), 0);
  std::unordered_map<uint64_t, uint8_t> site_around;
  auto key = [](const PlaceLabels::Label& l) { return (uint64_t{l.line} << 32) | l.name; };
  struct Visit {
    uint32_t place;
    uint32_t next_kid;
    size_t changes_begin, changes_end;  // the place's own changes
  };
  std::vector<Visit> stack{{0, first[0], 0, 0}};
  while (!stack.empty()) {
    Visit& v = stack.back();
    if (v.next_kid == first[v.place + 1]) {
      // Leaving: what this place changed is undone, newest first.
      for (size_t i = v.changes_end; i-- > v.changes_begin;) {
        const PlaceLabels::Change& c = out.changes[i];
        if (c.label.op)
          op_around[c.label.name] = c.leaves ? 1 : 0;
        else
          site_around[key(c.label)] = c.leaves ? 1 : 0;
      }
      stack.pop_back();
      continue;
    }
    const uint32_t p = kids[v.next_kid++];
    const Places::Place& place = places[p];
    out.innermost_op[p] = out.innermost_op[place.parent];
    out.innermost_site[p] = out.innermost_site[place.parent];
    out.module_place[p] = out.module_place[place.parent];
    const size_t begin = out.changes.size();
    auto enter_site = [&](const PlaceLabels::Label& l) {
      uint8_t& around = site_around[key(l)];
      if (around == 0) out.changes.push_back({p, l, false});
      around = 1;
    };
    switch (place.kind) {
      case Places::Kind::kOp:
        out.innermost_op[p] = place.name;
        if (op_around[place.name] == 0) out.changes.push_back({p, {place.name, 0, true}, false});
        op_around[place.name] = 1;
        break;
      case Places::Kind::kCallSite:
        out.innermost_site[p] = {place.name, 0, false};
        enter_site(out.innermost_site[p]);
        break;
      case Places::Kind::kLine: {
        // The innermost frame, at the line that made the call below it.
        const PlaceLabels::Label was = out.innermost_site[p];
        if (was.name == kNone32) break;
        const PlaceLabels::Label now{was.name, place.name, false};
        if (now == was) break;
        site_around[key(was)] = 0;
        out.changes.push_back({p, was, true});
        out.innermost_site[p] = now;
        enter_site(now);
        break;
      }
      case Places::Kind::kModule:
        out.module_place[p] = p;
        out.module_paths[p] = ModulePath(trace, place.event);
        break;
    }
    stack.push_back({p, first[p], begin, out.changes.size()});
  }
  return out;
}

}  // namespace memtl::tables_detail

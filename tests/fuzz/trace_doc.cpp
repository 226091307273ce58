// A trace's records and tree shape for fuzz_structured's mutator
// (trace_doc.h).
#include "tests/fuzz/trace_doc.h"

#include <algorithm>
#include <map>

namespace memtl_fuzz {

void Collect(Json* j, std::vector<Json*>* out) {
  out->push_back(j);
  for (auto& i : j->items) Collect(&i, out);
  for (auto& [k, v] : j->members) Collect(&v, out);
}

std::vector<size_t> Records(const Doc& d) {
  std::vector<size_t> r;
  for (size_t i = 1; i < d.lines.size(); ++i) {
    if (d.lines[i].parsed && d.lines[i].v.kind == Json::kObject) r.push_back(i);
  }
  return r;
}

std::vector<Json*> AllValues(Doc& d, Json::Kind kind) {
  std::vector<Json*> all, out;
  for (auto& l : d.lines) {
    if (l.parsed) Collect(&l.v, &all);
  }
  for (Json* j : all) {
    if (j->kind == kind) out.push_back(j);
  }
  return out;
}

std::vector<Json*> ValuesOfKey(Doc& d, std::string_view key) {
  std::vector<Json*> objs = AllValues(d, Json::kObject), out;
  for (Json* o : objs) {
    if (Json* v = o->Find(key)) out.push_back(v);
  }
  return out;
}

size_t SubtreeEnd(Doc& d, size_t line) {
  const Json* i = d.lines[line].v.Find("i");
  if (i == nullptr || !i->Int()) return line + 1;
  std::vector<int64_t> ids = {*i->Int()};
  size_t end = line + 1;
  for (; end < d.lines.size(); ++end) {
    if (!d.lines[end].parsed) break;
    const Json* p = d.lines[end].v.Find("p");
    const Json* ci = d.lines[end].v.Find("i");
    if (p == nullptr || !p->Int() || std::find(ids.begin(), ids.end(), *p->Int()) == ids.end())
      break;
    if (ci && ci->Int()) ids.push_back(*ci->Int());
  }
  return end;
}

int64_t MaxId(Doc& d) {
  int64_t m = -1;
  for (Json* i : ValuesOfKey(d, "i")) {
    if (i->Int()) m = std::max(m, *i->Int());
  }
  return m;
}

void Renumber(Doc& d) {
  std::map<int64_t, int64_t> map;
  int64_t next = 0;
  for (size_t line : Records(d)) {
    Json& r = d.lines[line].v;
    if (Json* p = r.Find("p"); p && p->Int() && *p->Int() >= 0) {
      auto it = map.find(*p->Int());
      *p = Number(it != map.end() ? it->second : -1);
    }
    if (Json* i = r.Find("i"); i && i->Int()) {
      map[*i->Int()] = next;
      *i = Number(next++);
    }
  }
}

}  // namespace memtl_fuzz

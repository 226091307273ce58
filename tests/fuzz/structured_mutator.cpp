// The structure-aware mutator of fuzz_structured (structured_mutator.h).
// It is compiled without libFuzzer's coverage instrumentation: its
// branches are not the program's, and tracing them slowed every run.
#include "tests/fuzz/structured_mutator.h"

#include "tests/fuzz/fuzz_json.h"
#include "tests/fuzz/mutation_values.h"
#include "tests/fuzz/trace_doc.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// libFuzzer's byte mutator; absent in the replay build (replay_main.cpp),
// where MutateBytes changes a byte itself.
extern "C" __attribute__((weak)) size_t LLVMFuzzerMutate(uint8_t* data, size_t size,
                                                         size_t max_size);

namespace memtl_fuzz {
namespace {

class Mutator {
 public:
  Mutator(Doc* d, uint32_t seed) : d_(*d), rng_(seed) {}

  size_t Pick(size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng_() % n); }
  bool OneIn(size_t n) { return Pick(n) == 0; }
  template <typename T, size_t N>
  const T& PickOf(const T (&a)[N]) {
    return a[Pick(N)];
  }

  std::optional<size_t> RandomRecord() {
    auto r = Records(d_);
    if (r.empty()) return std::nullopt;
    return r[Pick(r.size())];
  }
  Json& V(size_t line) { return d_.lines[line].v; }

  // An extreme: mostly one that still reads as a 64-bit integer.
  Json Extreme() { return Number(OneIn(4) ? PickOf(kBadNumbers) : PickOf(kExtremes)); }

  void MutateNumber() {
    // The numbers of the records' fields, but mostly not the shape's.
    std::vector<Json*> nums;
    for (size_t line : Records(d_)) {
      for (auto& [k, v] : V(line).members) {
        const std::string_view key = std::string_view(k).substr(1, k.size() - 2);
        const bool shape =
            std::find(std::begin(kShapeKeys), std::end(kShapeKeys), key) != std::end(kShapeKeys);
        if (shape && !OneIn(8)) continue;
        std::vector<Json*> all;
        Collect(&v, &all);
        for (Json* j : all) {
          if (j->kind == Json::kNumber) nums.push_back(j);
        }
      }
    }
    if (nums.empty()) return;
    Json* n = nums[Pick(nums.size())];
    const auto v = n->Int();
    switch (Pick(5)) {
      case 0:
        *n = Extreme();
        break;
      case 1:
        if (v && *v > INT64_MIN + 2 && *v < INT64_MAX - 2)
          n->text = std::to_string(*v + static_cast<int64_t>(Pick(5)) - 2);
        break;
      case 2:
        if (v && *v != INT64_MIN) n->text = std::to_string(-*v);
        break;
      case 3:
        *n = *nums[Pick(nums.size())];
        break;
      default:
        if (v)
          n->text = std::to_string(static_cast<int64_t>(static_cast<uint64_t>(*v) << Pick(64)));
        break;
    }
  }

  // A value of `key` set to another record's value of the same key.
  void CopyRef() {
    const char* key = PickOf(kRefKeys);
    auto vals = ValuesOfKey(d_, key);
    if (vals.size() < 2) return;
    Json src = *vals[Pick(vals.size())];
    *vals[Pick(vals.size())] = std::move(src);
  }

  void MutatePresence() {
    auto objs = AllValues(d_, Json::kObject);
    if (objs.empty()) return;
    Json* o = objs[Pick(objs.size())];
    if (o->members.empty()) return;
    const size_t m = Pick(o->members.size());
    switch (Pick(4)) {
      case 0:
        o->members.erase(o->members.begin() + static_cast<ptrdiff_t>(m));
        break;
      case 1:
        o->members.push_back(o->members[m]);
        break;  // a duplicate key
      case 2:
        o->members[m].value = Json();
        break;  // null
      default: {
        Json& v = o->members[m].value;  // another type
        switch (Pick(5)) {
          case 0:
            v = String(v.kind == Json::kString ? "1" : v.text);
            break;
          case 1:
            v = Empty(Json::kArray);
            break;
          case 2:
            v = Empty(Json::kObject);
            break;
          case 3:
            v = Bool(OneIn(2));
            break;
          default:
            v = Extreme();
            break;
        }
      }
    }
  }

  void MutateString() {
    const auto rec = RandomRecord();
    if (!rec) return;
    Json& r = V(*rec);
    switch (Pick(6)) {
      case 0:
        if (Json* n = r.Find("name")) {
          auto names = ValuesOfKey(d_, "name");
          *n = OneIn(2) ? String(PickOf(kOpNames)) : *names[Pick(names.size())];
        }
        return;
      case 1: {
        auto devs = ValuesOfKey(d_, "dev");
        if (!devs.empty()) *devs[Pick(devs.size())] = String(PickOf(kDevices));
        return;
      }
      case 2: {
        auto dts = ValuesOfKey(d_, "dtype");
        if (!dts.empty()) *dts[Pick(dts.size())] = String(PickOf(kDtypes));
        return;
      }
      case 3:
        if (Json* k = r.Find("k")) *k = String(PickOf(kKinds));
        return;
      case 4:
        if (Json* s = r.Find("scope")) *s = String(PickOf(kScopes));
        return;
      default: {
        auto strs = AllValues(d_, Json::kString);
        if (strs.empty()) return;
        Json* s = strs[Pick(strs.size())];
        std::string text = s->text.substr(1, s->text.size() - 2);
        const char* inserts[] = {"\\n", "\\u001b[2J", "\\u0000", "\\ud800", "\\\"", "::", "."};
        text.insert(Pick(text.size() + 1), PickOf(inserts));
        s->text = "\"" + text + "\"";
      }
    }
  }

  // The parent of a record: root, an earlier or later record, itself, none.
  void MutateParent() {
    const auto rec = RandomRecord();
    if (!rec) return;
    Json* p = V(*rec).Find("p");
    if (p == nullptr) return;
    std::vector<Json*> earlier, all = ValuesOfKey(d_, "i");
    for (size_t line : Records(d_)) {
      if (line >= *rec) break;
      if (Json* i = V(line).Find("i")) earlier.push_back(i);
    }
    switch (Pick(6)) {
      case 0:
        *p = Number(-1);
        break;
      case 1:
        if (!all.empty()) *p = *all[Pick(all.size())];
        break;
      case 2:
        if (Json* i = V(*rec).Find("i")) *p = *i;
        break;
      case 3:
        *p = Extreme();
        break;
      default:
        if (!earlier.empty()) *p = *earlier[Pick(earlier.size())];
        break;
    }
  }

  void MutateTime() {
    const auto rec = RandomRecord();
    if (!rec) return;
    Json& r = V(*rec);
    Json* t = r.Find(PickOf(kTimeKeys));
    if (t == nullptr) return;
    auto times = ValuesOfKey(d_, PickOf(kTimeKeys));
    switch (Pick(4)) {
      case 0:
        if (!times.empty()) *t = *times[Pick(times.size())];
        break;
      case 1: {  // before or after its parent's start
        const auto p = r.Find("p") ? r.Find("p")->Int() : std::nullopt;
        for (size_t line : Records(d_)) {
          const Json* i = V(line).Find("i");
          const Json* t0 = V(line).Find("t0");
          if (p && i && t0 && i->Int() == p && t0->Int()) {
            *t = Number(Plus(*t0->Int(), static_cast<int64_t>(Pick(3)) - 1));
            break;
          }
        }
        break;
      }
      case 2:  // t0 and t1 swapped
        if (Json* t0 = r.Find("t0"); t0 && r.Find("t1")) std::swap(*t0, *r.Find("t1"));
        break;
      default:
        *t = Extreme();
        break;
    }
  }

  void MutateArray() {
    auto arrays = AllValues(d_, Json::kArray);
    if (arrays.empty()) return;
    Json* a = arrays[Pick(arrays.size())];
    switch (Pick(5)) {
      case 0:
        if (!a->items.empty())
          a->items.erase(a->items.begin() + static_cast<ptrdiff_t>(Pick(a->items.size())));
        break;
      case 1:
        if (!a->items.empty()) a->items.push_back(a->items[Pick(a->items.size())]);
        break;
      case 2:
        a->items.push_back(Extreme());
        break;
      case 3:
        if (a->items.size() > 1)
          std::swap(a->items[Pick(a->items.size())], a->items[Pick(a->items.size())]);
        break;
      default:
        a->items.clear();
        break;
    }
  }

  // An op's argument replaced by, or added as, a tensor from another op: the
  // same tensor seen twice, in place, as an alias.
  void ShareTensor() {
    std::vector<Json*> tensors;
    for (Json* o : AllValues(d_, Json::kObject)) {
      if (o->Find("impl")) tensors.push_back(o);
    }
    auto args = ValuesOfKey(d_, "args");
    if (tensors.empty() || args.empty()) return;
    Json* list = args[Pick(args.size())];
    if (list->kind != Json::kArray) return;
    Json t = *tensors[Pick(tensors.size())];
    if (OneIn(4)) {
      Json wrapped;
      wrapped.kind = Json::kObject;
      Json l;
      l.kind = Json::kArray;
      l.items.push_back(std::move(t));
      wrapped.Add("\"list\"", std::move(l));
      t = std::move(wrapped);
    }
    if (list->items.empty() || OneIn(2)) {
      list->items.insert(list->items.begin() + static_cast<ptrdiff_t>(Pick(list->items.size() + 1)),
                         std::move(t));
    } else {
      list->items[Pick(list->items.size())] = std::move(t);
    }
  }

  void MutateShape() {
    const auto rec = RandomRecord();
    if (!rec) return;
    const size_t begin = *rec;
    const size_t end = SubtreeEnd(d_, begin);
    std::vector<Line> sub(d_.lines.begin() + static_cast<ptrdiff_t>(begin),
                          d_.lines.begin() + static_cast<ptrdiff_t>(end));
    switch (Pick(5)) {
      case 0:  // drop the subtree
        d_.lines.erase(d_.lines.begin() + static_cast<ptrdiff_t>(begin),
                       d_.lines.begin() + static_cast<ptrdiff_t>(end));
        break;
      case 1:
      case 2: {  // copy it elsewhere, under a new parent, with new ids
        const bool move = Pick(2) == 0;
        if (move) {
          d_.lines.erase(d_.lines.begin() + static_cast<ptrdiff_t>(begin),
                         d_.lines.begin() + static_cast<ptrdiff_t>(end));
        } else {
          int64_t next = Plus(MaxId(d_), 1);
          std::map<int64_t, int64_t> map;
          for (Line& l : sub) {
            if (Json* i = l.v.Find("i"); i && i->Int()) {
              map[*i->Int()] = next;
              *i = Number(next);
              next = Plus(next, 1);
            }
            if (Json* p = l.v.Find("p"); p && p->Int() && map.count(*p->Int()))
              *p = Number(map[*p->Int()]);
          }
        }
        const size_t at = 1 + Pick(d_.lines.size());
        const size_t pos = std::min(at, d_.lines.size());
        // The new parent: the record before it, or a root.
        if (Json* p = sub.front().v.Find("p")) {
          const Json* prev_i =
              pos > 1 && d_.lines[pos - 1].parsed ? d_.lines[pos - 1].v.Find("i") : nullptr;
          *p = prev_i != nullptr && OneIn(2) ? *prev_i : Number(-1);
        }
        d_.lines.insert(d_.lines.begin() + static_cast<ptrdiff_t>(pos), sub.begin(), sub.end());
        break;
      }
      case 3: {  // two records swapped
        const auto other = RandomRecord();
        if (other) std::swap(d_.lines[begin], d_.lines[*other]);
        break;
      }
      default: {  // an allocation (or free) of a pointer the trace knows, inside this record
        auto ptrs = ValuesOfKey(d_, "ptr");
        auto bytes = ValuesOfKey(d_, "bytes");
        Json a;
        a.kind = Json::kObject;
        const Json* i = V(begin).Find("i");
        const Json* t0 = V(begin).Find("t0");
        a.Add("\"k\"", String("alloc"));
        a.Add("\"i\"", Number(Plus(MaxId(d_), 1)));
        a.Add("\"p\"", i ? *i : Number(-1));
        a.Add("\"t\"", t0 && t0->Int() ? Number(Plus(*t0->Int(), 1)) : Number(1));
        a.Add("\"ptr\"", ptrs.empty() ? Number(4096) : *ptrs[Pick(ptrs.size())]);
        Json b = bytes.empty() ? Number(16) : *bytes[Pick(bytes.size())];
        if (OneIn(2) && b.Int() && *b.Int() != INT64_MIN) b = Number(-*b.Int());
        a.Add("\"bytes\"", std::move(b));
        a.Add("\"dev\"", String(OneIn(4) ? PickOf(kDevices) : "cpu"));
        Line l;
        l.parsed = true;
        l.v = std::move(a);
        d_.lines.insert(d_.lines.begin() + static_cast<ptrdiff_t>(begin + 1), std::move(l));
        break;
      }
    }
    if (!OneIn(4)) Renumber(d_);
  }

  void MutateHeader() {
    if (d_.lines.empty() || !d_.lines[0].parsed || d_.lines[0].v.kind != Json::kObject) return;
    Json& h = d_.lines[0].v;
    const char* keys[] = {"version", "ids", "profile_memory", "format"};
    const char* key = PickOf(keys);
    Json* v = h.Find(key);
    if (v == nullptr) {
      h.Add(Escape(key), Json());
      v = &h.members.back().value;
    }
    switch (Pick(4)) {
      case 0:
        *v = Extreme();
        break;
      case 1:
        *v = Bool(OneIn(2));
        break;
      case 2:
        *v = String(OneIn(2) ? "memtl-trace" : "chrome-trace");
        break;
      default:
        *v = Json();
        break;
    }
  }

  // A schema record for an op name of the trace, from a list that makes
  // ops in place, views, list outputs, or fails to parse.
  void AddSchema() {
    // Op names (with a namespace) of the trace, to make their schema.
    std::vector<Json*> names;
    for (Json* n : ValuesOfKey(d_, "name")) {
      if (n->kind == Json::kString && n->text.find("::") != std::string::npos) names.push_back(n);
    }
    Json s;
    s.kind = Json::kObject;
    s.Add("\"k\"", String("schema"));
    std::string schema = PickOf(kSchemas);
    std::string op = schema.substr(0, schema.find_first_of(".("));
    if (!names.empty() && OneIn(2)) {
      const Json& n = *names[Pick(names.size())];
      op = n.text.size() >= 2 ? n.text.substr(1, n.text.size() - 2) : op;  // still escaped
      const size_t paren = schema.find('(');
      const size_t dot = schema.find('.');
      schema = op + schema.substr(std::min(paren, dot));
      Json o;
      o.kind = Json::kString;
      o.text = "\"" + op + "\"";
      s.Add("\"op\"", std::move(o));
      Json list;
      list.kind = Json::kArray;
      Json text;
      text.kind = Json::kString;
      text.text = "\"" + schema + "\"";
      list.items.push_back(std::move(text));
      s.Add("\"schemas\"", std::move(list));
    } else {
      s.Add("\"op\"", String(op));
      Json list;
      list.kind = Json::kArray;
      list.items.push_back(String(schema));
      s.Add("\"schemas\"", std::move(list));
    }
    Line l;
    l.parsed = true;
    l.v = std::move(s);
    d_.lines.insert(d_.lines.begin() + static_cast<ptrdiff_t>(
                                           std::min(d_.lines.size(), 1 + Pick(d_.lines.size()))),
                    std::move(l));
  }

  void MutateBytes(size_t max_size) {
    if (d_.lines.empty()) return;
    Line& l = d_.lines[Pick(d_.lines.size())];
    std::string text;
    if (l.parsed) {
      Write(l.v, &text);
    } else {
      text = l.raw;
    }
    if (LLVMFuzzerMutate != nullptr) {
      const size_t cap = std::min<size_t>(max_size, text.size() * 2 + 64);
      const size_t size = std::min(text.size(), cap);
      text.resize(cap);
      text.resize(LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(text.data()), size, cap));
    } else if (!text.empty()) {
      text[Pick(text.size())] = static_cast<char>(rng_());
    }
    l = ParseLine(std::move(text));
  }

  // One to three mutations, weighted towards those that keep the trace
  // readable; the header, whose damage stops every read, is changed rarely.
  void Run(size_t max_size) {
    // A seed longer than -max_len arrives cut inside its last line.
    if (d_.lines.size() > 1 && !d_.lines.back().parsed && !OneIn(4)) d_.lines.pop_back();
    const size_t n = OneIn(2) ? 1 : 2 + Pick(2);
    for (size_t k = 0; k < n; ++k) {
      const size_t w = Pick(48);
      if (w < 7) {
        MutateNumber();
      } else if (w < 14) {
        CopyRef();
      } else if (w < 20) {
        MutateTime();
      } else if (w < 27) {
        MutateShape();
      } else if (w < 32) {
        ShareTensor();
      } else if (w < 35) {
        MutateString();
      } else if (w < 38) {
        MutateArray();
      } else if (w < 41) {
        MutateParent();
      } else if (w < 43) {
        MutatePresence();
      } else if (w < 45) {
        AddSchema();
      } else if (w < 47) {
        MutateBytes(max_size);
      } else {
        MutateHeader();
      }
    }
  }

  // Drops subtrees until the document fits.
  std::string Fit(size_t max_size) {
    std::string out = WriteDoc(d_);
    for (int tries = 0; out.size() > max_size && tries < 64 && d_.lines.size() > 1; ++tries) {
      const size_t begin = 1 + Pick(d_.lines.size() - 1);
      const size_t end = d_.lines[begin].parsed ? SubtreeEnd(d_, begin) : begin + 1;
      d_.lines.erase(d_.lines.begin() + static_cast<ptrdiff_t>(begin),
                     d_.lines.begin() + static_cast<ptrdiff_t>(end));
      out = WriteDoc(d_);
    }
    if (out.size() > max_size) out.resize(max_size);
    return out;
  }

 private:
  Doc& d_;
  std::mt19937 rng_;
};

}  // namespace

size_t MutateTrace(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  Doc doc = ParseDoc(std::string_view(reinterpret_cast<const char*>(data), size));
  Mutator m(&doc, seed);
  m.Run(max_size);
  const std::string out = m.Fit(max_size);
  std::copy(out.begin(), out.end(), data);
  return out.size();
}

size_t CrossOverTraces(const uint8_t* data1, size_t size1, const uint8_t* data2, size_t size2,
                       uint8_t* out, size_t max_out_size, unsigned int seed) {
  std::mt19937 rng(seed);
  const std::string_view a(reinterpret_cast<const char*>(data1), size1);
  const std::string_view b(reinterpret_cast<const char*>(data2), size2);
  // Whole lines of each, cut where a line starts: no parsing unless the
  // result is renumbered.
  auto line_starts = [](std::string_view s) {
    std::vector<size_t> starts = {0};
    for (size_t i = s.find('\n'); i != std::string_view::npos && i + 1 < s.size();
         i = s.find('\n', i + 1)) {
      starts.push_back(i + 1);
    }
    return starts;
  };
  const std::vector<size_t> sa = line_starts(a), sb = line_starts(b);
  const size_t cut_a = sa.size() <= 1 ? a.size() : sa[1 + rng() % (sa.size() - 1)];
  const size_t cut_b = sb.size() <= 1 ? b.size() : sb[1 + rng() % (sb.size() - 1)];
  std::string joined(a.substr(0, cut_a));
  if (!joined.empty() && joined.back() != '\n') joined += '\n';
  joined += b.substr(cut_b);
  std::string result;
  if (rng() % 2 == 0) {
    Doc doc = ParseDoc(joined);
    Renumber(doc);
    Mutator m(&doc, seed);
    result = m.Fit(max_out_size);
  } else {
    result = std::move(joined);
    if (result.size() > max_out_size) result.resize(max_out_size);
  }
  std::copy(result.begin(), result.end(), out);
  return result.size();
}

}  // namespace memtl_fuzz

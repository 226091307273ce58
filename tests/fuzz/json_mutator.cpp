// The JSON document mutator of fuzz_kineto, fuzz_et and fuzz_raw
// (json_mutator.h). Compiled, as fuzz_structured's mutator is, without
// libFuzzer's coverage instrumentation: its branches are not memtl's.
#include "tests/fuzz/json_mutator.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tests/fuzz/fuzz_json.h"
#include "tests/fuzz/mutation_values.h"

// libFuzzer's byte mutator; absent in the replay build (replay_main.cpp).
extern "C" __attribute__((weak)) size_t LLVMFuzzerMutate(uint8_t* data, size_t size,
                                                         size_t max_size);

namespace memtl_fuzz {
namespace {

// clang-format off
// Floats and sizes past what the readers take: Kineto's times are
// microseconds as doubles, and a double that does not fit int64 ns must be
// refused, not converted.
constexpr const char* kFloats[] = {
    "0.5", "0.001", "1.5", "-0.5", "1e-7", "4.9e-324", "2.2250738585072014e-308",
    "9223372036854775.807", "9223372036854775.808", "9.3e15", "1e18", "9.2233720368547758e18",
    "1e19", "1e300", "1.7976931348623157e308", "-1.7976931348623157e308", "1e309", "-1e309",
    "123456789.123456789", "1689360788495703.5", "-0.0", "0e0", "1E+2", "1e-400"};

// Strings no reader should trust: bad UTF-8 (overlong, a lone surrogate, a
// code point past U+10FFFF, a cut sequence), bad and odd escapes, controls.
constexpr const char* kBadStrings[] = {
    "\xff\xfe", "\xc3\x28", "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82",
    "a\xf0\x9f\x98", "\\ud800", "\\udc00x", "\\ud83d\\ude00", "\\u0000", "\\u00", "\\uZZZZ",
    "\\x41", "\\", "\\q", "\\/", "\\u001b[2J", "\t", "\x7f", "\xef\xbb\xbf"};

constexpr const char* kKinetoKeys[] = {
    "traceEvents", "ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "id", "s",
    "Addr", "Bytes", "Total Allocated", "Total Reserved", "Device Type", "Device Id",
    "Record function id", "External id", "Ev Idx", "Sequence number", "Fwd thread id",
    "Python id", "Python parent id", "deviceProperties", "schemaVersion", "displayTimeUnit",
    "baseTimeNanoseconds", "traceName", "distributedInfo", "stream", "device", "correlation"};
constexpr const char* kKinetoStrings[] = {
    "cpu_op", "user_annotation", "python_function", "cpu_instant_event", "gpu_user_annotation",
    "cuda_runtime", "kernel", "gpu_memcpy", "gpu_memset", "ac2g", "Trace", "X", "i", "I", "B",
    "E", "M", "s", "f", "g", "t", "p", "[memory]", "ProfilerStep#0", "PyTorch Profiler (0)",
    "Spans", "Traces", "ms", "ns", "us"};

constexpr const char* kEtKeys[] = {
    "schema", "nodes", "id", "name", "rf_id", "parent", "ctrl_deps", "fw_parent", "seq_id",
    "scope", "tid", "fw_tid", "op_schema", "inputs", "outputs", "input_shapes", "input_types",
    "output_shapes", "output_types", "values", "shapes", "types", "strides", "attrs", "type",
    "value", "start_ts", "pid"};
constexpr const char* kEtStrings[] = {
    "1.0.1", "1.0.2", "1.1.0-chakra.0.0.4", "1.1.1-chakra.0.0.4", "2.0", "", "Tensor(float)",
    "Tensor(c10::Half)", "Tensor(long int)", "Tensor(bool)", "Tensor", "Tensor(",
    "GenericList[Tensor(float),Tensor(float)]", "GenericList[Int,Int]", "GenericList[]",
    "GenericList[", "Int", "Double", "Bool", "String", "Device", "None", "ScalarType",
    "TensorList", "Optional[Tensor]", "uint64", "int64", "string", "<None>", "cpu", "cuda:0",
    "cuda:1", "meta", "[pytorch|profiler|execution_trace|thread]",
    "[pytorch|profiler|execution_trace|process]"};
// clang-format on

// A value and the key it is found under: a member's key (unquoted), or for
// an array's element the position in it after the array's key ("values#0",
// "#1" in an array of arrays), so that the fields of a tuple (a tensor's
// [id, storage, offset, numel, itemsize, device], a row's [time, action,
// bytes, category]) are told apart.
struct Node {
  Json* v;
  std::string key;
};

void Walk(Json* j, const std::string& key, std::vector<Node>* out) {
  out->push_back({j, key});
  if (j->kind == Json::kArray) {
    const std::string base = key.find('#') == std::string::npos ? key : "";
    for (size_t i = 0; i < j->items.size(); ++i) {
      Walk(&j->items[i], base + "#" + std::to_string(std::min<size_t>(i, 9)), out);
    }
  } else if (j->kind == Json::kObject) {
    for (auto& m : j->members) Walk(&m.value, m.key.substr(1, m.key.size() - 2), out);
  }
}

// The text as one JSON line: a raw newline is no JSON inside a string and
// whitespace elsewhere (fuzz_json's parser reads a line).
bool ParseDocument(std::string_view text, Json* out) {
  std::string line(text);
  std::replace(line.begin(), line.end(), '\n', ' ');
  Line l = ParseLine(std::move(line));
  if (!l.parsed) return false;
  *out = std::move(l.v);
  return true;
}

class Mutator {
 public:
  Mutator(Json* root, uint32_t seed, JsonFlavor flavor) : root_(*root), rng_(seed), f_(flavor) {}

  size_t Pick(size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng_() % n); }
  bool OneIn(size_t n) { return Pick(n) == 0; }
  template <typename T, size_t N>
  const T& PickOf(const T (&a)[N]) {
    return a[Pick(N)];
  }

  std::vector<Node> Nodes() {
    std::vector<Node> n;
    Walk(&root_, "", &n);
    return n;
  }
  std::vector<Node> OfKind(Json::Kind kind) {
    std::vector<Node> all = Nodes(), out;
    for (auto& n : all) {
      if (n.v->kind == kind) out.push_back(std::move(n));
    }
    return out;
  }
  // A copy of another value under the same key, if any (a copy: the value
  // may lie inside or around the one it replaces, as a row's fields share
  // the rows' keys).
  std::optional<Json> SameKey(const std::vector<Node>& all, const Node& n) {
    std::vector<const Json*> same;
    for (const auto& o : all) {
      if (o.v != n.v && o.key == n.key) same.push_back(o.v);
    }
    if (same.empty()) return std::nullopt;
    return *same[Pick(same.size())];
  }

  const char* FlavorKey() {
    switch (f_) {
      case JsonFlavor::kKineto:
        return PickOf(kKinetoKeys);
      case JsonFlavor::kExecutionTrace:
        return PickOf(kEtKeys);
      default:
        return "x";
    }
  }
  std::string FlavorString() {
    switch (Pick(f_ == JsonFlavor::kRawTimeline ? 3 : 5)) {
      case 0:
        return PickOf(kBadStrings);
      case 1:
        return PickOf(kDevices);
      case 2:
        return PickOf(kOpNames);
      default:  // the format's own, twice as often
        return f_ == JsonFlavor::kKineto ? PickOf(kKinetoStrings) : PickOf(kEtStrings);
    }
  }
  // Raw text between quotes: a bad UTF-8 byte or escape is kept as it is.
  static Json RawString(std::string_view s) {
    Json j;
    j.kind = Json::kString;
    j.text = "\"" + std::string(s) + "\"";
    return j;
  }
  Json NewNumber() {
    switch (Pick(4)) {
      case 0:
        return Number(PickOf(kBadNumbers));
      case 1:
        return Number(PickOf(kFloats));
      default:
        return Number(PickOf(kExtremes));
    }
  }

  void MutateNumber() {
    const std::vector<Node> all = Nodes();
    std::vector<const Node*> nums;
    for (const auto& n : all) {
      if (n.v->kind == Json::kNumber) nums.push_back(&n);
    }
    if (nums.empty()) return;
    const Node& n = *nums[Pick(nums.size())];
    const auto v = n.v->Int();
    switch (Pick(7)) {
      case 0:
      case 1:
        *n.v = NewNumber();
        break;
      case 2:
        if (v) *n.v = Number(Plus(*v, static_cast<int64_t>(Pick(9)) - 4));
        break;
      case 3:
        if (v && *v != INT64_MIN) *n.v = Number(-*v);
        if (!v && !n.v->text.empty())
          n.v->text = n.v->text[0] == '-' ? n.v->text.substr(1) : "-" + n.v->text;
        break;
      case 4:
        if (v) *n.v = Number(static_cast<int64_t>(static_cast<uint64_t>(*v) << Pick(64)));
        break;
      case 5:  // a float where an integer was, or the other way
        if (v) {
          n.v->text += OneIn(2) ? ".5" : ".0";
        } else if (const auto dot = n.v->text.find('.'); dot != std::string::npos) {
          n.v->text.resize(dot == 0 ? 1 : dot);
        }
        break;
      default:
        if (auto o = SameKey(all, n)) *n.v = std::move(*o);
        break;
    }
  }

  void MutateString() {
    const std::vector<Node> all = Nodes();
    std::vector<const Node*> strs;
    for (const auto& n : all) {
      if (n.v->kind == Json::kString) strs.push_back(&n);
    }
    if (strs.empty()) return;
    const Node& n = *strs[Pick(strs.size())];
    switch (Pick(5)) {
      case 0:
        *n.v = RawString(FlavorString());
        break;
      case 1: {  // something inserted
        std::string t = n.v->text.substr(1, n.v->text.size() - 2);
        t.insert(Pick(t.size() + 1), OneIn(2) ? PickOf(kBadStrings) : FlavorString());
        *n.v = RawString(t);
        break;
      }
      case 2:  // long
        *n.v = String(std::string(OneIn(2) ? 255 : 4000, 'a'));
        break;
      case 3:  // a number as a string
        *n.v = String(NewNumber().text);
        break;
      default:
        if (auto o = SameKey(all, n)) *n.v = std::move(*o);
        break;
    }
  }

  // Any value as another kind, or wrapped.
  void MutateKind() {
    std::vector<Node> all = Nodes();
    if (all.size() < 2) return;
    Json& v = *all[1 + Pick(all.size() - 1)].v;
    switch (Pick(7)) {
      case 0:
        v = Json();
        break;
      case 1:
        v = Bool(OneIn(2));
        break;
      case 2:
        v = NewNumber();
        break;
      case 3:
        v = String(v.kind == Json::kString || v.kind == Json::kNumber ? v.text : "x");
        break;
      case 4:
        v = Empty(OneIn(2) ? Json::kArray : Json::kObject);
        break;
      case 5: {
        Json a = Empty(Json::kArray);
        a.items.push_back(std::move(v));
        v = std::move(a);
        break;
      }
      default: {
        Json o = Empty(Json::kObject);
        o.Add(Escape(FlavorKey()), std::move(v));
        v = std::move(o);
        break;
      }
    }
  }

  void MutateMembers() {
    std::vector<Node> objs = OfKind(Json::kObject);
    if (objs.empty()) return;
    Json& o = *objs[Pick(objs.size())].v;
    const std::vector<Node> all = Nodes();
    if (o.members.empty() || OneIn(4)) {  // a member added
      const std::string key = FlavorKey();
      Json value = NewNumber();
      for (const auto& n : all) {
        if (n.key == key && OneIn(2)) {
          value = *n.v;
          break;
        }
      }
      o.members.insert(o.members.begin() + static_cast<ptrdiff_t>(Pick(o.members.size() + 1)),
                       Member{Escape(key), std::move(value)});
      return;
    }
    const size_t m = Pick(o.members.size());
    switch (Pick(5)) {
      case 0:
      case 1:
        o.members.erase(o.members.begin() + static_cast<ptrdiff_t>(m));
        break;
      case 2: {  // a duplicate key, first or last
        Member copy = o.members[m];
        o.members.insert(OneIn(2) ? o.members.begin() : o.members.end(), std::move(copy));
        break;
      }
      case 3:
        o.members[m].key = Escape(FlavorKey());
        break;
      default:
        o.members[m].key = OneIn(2) ? "\"" + std::string(PickOf(kBadStrings)) + "\"" : "\"\"";
        break;
    }
  }

  void MutateArray() {
    std::vector<Node> arrs = OfKind(Json::kArray);
    if (arrs.empty()) return;
    // Mostly the long ones: the events, the nodes, the rows.
    Json* a = arrs[Pick(arrs.size())].v;
    if (OneIn(2)) {
      for (const auto& n : arrs) {
        if (n.v->items.size() > a->items.size()) a = n.v;
      }
    }
    auto& items = a->items;
    if (items.empty()) {
      items.push_back(NewNumber());
      return;
    }
    const size_t i = Pick(items.size()), j = Pick(items.size());
    switch (Pick(7)) {
      case 0:
      case 1:
        items.erase(items.begin() + static_cast<ptrdiff_t>(i));
        break;
      case 2: {
        Json copy = items[i];
        items.insert(items.begin() + static_cast<ptrdiff_t>(j), std::move(copy));
        break;
      }
      case 3:
        std::swap(items[i], items[j]);
        break;
      case 4:  // moved: the order the readers rely on broken
        if (i != j) {
          Json v = std::move(items[i]);
          items.erase(items.begin() + static_cast<ptrdiff_t>(i));
          items.insert(items.begin() + static_cast<ptrdiff_t>(std::min(j, items.size())),
                       std::move(v));
        }
        break;
      case 5:
        items.resize(i);
        break;
      default: {  // an element from another array
        const Json* src = arrs[Pick(arrs.size())].v;
        if (src->items.empty() || src == a) break;
        // Copied before the assignment: `src` may lie inside items[i].
        Json copy = src->items[Pick(src->items.size())];
        items[i] = std::move(copy);
        break;
      }
    }
  }

  // Nesting past any reader's depth limit, kept as text: a number's text
  // is written as it is.
  void MutateDepth() {
    std::vector<Node> all = Nodes();
    Json& v = *all[Pick(all.size())].v;
    static constexpr size_t kDepths[] = {8, 63, 64, 65, 100, 128, 256, 1000, 3000};
    const size_t depth = PickOf(kDepths);
    std::string inner;
    Write(v, &inner);
    const bool arrays = OneIn(2);
    std::string text;
    for (size_t k = 0; k < depth; ++k) text += arrays ? "[" : "{\"a\":";
    text += inner;
    text.append(depth, arrays ? ']' : '}');
    v = Number(std::move(text));
  }

  void Run() {
    const size_t n = OneIn(2) ? 1 : 2 + Pick(3);
    for (size_t k = 0; k < n; ++k) {
      const size_t r = Pick(100);
      if (r < 35) {
        MutateNumber();
      } else if (r < 50) {
        MutateString();
      } else if (r < 60) {
        MutateKind();
      } else if (r < 77) {
        MutateMembers();
      } else if (r < 98) {
        MutateArray();
      } else {
        MutateDepth();
      }
    }
  }

  // Drops elements of the longest arrays until the document fits.
  bool Fit(size_t max_size, std::string* out) {
    for (int tries = 0; tries < 256; ++tries) {
      out->clear();
      Write(root_, out);
      if (out->size() <= max_size) return true;
      std::vector<Node> arrs = OfKind(Json::kArray);
      Json* longest = nullptr;
      for (const auto& a : arrs) {
        if (longest == nullptr || a.v->items.size() > longest->items.size()) longest = a.v;
      }
      if (longest == nullptr || longest->items.empty()) return false;
      // Several at once when far over.
      const size_t drop = std::max<size_t>(1, longest->items.size() / 8);
      for (size_t k = 0; k < drop && !longest->items.empty(); ++k) {
        longest->items.erase(longest->items.begin() +
                             static_cast<ptrdiff_t>(Pick(longest->items.size())));
      }
    }
    return false;
  }

 private:
  Json& root_;
  std::mt19937 rng_;
  JsonFlavor f_;
};

// libFuzzer's byte mutation of `text`, or a byte changed in the replay
// build.
void MutateBytes(std::string* text, size_t max_size, uint32_t seed) {
  if (LLVMFuzzerMutate != nullptr) {
    const size_t size = std::min(text->size(), max_size);
    text->resize(max_size);
    text->resize(LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(text->data()), size, max_size));
  } else if (!text->empty()) {
    (*text)[seed % text->size()] = static_cast<char>(seed >> 8);
  }
}

// One document mutated, at most max_size bytes.
std::string MutateText(std::string text, size_t max_size, uint32_t seed, JsonFlavor flavor) {
  if (max_size == 0) return text;
  Json root;
  if (seed % 8 == 0 || !ParseDocument(text, &root)) {
    MutateBytes(&text, max_size, seed);
    return text;
  }
  Mutator m(&root, seed, flavor);
  m.Run();
  std::string out;
  if (!m.Fit(max_size, &out)) {
    MutateBytes(&text, max_size, seed);
    return text;
  }
  return out;
}

}  // namespace

size_t MutateJsonDoc(uint8_t* data, size_t size, size_t max_size, unsigned int seed,
                     JsonFlavor flavor) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string out;
  const size_t sep = text.find(kEtKinetoSeparator);
  if (flavor == JsonFlavor::kExecutionTrace && sep != std::string::npos) {
    // Mostly the execution trace; the Kineto trace a quarter of the time.
    std::string et = text.substr(0, sep);
    std::string kineto = text.substr(sep + kEtKinetoSeparator.size());
    const size_t fixed = et.size() + kineto.size() + kEtKinetoSeparator.size();
    // The part's room: what the other two parts leave (computed before the
    // part is moved into the call).
    if (seed % 4 == 3) {
      const size_t room = max_size - (fixed - kineto.size());
      kineto = MutateText(std::move(kineto), room, seed / 4, JsonFlavor::kKineto);
    } else {
      const size_t room = max_size - (fixed - et.size());
      et = MutateText(std::move(et), room, seed / 4, flavor);
    }
    out = et + std::string(kEtKinetoSeparator) + kineto;
  } else {
    out = MutateText(text, max_size, seed, flavor);
  }
  if (out.size() > max_size) out.resize(max_size);
  std::copy(out.begin(), out.end(), data);
  return out.size();
}

size_t CrossOverJsonDocs(const uint8_t* data1, size_t size1, const uint8_t* data2, size_t size2,
                         uint8_t* out, size_t max_out_size, unsigned int seed) {
  std::string_view t1(reinterpret_cast<const char*>(data1), size1);
  std::string_view t2(reinterpret_cast<const char*>(data2), size2);
  // fuzz_et's inputs: the execution traces cross, the Kineto trace of the
  // first stays.
  std::string_view rest;
  if (const size_t sep = t1.find(kEtKinetoSeparator); sep != std::string_view::npos) {
    rest = t1.substr(sep);
    t1 = t1.substr(0, sep);
  }
  t2 = t2.substr(0, t2.find(kEtKinetoSeparator));
  Json a, b;
  std::string text;
  if (ParseDocument(t1, &a) && ParseDocument(t2, &b)) {
    std::mt19937 rng(seed);
    std::vector<Node> na, nb;
    Walk(&a, "", &na);
    Walk(&b, "", &nb);
    std::vector<Json*> from;
    std::vector<std::string> keys;
    for (const auto& n : nb) {
      if (n.v->kind == Json::kArray && !n.v->items.empty()) {
        from.push_back(n.v);
        keys.push_back(n.key);
      }
    }
    if (!from.empty()) {
      const size_t k = rng() % from.size();
      std::vector<Json*> to, any;
      for (const auto& n : na) {
        if (n.v->kind != Json::kArray) continue;
        any.push_back(n.v);
        if (n.key == keys[k]) to.push_back(n.v);
      }
      if (to.empty()) to = any;
      if (!to.empty()) {
        Json* dst = to[rng() % to.size()];
        const Json& item = from[k]->items[rng() % from[k]->items.size()];
        dst->items.insert(
            dst->items.begin() + static_cast<ptrdiff_t>(rng() % (dst->items.size() + 1)), item);
      }
    }
    Write(a, &text);
  } else {
    text = std::string(t1.substr(0, t1.size() / 2)) + std::string(t2.substr(t2.size() / 2));
  }
  text += rest;
  if (text.size() > max_out_size) return 0;  // libFuzzer then tries another mutation
  std::copy(text.begin(), text.end(), out);
  return text.size();
}

}  // namespace memtl_fuzz

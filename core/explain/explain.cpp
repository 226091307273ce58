// memtl explain (explain.h). The passes run again here, one at a time
// (RunAllPassesTraced): their final answer is the one the export used, and
// the steps say which rule gave it.
#include "core/explain/explain.h"

#include "core/explain/names.h"

#include <algorithm>
#include <iterator>
#include <utility>
#include <vector>

#include "core/explain/peak.h"
#include "passes/pass.h"

namespace memtl {

namespace {

std::string Tv(const KeyTable& kt, KeySlot key, Version version) {
  return "T" + std::to_string(kt[key].id.value()) + "(v" + std::to_string(version.value()) + ")";
}

// One line of text per fact; the JSON object gets the same facts.
struct Facts {
  std::string text;
  std::string json;
  void Line(const std::string& label, const std::string& value, const std::string& json_value) {
    text += "  " + label + ": " + value + "\n";
    json += (json.empty() ? "{" : ",") + JsonString(label) + ":" + json_value;
  }
};

// What explaining any version of one tensor reads, made once: the passes
// run again, traced (which pass set each value's category), each value's
// creator, the first row's time, the profiler steps and the model's names.
class Explainer {
 public:
  // `keys`: the tensor's, in slot order.
  Explainer(const ExplainTensorInput& x, const std::vector<KeySlot>& keys)
      : x_(x), in_(x.in), trace_(x.in.trace), kt_(x.in.keys), g_(x.in.graph) {
    CategoryDict traced;
    steps_ = RunAllPassesTraced(PassInput{trace_, in_.keys, in_.tree, g_, x.sizes}, traced);
    creator_ = CreatorOfValues(g_);
    for (const TimelineEvent& e : in_.timeline) {
      if (e.time >= 0) first_ = first_ < 0 ? e.time : std::min(first_, e.time);
    }
    steps_at_ = ProfilerSteps(trace_);
    names_ = NameModelState(in_, &keys);
  }

  // Version `v` of `key`: its facts, as text lines and one JSON object.
  Facts Explain(KeySlot key, Version v) const {
    Facts f;
    f.json = "{\"tensor\":" + JsonString(Tv(kt_, key, v));
    Describe(f, key, v);
    const uint32_t made = creator_[g_.value(key, v)];
    CreatedBy(f, made);
    Flow(f, key, v, made);
    Storage(f, key);
    DecidedBy(f, key, v);
    return f;
  }

 private:
  std::string When(uint32_t event) const {
    return MsAfter(trace_.event_t0[event], first_ < 0 ? 0 : first_);
  }
  void Describe(Facts& f, KeySlot key, Version v) const;
  void CreatedBy(Facts& f, uint32_t made) const;
  void Flow(Facts& f, KeySlot key, Version v, uint32_t made) const;
  void Storage(Facts& f, KeySlot key) const;
  void DecidedBy(Facts& f, KeySlot key, Version v) const;

  const ExplainTensorInput& x_;
  const ExplainInput& in_;
  const Trace& trace_;
  const KeyTable& kt_;
  const DataFlowGraph& g_;
  std::vector<PassStep> steps_;
  PerValue<uint32_t> creator_;
  int64_t first_ = -1;
  StepStarts steps_at_;
  TensorNames names_;
};

// Its category and name, its key, size and shape.
void Explainer::Describe(Facts& f, KeySlot key, Version v) const {
  const auto category = in_.categories.Get(key, v);
  const TensorKey& tk = kt_[key];
  f.Line("category", std::string(CategoryName(category)),
         JsonString(std::string(CategoryName(category))));
  // The model's state by the name users know (names.h).
  if (const auto it = names_.find(key.value()); it != names_.end())
    f.Line("name", it->second.text, JsonString(it->second.text));
  f.Line("key",
         "tensor id " + std::to_string(tk.id.value()) + ", allocation id " +
             std::to_string(tk.allocation.value()) + ", device " + trace_.devices[tk.device].name,
         "{\"id\":" + std::to_string(tk.id.value()) +
             ",\"allocation\":" + std::to_string(tk.allocation.value()) +
             ",\"device\":" + JsonString(trace_.devices[tk.device].name) + "}");
  f.Line("size", HumanBytes(x_.sizes[key]) + " (" + std::to_string(x_.sizes[key]) + " bytes)",
         std::to_string(x_.sizes[key]));
  // Of the key's first observation (Analysis::key_shapes), for every version.
  const std::string_view shape = ShapeOf(in_, key);
  f.Line("shape",
         shape.empty() ? "not recorded (no op argument shows the tensor)" : std::string(shape),
         shape.empty() ? "null" : JsonString(shape));
}

// The creating op, event `made`.
void Explainer::CreatedBy(Facts& f, uint32_t made) const {
  if (made == kNone32) {
    f.Line("created by", "nothing in the profile (it existed before profiling began)", "null");
    return;
  }
  const EventContext c = ContextOf(trace_, in_.tree, made);
  const std::string step = StepAt(steps_at_, trace_.event_t0[made]);
  const std::string op = trace_.Name(trace_.events[made]);
  // The overloads the op's arguments match, as the graph matched them.
  std::string overloads, overloads_json;
  if (x_.schemas != nullptr && trace_.events[made].kind == EventKind::kOp) {
    std::vector<Observed> observed;
    ObservedArgs(trace_, in_.keys, trace_.events[made].payload, observed);
    for (const FunctionSchema* m : MatchSchemas(x_.schemas->Lookup(op), observed)) {
      const std::string full = m->name + (m->overload.empty() ? "" : "." + m->overload);
      overloads += (overloads.empty() ? "" : ", ") + full;
      overloads_json += (overloads_json.empty() ? "" : ",") + JsonString(full);
    }
  }
  std::string creator = op;
  if (!overloads.empty() && overloads != op) creator += " (overload " + overloads + ")";
  f.Line("created by",
         creator + " at " + When(made) + (c.module.empty() ? "" : "; modules " + c.module) +
             "; phase " + c.phase + (step.empty() ? "" : "; " + step) +
             (c.call_site.empty() ? "" : "; called from " + c.call_site),
         "{\"op\":" + JsonString(op) + ",\"overloads\":[" + overloads_json +
             "],\"module\":" + JsonString(c.module) + ",\"phase\":" + JsonString(c.phase) +
             ",\"call_site\":" + JsonString(c.call_site) + ",\"step\":" + JsonString(step) + "}");
}

// The creating node's inputs, and the nodes that read this version.
void Explainer::Flow(Facts& f, KeySlot key, Version v, uint32_t made) const {
  std::string inputs, inputs_json, readers, readers_json;
  for (const FlowNode& n : g_.nodes()) {
    bool makes = false, reads = false;
    for (const FlowEdge* e = g_.begin(n); e != g_.end(n); ++e) {
      makes |=
          e->key() == key && (e->is_output() || e->is_intermediate()) && e->output_version() == v;
      reads |= e->key() == key && e->is_input() && e->input() == v && e->mutated == 0;
    }
    if (makes) {
      for (const FlowEdge* e = g_.begin(n); e != g_.end(n); ++e) {
        if (!e->is_input() || (e->key() == key)) continue;
        const std::string in_name = Tv(kt_, e->key(), e->input());
        const std::string cat(CategoryName(in_.categories.Get(e->key(), e->input())));
        inputs += inputs.empty() ? "" : ", ";
        inputs.append(in_name).append(" ").append(cat);
        inputs_json += std::string(inputs_json.empty() ? "" : ",") +
                       "{\"tensor\":" + JsonString(in_name) + ",\"category\":" + JsonString(cat) +
                       "}";
      }
    }
    if (reads) {
      const std::string op = trace_.Name(trace_.events[n.event]);
      readers += (readers.empty() ? "" : ", ") + op + " at " + When(n.event);
      readers_json += std::string(readers_json.empty() ? "" : ",") + "{\"op\":" + JsonString(op) +
                      ",\"phase\":" + JsonString(ContextOf(trace_, in_.tree, n.event).phase) + "}";
    }
  }
  if (made != kNone32)
    f.Line("its creator read", inputs.empty() ? "no other tensor" : inputs,
           "[" + inputs_json + "]");
  f.Line("read by", readers.empty() ? "no op" : readers, "[" + readers_json + "]");
}

// The storage's lifetime, from the timeline.
void Explainer::Storage(Facts& f, KeySlot key) const {
  std::string life;
  for (const TimelineEvent& e : in_.timeline) {
    if (e.key() != key) continue;
    const char* what = e.action == Action::kPreexisting        ? "existed before profiling"
                       : e.action == Action::kCreate           ? "allocated"
                       : e.action == Action::kIncrementVersion ? "written"
                                                               : "freed";
    life += (life.empty() ? "" : ", ") + std::string(what) +
            (e.time >= 0 ? " at " + MsAfter(e.time, first_) : "") +
            // An increment names the version it replaces (PyTorch's timeline).
            (e.action == Action::kIncrementVersion
                 ? " (v" + std::to_string(e.version().value()) + " -> v" +
                       std::to_string(e.version().next().value()) + ")"
                 : "");
  }
  if (life.find("freed") == std::string::npos)
    life += life.empty() ? "alive at the end" : ", alive at the end";
  f.Line("storage", life, JsonString(life));
}

// The passes that decided; closes the JSON object.
void Explainer::DecidedBy(Facts& f, KeySlot key, Version v) const {
  std::string why, why_json;
  for (size_t s = 0; s < steps_.size(); ++s) {
    for (const PassChange& c : steps_[s].changes) {
      if (c.key != key || c.version != v) continue;
      why += "\n    pass " + std::to_string(s + 1) + " of " + std::to_string(steps_.size()) + ", " +
             steps_[s].label + ": " + std::string(CategoryName(c.before)) + " -> " +
             std::string(CategoryName(c.after)) + "\n      rule: " + steps_[s].rule;
      why_json += std::string(why_json.empty() ? "" : ",") +
                  "{\"pass\":" + JsonString(steps_[s].label) +
                  ",\"from\":" + JsonString(std::string(CategoryName(c.before))) +
                  ",\"to\":" + JsonString(std::string(CategoryName(c.after))) +
                  ",\"rule\":" + JsonString(steps_[s].rule) + "}";
    }
  }
  if (why.empty()) why = " no pass's rule applied, so it stays unknown";
  f.text += "  decided by:" + why + "\n";
  f.json += ",\"decided_by\":[" + why_json + "]}";
}

}  // namespace

std::optional<TensorRef> ParseTensorRef(std::string_view s) {
  if (!s.empty() && (s[0] == 'T' || s[0] == 't')) s.remove_prefix(1);
  auto number = [](std::string_view d, int64_t* out) {
    if (d.empty() || d.size() > 15) return false;
    int64_t v = 0;
    for (const char c : d) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + (c - '0');
    }
    *out = v;
    return true;
  };
  TensorRef ref;
  const auto sep = s.find_first_of(":(");
  if (!number(s.substr(0, sep), &ref.id)) return std::nullopt;
  if (sep == std::string_view::npos) return ref;
  std::string_view v = s.substr(sep + 1);
  if (s[sep] == '(') {
    if (v.empty() || v.back() != ')') return std::nullopt;
    v.remove_suffix(1);
  }
  if (!v.empty() && (v[0] == 'v' || v[0] == 'V')) v.remove_prefix(1);
  int64_t version = 0;
  if (!number(v, &version) || version > kMaxVersion) return std::nullopt;
  ref.version = static_cast<int32_t>(version);
  return ref;
}

Expected<std::string> ExplainTensor(const ExplainTensorInput& x, const TensorRef& ref, bool json) {
  const KeyTable& kt = x.in.keys;
  std::vector<KeySlot> keys;
  for (const KeySlot k : kt.slots()) {
    if (kt[k].id.value() == ref.id) keys.push_back(k);
  }
  if (keys.empty()) return Status::Error("no tensor T" + std::to_string(ref.id) + " in the trace");
  const Explainer explainer(x, keys);
  std::string out;
  size_t explained = 0;
  for (const KeySlot key : keys) {
    const Version last = std::max(x.in.graph.last_version(key), Version(0));
    for (Version v(0); v <= last; v = v.next()) {
      if (ref.version && *ref.version != v.value()) continue;
      ++explained;
      const Facts f = explainer.Explain(key, v);
      out += json ? f.json + "\n" : Tv(kt, key, v) + "\n" + f.text;
    }
  }
  if (explained == 0) {
    return Status::Error("T" + std::to_string(ref.id) + " has no version " +
                         std::to_string(*ref.version));
  }
  return out;
}

}  // namespace memtl

// memtl explain of an allocation in a trace without tensors (explain.h):
// its inferred category and the rule that gave it (core/infer/), the op
// that made it with its modules, phase and call site, and its free.
#include <string>

#include "core/explain/explain.h"
#include "core/explain/peak.h"

namespace memtl {

namespace {

// "aten::mm at 1.234 ms; modules ...; phase ...; called from ..." for the
// allocation or free at `event`, with its innermost op.
std::string Where(const ExplainInput& in, uint32_t event, int64_t first, std::string* json) {
  const Trace& t = in.trace;
  std::string op = "[memory] (in no op)";
  for (uint32_t p = t.events[event].parent; p != kNone32; p = t.events[p].parent) {
    if (t.events[p].kind != EventKind::kOp) continue;
    op = t.Name(t.events[p]);
    break;
  }
  const EventContext c = ContextOf(t, in.tree, event);
  *json = "{\"op\":" + JsonString(op) + ",\"module\":" + JsonString(c.module) +
          ",\"phase\":" + JsonString(c.phase) + ",\"call_site\":" + JsonString(c.call_site) +
          ",\"ms\":" + std::to_string(static_cast<double>(t.event_t0[event] - first) / 1e6) + "}";
  return op + " at " + MsAfter(t.event_t0[event], first) +
         (c.module.empty() ? "" : "; modules " + c.module) + "; phase " + c.phase +
         (c.call_site.empty() ? "" : "; called from " + c.call_site);
}

}  // namespace

std::optional<uint32_t> ParseAllocationRef(std::string_view s) {
  if (s.size() < 2 || (s[0] != 'A' && s[0] != 'a') || s.size() > 11) return std::nullopt;
  uint64_t v = 0;
  for (const char c : s.substr(1)) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v >= kNone32) return std::nullopt;
  return static_cast<uint32_t>(v);
}

Expected<std::string> ExplainAllocation(const ExplainInput& in, uint32_t alloc, bool json) {
  const Trace& t = in.trace;
  if (in.inferred == nullptr)
    return Status::Error("A" + std::to_string(alloc) +
                         ": allocations are named so only in a trace without tensors (a Kineto "
                         "trace); name a tensor, T12");
  const InferredCategories& inf = *in.inferred;
  if (alloc >= t.allocs.size())
    return Status::Error("no allocation A" + std::to_string(alloc) + " in the trace (A0 to A" +
                         std::to_string(t.allocs.size() - 1) + ")");
  // A free, or an allocation at a live address, is explained as the
  // allocation it pairs with.
  const uint32_t a = inf.pair[alloc] != kNone32 ? inf.pair[alloc] : alloc;
  uint32_t event = kNone32, free_event = kNone32;
  for (uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.events[e].kind != EventKind::kAlloc) continue;
    const uint32_t r = t.events[e].payload;
    if (r == a) event = e;
    if (r != a && inf.pair[r] == a && t.allocs[r].bytes < 0) free_event = e;
  }
  int64_t first = -1;
  for (const TimelineEvent& e : in.timeline)
    if (e.time >= 0) first = first < 0 ? e.time : std::min(first, e.time);
  if (first < 0) first = 0;
  const AllocInfo& info = t.allocs[a];
  const std::string name = "A" + std::to_string(alloc);
  const std::optional<Category> category = inf.Get(a);
  const InferRule rule = inf.rule[a];
  const int64_t bytes = info.bytes > 0 ? info.bytes : -info.bytes;
  std::string text = name + (a != alloc ? " (pairs with A" + std::to_string(a) + ")" : "") + "\n";
  std::string j = "{\"allocation\":" + std::to_string(alloc) +
                  ",\"category\":" + JsonString(std::string(CategoryName(category))) +
                  ",\"inferred\":true";
  text += "  category: " + CategoryLabel(category, true) + "\n";
  text += "  size: " + HumanBytes(bytes) + " (" + std::to_string(bytes) + " bytes) on " +
          t.devices[info.device].name + "\n";
  j += ",\"bytes\":" + std::to_string(bytes) +
       ",\"device\":" + JsonString(t.devices[info.device].name);
  std::string where_json = "null", free_json = "null";
  if (info.bytes < 0) {
    text += "  allocated: before the profile\n";
    free_event = event;
  } else if (FromBeforeProfile(rule)) {
    text += "  allocated: before the profile (the allocator's total when profiling began)\n";
  } else if (event != kNone32) {
    text += "  allocated by: " + Where(in, event, first, &where_json) + "\n";
  }
  if (free_event != kNone32) {
    text += "  freed by: " + Where(in, free_event, first, &free_json) + "\n";
  } else if (info.bytes > 0) {
    text += "  freed: never (alive at the end)\n";
  }
  j += ",\"allocated_by\":" + where_json + ",\"freed_by\":" + free_json;
  text += "  decided by: inference rule \"" + std::string(InferRuleName(rule)) +
          "\": " + std::string(InferRuleText(rule)) + "\n";
  text +=
      "  (inferred, not proven: the trace records no tensors, so the category comes from the "
      "scopes around the allocation and its lifetime, as docs/trace-format.md \"Inferred "
      "categories\" says; an execution trace "
      "of the same run, --et, proves categories)\n";
  j += ",\"rule\":" + JsonString(InferRuleName(rule)) +
       ",\"rule_text\":" + JsonString(InferRuleText(rule)) + "}";
  return json ? j + "\n" : text;
}

}  // namespace memtl

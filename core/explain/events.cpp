// `memtl events` (events.h).
#include "core/explain/events.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <string_view>

#include "core/explain/names.h"
#include "core/explain/peak.h"

namespace memtl {

namespace {

// Per key slot, the event of the last node that freed it (kNone32: none).
PerKey<uint32_t> FreerOfKeys(const DataFlowGraph& g, uint32_t num_keys) {
  PerKey<uint32_t> freer(num_keys, kNone32);
  for (const FlowNode& n : g.nodes()) {
    for (const FlowEdge* e = g.begin(n); e != g.end(n); ++e) {
      if (e->is_deletion()) freer[e->key()] = n.event;
    }
  }
  return freer;
}

}  // namespace

std::string FormatEvents(const ExplainInput& in, EventsFormat format) {
  const Trace& trace = in.trace;
  const DataFlowGraph& g = in.graph;
  const PerValue<uint32_t> creator = CreatorOfValues(g);
  const PerKey<uint32_t> freer = FreerOfKeys(g, in.keys.size());
  const TensorNames names = NameModelState(in, nullptr);
  int64_t first = -1;
  for (const TimelineEvent& e : in.timeline) {
    if (e.time >= 0) first = first < 0 ? e.time : std::min(first, e.time);
  }
  std::string out;
  if (format == EventsFormat::kTsv)
    out =
        "time_ms\taction\ttensor\tversion\tbytes\tshape\tcategory\tdevice\top\tmodule\tphase\t"
        "name\n";
  char buf[512];
  for (const TimelineEvent& e : in.timeline) {
    // The node behind this change, when the graph names one.
    uint32_t op = kNone32;
    if (e.has_key() && g.last_version(e.key()).valid()) {
      switch (e.action) {
        case Action::kPreexisting:
          break;
        case Action::kCreate:
          op = creator[g.value(e.key(), Version(0))];
          break;
        case Action::kIncrementVersion:
          if (e.version().next() <= g.last_version(e.key()))
            op = creator[g.value(e.key(), e.version().next())];
          break;
        case Action::kDestroy:
          op = freer[e.key()];
          break;
      }
    }
    const std::string op_name = op != kNone32                      ? trace.Name(trace.events[op])
                                : e.action == Action::kPreexisting ? "before the profile"
                                                                   : "";
    const EventContext where = op != kNone32 ? ContextOf(trace, in.tree, op) : EventContext{};
    const std::string tensor =
        e.has_key() ? std::to_string(in.keys[e.key()].id.value()) : std::string();
    const std::string_view shape = e.has_key() ? ShapeOf(in, e.key()) : std::string_view();
    std::string category(e.has_key() ? CategoryName(in.categories.Get(e.key(), e.version()))
                                     : CategoryLabel(e.inferred(), true));
    if (e.action == Action::kIncrementVersion && e.has_key()) {
      const std::string next(CategoryName(in.categories.Get(e.key(), e.version().next())));
      if (next != category) category += " -> " + next;
    }
    const std::string& device = trace.devices[e.device].name;
    // A model's state by its name (names.h), which the text shows in place
    // of the module, as memtl peak does.
    const auto named = e.has_key() ? names.find(e.key().value()) : names.end();
    const std::string_view name =
        named != names.end() ? std::string_view(named->second.text) : std::string_view();
    const std::string action(ActionName(e.action));
    // Times before 0 print as "-"; two times from 0 up differ by less than
    // 2^63, but one of -2^63 and 2^63-1 would not.
    std::string time = "-";
    if (e.time >= 0) {
      std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(e.time - first) / 1e6);
      time = buf;
    }
    switch (format) {
      case EventsFormat::kText: {
        const std::string key =
            e.has_key() ? "T" + tensor + "(v" + std::to_string(e.version().value()) + ")"
                        : "[memory]";
        std::snprintf(buf, sizeof buf, "%10s  %-18s %-16s %12lld B  ", time.c_str(), action.c_str(),
                      key.c_str(), static_cast<long long>(e.bytes));
        std::string line = buf;
        // The shape in a column of its own width (most are shorter); names
        // from the trace escaped so that none breaks a row (TextCell).
        const std::string shape_cell = TextCell(shape);
        line.append(shape_cell);
        if (shape_cell.size() < 24) line.append(24 - shape_cell.size(), ' ');
        std::snprintf(buf, sizeof buf, " %-32s %-6s %-28s %-9s %s\n", category.c_str(),
                      device.c_str(), TextCell(op_name).c_str(), where.phase.c_str(),
                      TextCell(named != names.end() ? named->second.text : where.module).c_str());
        line += buf;
        while (line.size() > 1 && line[line.size() - 2] == ' ') line.erase(line.size() - 2, 1);
        out += line;
        break;
      }
      case EventsFormat::kTsv: {
        const std::string version =
            e.has_key() ? std::to_string(e.version().value()) : std::string();
        const std::string bytes = std::to_string(e.bytes);
        // A tab or a newline in a name from the trace would break the row.
        const std::string cells[] = {TextCell(shape), TextCell(op_name), TextCell(where.module),
                                     TextCell(name)};
        const std::string_view fields[] = {time,     action,   tensor,      version,
                                           bytes,    cells[0], category,    device,
                                           cells[1], cells[2], where.phase, cells[3]};
        for (size_t k = 0; k < std::size(fields); ++k) {
          if (k > 0) out += '\t';
          out.append(fields[k]);
        }
        out += '\n';
        break;
      }
      case EventsFormat::kJsonLines:
        out += "{\"time_ms\":" + (e.time < 0 ? std::string("null") : time) +
               ",\"action\":" + JsonString(action) +
               ",\"tensor\":" + (e.has_key() ? tensor : std::string("null")) + ",\"version\":" +
               (e.has_key() ? std::to_string(e.version().value()) : std::string("null")) +
               ",\"bytes\":" + std::to_string(e.bytes) +
               ",\"shape\":" + (shape.empty() ? std::string("null") : JsonString(shape)) +
               ",\"category\":" + JsonString(category) + ",\"device\":" + JsonString(device) +
               ",\"op\":" + JsonString(op_name) + ",\"module\":" + JsonString(where.module) +
               ",\"phase\":" + JsonString(where.phase) +
               ",\"name\":" + (name.empty() ? std::string("null") : JsonString(name)) + "}\n";
        break;
    }
  }
  return out;
}

}  // namespace memtl

// The execution trace's schemas for the join (et_schemas.h).
#include "core/read/et/et_schemas.h"

#include <algorithm>
#include <map>
#include <utility>

#include "core/model/quote.h"
#include "core/schema/schema.h"

namespace memtl::read {

std::vector<std::pair<std::string, std::vector<std::string>>> EtSchemaRecords(
    const ExecutionTrace& et, const std::vector<uint32_t>& node_of_op, Diagnostics& diagnostics) {
  const SchemaRegistry builtin = SchemaRegistry::Builtin(et.strings);
  // By name: the overloads the nodes ran (name, overload, text).
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> ran;
  uint64_t unparsed = 0;
  std::string unparsed_example;
  for (const uint32_t node_index : node_of_op) {
    if (node_index == kNone32) continue;
    const EtNode& node = et.nodes[node_index];
    const std::string& text = et.strings.Get(node.schema);
    const std::string& name = et.strings.Get(node.name);
    if (text.empty() || name.find("::") == std::string::npos) continue;
    auto& overloads = ran[name];
    if (std::any_of(overloads.begin(), overloads.end(),
                    [&](const auto& o) { return o.second == text; }))
      continue;
    const auto parsed = ParseSchema(text);
    if (!parsed.ok() || parsed.value().name != name) {
      if (unparsed++ == 0) unparsed_example = Quote(text);
      continue;
    }
    overloads.emplace_back(parsed.value().overload, text);
  }
  if (unparsed > 0)
    diagnostics.Add("execution-trace op schema that memtl cannot parse (the op matches no schema)",
                    unparsed_example, unparsed);
  std::map<std::string, std::vector<std::string>> by_name;
  for (const auto& [name, overloads] : ran) {
    const std::vector<std::string> known = builtin.Texts(name);
    if (std::all_of(overloads.begin(), overloads.end(), [&](const auto& o) {
          return std::find(known.begin(), known.end(), o.second) != known.end();
        }))
      continue;
    std::vector<std::string>& schemas = by_name[name];
    for (const auto& o : overloads) schemas.push_back(o.second);
    for (const std::string& text : known) {
      const auto parsed = ParseSchema(text);
      if (!parsed.ok()) continue;
      if (std::none_of(overloads.begin(), overloads.end(),
                       [&](const auto& o) { return o.first == parsed.value().overload; }))
        schemas.push_back(text);
    }
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> records;
  for (auto& [name, schemas] : by_name)
    if (!schemas.empty()) records.emplace_back(name, std::move(schemas));
  return records;
}

int EtTensorLists::At(const EtNode& node, uint32_t index) {
  auto it = by_schema_.find(node.schema);
  if (it == by_schema_.end()) {
    std::vector<bool> lists;
    if (const auto parsed = ParseSchema(et_.strings.Get(node.schema)); parsed.ok()) {
      for (const SchemaArgument& arg : parsed.value().arguments) {
        const SchemaType* type = &arg.type;
        if (type->kind == SchemaType::kOptional) type = &type->elements[0];
        lists.push_back(type->kind == SchemaType::kList &&
                        type->elements[0].kind == SchemaType::kTensor);
      }
    }
    it = by_schema_.emplace(node.schema, std::move(lists)).first;
  }
  if (index >= it->second.size()) return -1;
  return it->second[index] ? 1 : 0;
}

}  // namespace memtl::read

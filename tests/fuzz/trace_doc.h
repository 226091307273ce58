// What fuzz_structured's mutator asks of a trace as lines of JSON
// (fuzz_json.h): its records, its values by kind or key, and the shape of
// its tree (subtrees in pre-order, ids, renumbering). No randomness here:
// the mutator (structured_mutator.cpp) makes the choices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tests/fuzz/fuzz_json.h"

namespace memtl_fuzz {

// `j` and every value under it, depth first, appended to `out`.
void Collect(Json* j, std::vector<Json*>* out);
// The records (not the header), those that parsed as objects, by line.
std::vector<size_t> Records(const Doc& d);
// Every value of `kind` in the parsed lines, depth first.
std::vector<Json*> AllValues(Doc& d, Json::Kind kind);
// Values of member `key` anywhere.
std::vector<Json*> ValuesOfKey(Doc& d, std::string_view key);
// The records from `line` to the end of its subtree (pre-order: its
// descendants follow it), as the line after the last.
size_t SubtreeEnd(Doc& d, size_t line);
// The largest record id ("i"), -1 when none.
int64_t MaxId(Doc& d);
// Numbers the records 0, 1, ... in file order and maps the parents to the
// new numbers (a child whose parent does not precede it becomes a root).
void Renumber(Doc& d);

}  // namespace memtl_fuzz

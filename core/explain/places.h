// The places of the memory tables (tables.cpp): the ops, module calls and
// user frames around each allocation, as a trie, and the names around each
// place, found in one walk of the trie.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/explain/tables.h"
#include "core/model/trace.h"

namespace memtl::tables_detail {

// The ops, module calls and frames of the user's code around an event, as
// a trie: place 0 is outside any of them; a child adds an op (its name), a
// module call, a user frame (a python call IsUserFrame names), or the line
// of a user frame that made the call below it (where the trace says).
class Places {
 public:
  enum class Kind : uint8_t { kOp, kModule, kCallSite, kLine };
  struct Place {
    uint32_t parent = kNone32;
    // String id of the op's or the python call's name; a kLine's line.
    uint32_t name = 0;
    Kind kind = Kind::kOp;
    uint8_t modules = 0;       // module calls around it, itself included
    uint32_t event = kNone32;  // the first event that made it (for ModulePath)
  };

  Places() { places_.push_back(Place{}); }

  // String ids are below 2^30 (each string is at least a byte of the
  // trace's text and a std::string here: far more than memory holds).
  // A module call deeper than kMaxModuleDepth is counted with the module
  // around it: each module row is named by its whole path, so the rows of
  // a deeper nest would hold text that grows with the square of its depth.
  uint32_t Child(uint32_t parent, uint32_t name, Kind kind, uint32_t event) {
    const uint8_t modules = places_[parent].modules;
    if (kind == Kind::kModule && modules >= kMaxModuleDepth) return parent;
    const uint64_t key =
        (uint64_t{parent} << 32) | (uint64_t{name} << 2) | static_cast<uint64_t>(kind);
    const auto [it, added] = index_.try_emplace(key, static_cast<uint32_t>(places_.size()));
    if (added) {
      const auto depth = static_cast<uint8_t>(modules + (kind == Kind::kModule ? 1 : 0));
      places_.push_back(Place{parent, name, kind, depth, event});
    }
    return it->second;
  }
  const Place& operator[](uint32_t p) const { return places_[p]; }
  size_t size() const { return places_.size(); }

 private:
  std::vector<Place> places_;
  std::unordered_map<uint64_t, uint32_t> index_;
};

// The op names and call sites around each place, each once, without a list
// per place (a nest of N ops would hold N^2 names): per place its innermost
// op and call site (the self rows), and the places where a name enters the
// names around the places under it, or leaves them (a frame's bare call
// site gives way to the frame at the line that made the call below it):
// a name's total is what lies under the places it enters, less what lies
// under those it leaves.
struct PlaceLabels {
  struct Label {
    uint32_t name = kNone32;  // string id: an op's name or a user frame's
    uint32_t line = 0;        // a call site's line (0: not said)
    bool op = false;
    bool operator==(const Label&) const = default;
  };
  struct Change {
    uint32_t place;
    Label label;
    bool leaves;
  };
  std::vector<uint32_t> innermost_op;  // string id; kNone32: outside any op
  std::vector<Label> innermost_site;   // name kNone32: no call site
  std::vector<Change> changes;
  std::vector<uint32_t> module_place;     // the innermost module call's place; 0: none
  std::vector<std::string> module_paths;  // by place, for module calls' places only
  std::string ModulePathOf(uint32_t p) const { return module_paths[module_place[p]]; }
};

// The labels of every place of `places`.
PlaceLabels LabelPlaces(const Trace& trace, const Places& places);

}  // namespace memtl::tables_detail

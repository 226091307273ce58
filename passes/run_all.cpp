// Runs the passes of passes.def in order.
#include <cstdint>
#include <vector>

#include "passes/pass.h"

namespace memtl {

void RunAllPasses(const PassInput& in, CategoryDict& categories) {
  categories.Reset(in.keys.id_slot, in.keys.num_ids, in.graph.value_begin());
  CategoryWriter out(categories);
#define MEMTL_PASS(Name, label, rule) Run##Name(in, out);
#include "passes/passes.def"
#undef MEMTL_PASS
}

std::vector<PassStep> RunAllPassesTraced(const PassInput& in, CategoryDict& categories) {
  const KeyTable& kt = in.keys;
  const auto& vb = in.graph.value_begin();
  categories.Reset(kt.id_slot, kt.num_ids, vb);
  CategoryWriter out(categories);
  // Per value (the graph's numbering), its category; kNumCategories: none.
  auto snapshot = [&] {
    std::vector<uint8_t> s;
    s.reserve(vb.empty() ? 0 : vb.back());
    for (const KeySlot k : kt.slots()) {
      const int32_t n = in.graph.num_versions(k);
      for (Version v(0); v.value() < n; v = v.next()) {
        const auto c = categories.Get(k, v);
        s.push_back(c ? static_cast<uint8_t>(*c) : static_cast<uint8_t>(kNumCategories));
      }
    }
    return s;
  };
  auto category = [](uint8_t c) {
    return c == kNumCategories ? std::nullopt : std::optional<Category>(static_cast<Category>(c));
  };
  std::vector<PassStep> steps;
  auto run = [&](const char* label, const char* rule, auto pass) {
    const auto before = snapshot();
    pass(in, out);
    const auto after = snapshot();
    PassStep step{label, rule, {}};
    size_t i = 0;
    for (const KeySlot k : kt.slots()) {
      const int32_t n = in.graph.num_versions(k);
      for (Version v(0); v.value() < n; v = v.next(), ++i) {
        if (before[i] != after[i])
          step.changes.push_back({k, v, category(before[i]), category(after[i])});
      }
    }
    steps.push_back(std::move(step));
  };
#define MEMTL_PASS(Name, label, rule) run(label, rule, Run##Name);
#include "passes/passes.def"
#undef MEMTL_PASS
  return steps;
}

}  // namespace memtl

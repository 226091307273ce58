// Runs the passes of passes.def in order.
#include "passes/pass.h"

namespace memtl {

void RunAllPasses(const PassInput& in, CategoryDict& categories) {
  categories.Reset(in.trace.key_table.id_slot, in.trace.key_table.num_ids, in.graph.value_begin());
  CategoryWriter out(categories);
#define MEMTL_PASS(Name, label) Run##Name(in, out);
#include "passes/passes.def"
#undef MEMTL_PASS
}

}  // namespace memtl

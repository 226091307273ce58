// The last step of reading a torch 1.13 trace (partial_tensors.h).
#include "core/read/memtl/partial_tensors.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "core/model/flat_map.h"
#include "core/model/large_array.h"

namespace memtl {

PartialTensorCounts ResolvePartialTensors(Trace& trace) {
  PartialTensorCounts stats;
  struct Seen {
    int64_t t;
    uint32_t tensor;
  };
  // Only the storage pointers that python-tracer tensors name are indexed;
  // a bit filter turns away most op inputs before the hash lookup. It has
  // at least 64 bits per indexed pointer (at most one op input in 64 gets
  // past it by chance), so its filtering does not wane as traces grow.
  // The op inputs seen per pointer are kept in one array, grouped by
  // pointer after the scan (a vector per pointer would leave hundreds of
  // thousands of small blocks in the heap at 10^7 events).
  absl::flat_hash_map<uint64_t, uint32_t> list_of;
  std::vector<uint64_t> ptrs;  // by list
  for (size_t ti = 0; ti < trace.tensors.size(); ++ti) {
    const uint64_t ptr = trace.tensor_ptrs[ti];
    if (trace.tensors[ti].partial &&
        list_of.try_emplace(ptr, static_cast<uint32_t>(ptrs.size())).second) {
      ptrs.push_back(ptr);
    }
  }
  if (ptrs.empty()) return stats;
  int filter_bits = 16;
  while (filter_bits < 40 && (size_t{1} << filter_bits) < 64 * ptrs.size()) ++filter_bits;
  std::vector<uint64_t> filter(size_t{1} << (filter_bits - 6), 0);
  auto bit = [filter_bits](uint64_t ptr) { return Mix64(ptr) >> (64 - filter_bits); };
  for (uint64_t ptr : ptrs) filter[bit(ptr) >> 6] |= uint64_t{1} << (bit(ptr) & 63);
  auto list_of_ptr = [&](uint64_t ptr) -> uint32_t {
    const uint64_t b = bit(ptr);
    if ((filter[b >> 6] >> (b & 63) & 1) == 0) return kNone32;
    const auto it = list_of.find(ptr);
    return it == list_of.end() ? kNone32 : it->second;
  };
  // Two scans of the op inputs: the first counts the sightings of each
  // pointer, the second puts them in place (in record order within a
  // pointer), so no array grows; each pointer's sightings are then sorted by
  // time, stably (the later record wins a tie below).
  auto for_each_sighting = [&](uint32_t op, auto&& fn) {
    auto seen = [&](uint32_t ti) {
      if (ti == kNone32 || trace.tensors[ti].partial) return;
      const uint32_t list = list_of_ptr(trace.tensor_ptrs[ti]);
      if (list != kNone32) fn(list, ti);
    };
    for (const Arg arg : trace.ArgsOf(op)) {
      if (arg.kind == ArgKind::kTensor) seen(arg.begin);
      for (uint32_t k = 0; arg.kind == ArgKind::kTensorList && k < arg.count; ++k) {
        seen(trace.list_items[arg.begin + k]);
      }
    }
  };
  // The counting scan reads the op records only, and marks the ops with a
  // sighting; the filling scan walks the events (for their times) and
  // reads the arguments of the marked ops only.
  std::vector<uint32_t> list_begin(ptrs.size() + 1, 0);
  std::vector<bool> op_sees(trace.ops.size(), false);
  for (uint32_t o = 0; o < trace.ops.size(); ++o) {
    for_each_sighting(o, [&](uint32_t list, uint32_t) {
      ++list_begin[list + 1];
      op_sees[o] = true;
    });
  }
  for (size_t l = 0; l < ptrs.size(); ++l) list_begin[l + 1] += list_begin[l];
  std::vector<Seen> all(list_begin.back());
  {
    std::vector<uint32_t> next(list_begin.begin(), list_begin.end() - 1);
    for (uint32_t ei = 0; ei < trace.events.size(); ++ei) {
      const Event& e = trace.events[ei];
      if (e.kind != EventKind::kOp || !op_sees[e.payload]) continue;
      const int64_t t0 = trace.event_t0[ei];
      for_each_sighting(e.payload, [&](uint32_t list, uint32_t ti) {
        all[next[list]++] = Seen{t0, ti};
      });
    }
  }
  FreeArray(op_sees);
  for (size_t l = 0; l < ptrs.size(); ++l) {
    std::stable_sort(all.begin() + list_begin[l], all.begin() + list_begin[l + 1],
                     [](const Seen& a, const Seen& b) { return a.t < b.t; });
  }
  auto resolve = [&](uint32_t ti, int64_t when) {
    if (ti == kNone32 || !trace.tensors[ti].partial) return;
    const uint32_t l = list_of_ptr(trace.tensor_ptrs[ti]);
    if (l == kNone32 || list_begin[l] == list_begin[l + 1]) {
      ++stats.dropped;
      return;
    }
    const Seen* first = all.data() + list_begin[l];
    const Seen* last = all.data() + list_begin[l + 1];
    // First occurrence at or after `when`, compared with the last one before.
    const Seen* after =
        std::lower_bound(first, last, when, [](const Seen& s, int64_t t) { return s.t < t; });
    const Seen* best = nullptr;
    if (after != last) best = after;
    if (after != first) {
      const Seen& before = *(after - 1);
      // Distances in 64 unsigned bits: exact for any two int64 times in
      // order, where the signed difference can overflow.
      auto gap = [](int64_t a, int64_t b) { return uint64_t(b) - uint64_t(a); };  // a <= b
      if (best == nullptr || gap(before.t, when) < gap(when, best->t)) best = &before;
    }
    // Among equal times prefer the later record.
    if (best != nullptr) {
      const Seen* last_same =
          std::upper_bound(first, last, best->t, [](int64_t t, const Seen& s) { return t < s.t; });
      best = last_same - 1;
    }
    trace.tensors[ti] = trace.tensors[best->tensor];
    trace.tensor_ptrs[ti] = trace.tensor_ptrs[best->tensor];
    ++stats.resolved;
  };
  for (uint32_t ei = 0; ei < trace.events.size(); ++ei) {
    const Event& e = trace.events[ei];
    if (e.kind != EventKind::kPy) continue;
    const int64_t t0 = trace.event_t0[ei];
    const PyInfo py = trace.Py(e.payload);
    auto params = [&](uint32_t begin, uint32_t count) {
      for (uint32_t p = begin; p < begin + count; ++p) {
        resolve(trace.params[p].tensor, t0);
        resolve(trace.params[p].grad, t0);
        for (uint32_t s = 0; s < trace.params[p].state_count; ++s) {
          resolve(trace.states[trace.params[p].state_begin + s].tensor, t0);
        }
      }
    };
    if (py.module() != kNone32)
      params(trace.modules[py.module()].params_begin, trace.modules[py.module()].params_count);
    if (py.optimizer() != kNone32) {
      const auto& o = trace.optimizers[py.optimizer()];
      params(o.params_begin, o.params_count);
      for (uint32_t s = o.state_begin; s < o.state_begin + o.state_count; ++s) {
        resolve(trace.states[s].tensor, t0);
      }
    }
  }
  return stats;
}

}  // namespace memtl

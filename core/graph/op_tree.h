// The op tree (PyTorch's OpTree): the trace's events in depth-first pre-order
// and sorted by start time, plus per-op schema facts (which overloads match,
// which inputs are written) computed once and shared by later stages.
#pragma once

#include <vector>

#include "core/model/key_table.h"
#include "core/model/trace.h"
#include "core/schema/schema.h"

namespace memtl {

// The kinds of op `op`'s arguments as the schema matcher takes them (a
// tensor counts only when identity gave it a key), into `observed`.
void ObservedArgs(const Trace& trace, const KeyTable& keys, uint32_t op,
                  std::vector<Observed>& observed);

// An order over the trace's events: an index array, or, when `order` is
// null, the events in index order (a trace written in pre-order, as the
// format asks, needs no array for its pre-order).
class EventOrder {
 public:
  class Iterator : public ValueIterator<uint32_t> {
   public:
    Iterator(const uint32_t* order, uint32_t p) : order_(order), p_(p) {}
    uint32_t operator*() const { return order_ != nullptr ? order_[p_] : p_; }
    Iterator& operator++() {
      ++p_;
      return *this;
    }
    bool operator==(const Iterator& o) const { return p_ == o.p_; }

   private:
    const uint32_t* order_;
    uint32_t p_;
  };
  EventOrder(const uint32_t* order, uint32_t size) : order_(order), size_(size) {}
  uint32_t operator[](uint32_t p) const { return order_ != nullptr ? order_[p] : p; }
  uint32_t size() const { return size_; }
  Iterator begin() const { return Iterator(order_, 0); }
  Iterator end() const { return Iterator(order_, size_); }

 private:
  const uint32_t* order_;
  uint32_t size_;
};

class OpTree {
 public:
  OpTree(const Trace& trace, const KeyTable& keys, const SchemaRegistry& schemas);
  // The orders only (pre-order and start-time order; no arrays when the
  // events already are both): they need no tensor identity, so they can be
  // built while identity runs, and they cost nothing at identity's memory
  // peak. AddFacts adds the rest afterwards: the backward flags (a bit per
  // event) and the schema facts, which read identity's key table (only
  // while they are computed: the tree keeps no reference to it).
  explicit OpTree(const Trace& trace);
  void AddFacts(const KeyTable& keys, const SchemaRegistry& schemas);

  const Trace& trace() const { return trace_; }
  // Event indices in depth-first pre-order (children in index order); the
  // subtree of preorder()[p] is preorder()[p .. subtree_end(p)).
  EventOrder preorder() const {
    return EventOrder(in_index_order_ ? nullptr : preorder_.data(), n_);
  }
  uint32_t position(uint32_t event) const { return in_index_order_ ? event : position_[event]; }
  // One past the last pre-order position of the subtree at position p. A
  // subtree is contiguous in pre-order and every event's parent comes
  // before it, so the subtree ends at the first later event whose parent
  // lies before p (or that has none). It scans the subtree instead of
  // keeping 4 bytes per event: its reader, the data-flow graph, walks each
  // subtree it asks about anyway.
  uint32_t subtree_end(uint32_t p) const {
    const EventOrder pre = preorder();
    uint32_t q = p + 1;
    for (; q < n_; ++q) {
      const uint32_t parent = trace_.events[pre[q]].parent;
      if (parent == kNone32 || position(parent) < p) break;
    }
    return q;
  }
  // The first child of an event (in index order), kNone32 when it has none:
  // the event after it in pre-order, if that is its child.
  uint32_t first_child(uint32_t event) const {
    const uint32_t p = position(event) + 1;
    if (p >= n_) return kNone32;
    const uint32_t next = preorder()[p];
    return trace_.events[next].parent == event ? next : kNone32;
  }
  // Every event, stably sorted by start time over pre-order (pre-order
  // itself when it is already in that order, as it nearly always is).
  EventOrder sorted() const {
    return sorted_is_preorder_ ? preorder() : EventOrder(sorted_.data(), n_);
  }

  // Schema facts of an op event: number of matching overloads (saturating
  // at 255; 0 for other events) and, per input, 1 written / 0 not / -1
  // unknown (empty for other events).
  size_t num_matches(uint32_t event) const {
    const SchemaFacts* f = FactsOf(event);
    return f != nullptr ? f->num_matches : 0;
  }
  std::pair<const int8_t*, size_t> mutability(uint32_t event) const {
    const SchemaFacts* f = FactsOf(event);
    if (f == nullptr) return {nullptr, 0};
    return {mutability_pool_.data() + f->mutability_begin, f->mutability_count};
  }
  // True when the event or one of its ancestors is a backward function.
  bool in_backward(uint32_t event) const { return in_backward_[event]; }

 private:
  const Trace& trace_;
  uint32_t n_ = 0;
  // True when the event array is itself a pre-order (the format's order):
  // then preorder_ and position_ stay empty.
  bool in_index_order_ = false;
  std::vector<uint32_t> preorder_;
  std::vector<uint32_t> position_;
  std::vector<uint32_t> sorted_;
  bool sorted_is_preorder_ = false;
  // The facts depend only on the op's name and the kinds of its arguments,
  // and a trace repeats a few hundred such pairs: each distinct pair's facts
  // are kept once, and each op record (by Event::payload) names its pair's.
  struct SchemaFacts {
    uint32_t mutability_begin = 0;  // into mutability_pool_
    uint32_t mutability_count = 0;
    uint8_t num_matches = 0;
  };
  const SchemaFacts* FactsOf(uint32_t event) const {
    const Event& e = trace_.events[event];
    return e.kind == EventKind::kOp ? &facts_[facts_of_op_[e.payload]] : nullptr;
  }
  std::vector<uint32_t> facts_of_op_;  // per op record: index into facts_
  std::vector<SchemaFacts> facts_;
  std::vector<int8_t> mutability_pool_;
  std::vector<bool> in_backward_;
};

}  // namespace memtl

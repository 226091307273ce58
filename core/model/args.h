// An op's arguments: what the profiler observed at each position, stored
// in the Trace's flat arrays and read as Arg values through an ArgList
// (Trace::ArgsOf).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>

namespace memtl {

// What the profiler observed at one argument position of an op. Only the kind
// matters to the analysis (schema matching); scalar values are not kept.
enum class ArgKind : uint8_t {
  kNone,
  kTensor,
  kTensorList,
  kBool,
  kInt,
  kFloat,
  kComplex,
  kString
};

// The member types of an input iterator whose operator* returns a T by value
// (the model's views: ArgList here, EventOrder in core/graph/op_tree.h).
template <typename T>
struct ValueIterator {
  using iterator_category = std::input_iterator_tag;
  using value_type = T;
  using difference_type = std::ptrdiff_t;
  using pointer = void;
  using reference = T;
};

// One argument of an op as the stages read it (Trace::ArgsOf); the trace does
// not store it in this form (see Trace::arg_kinds).
struct Arg {
  uint32_t begin = 0;  // kTensor: tensor index; kTensorList: index into list_items
  uint32_t count = 0;  // kTensorList: number of elements
  ArgKind kind = ArgKind::kNone;
};

// Whether an argument of this kind has an entry in Trace::arg_refs.
inline bool HasArgRef(ArgKind k) { return k == ArgKind::kTensor || k == ArgKind::kTensorList; }

// An op's arguments in order, as Arg values (Trace::ArgsOf). Iterators hold
// what they read, so they outlive the ArgList they came from.
class ArgList {
 public:
  class Iterator : public ValueIterator<Arg> {
   public:
    Iterator(const ArgKind* kind, const uint32_t* ref, const uint32_t* list_items)
        : kind_(kind), ref_(ref), list_items_(list_items) {}
    Arg operator*() const {
      Arg a;
      a.kind = *kind_;
      if (a.kind == ArgKind::kTensor) {
        a.begin = *ref_;
      } else if (a.kind == ArgKind::kTensorList) {
        a.begin = *ref_ + 1;  // the list's length is stored before its elements
        a.count = list_items_[*ref_];
      }
      return a;
    }
    Iterator& operator++() {
      ref_ += HasArgRef(*kind_) ? 1 : 0;
      ++kind_;
      return *this;
    }
    bool operator==(const Iterator& o) const { return kind_ == o.kind_; }

   private:
    const ArgKind* kind_;
    const uint32_t* ref_;
    const uint32_t* list_items_;
  };
  ArgList(const ArgKind* kinds, const uint32_t* refs, const uint32_t* list_items, uint32_t count)
      : kinds_(kinds), refs_(refs), list_items_(list_items), count_(count) {}
  Iterator begin() const { return Iterator(kinds_, refs_, list_items_); }
  Iterator end() const { return Iterator(kinds_ + count_, refs_, list_items_); }
  uint32_t size() const { return count_; }
  bool empty() const { return count_ == 0; }

 private:
  const ArgKind* kinds_;
  const uint32_t* refs_;
  const uint32_t* list_items_;
  uint32_t count_;
};

}  // namespace memtl

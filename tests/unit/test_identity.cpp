// Identity assignment: ABA on storage pointers, allocations with no tensor,
// storage swaps of a TensorImpl, and the torch 1.13 de-aliasing rule.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "core/graph/op_tree.h"
#include "core/identity/identity.h"
#include "core/model/flat_map.h"
#include "core/read/memtl/trace_reader.h"
#include "trace_text.h"

using namespace memtl;
using namespace memtl::test;

namespace {

// A trace after identity, with identity's result beside it.
struct Identified : Trace {
  KeyTable keys;
};

Identified Identify(const std::string& text) {
  auto r = ReadTraceString(text, "t.trace");
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.status().message()));
  Identified t;
  static_cast<Trace&>(t) = std::move(r.value());
  Diagnostics diag;
  t.keys =
      AssignIdentity(t, test::RecordsOf(t), t.tensor_ptrs, SchemaRegistry::Builtin(), diag).keys;
  return t;
}

// The key identity settled on for a tensor observation or an allocation
// (the key table is its only output); -1 where there is none.
int64_t Id(const Identified& t, uint32_t tensor) {
  const uint32_t s = t.keys.of_tensor.at(tensor);
  return s == kNone32 ? -1 : t.keys.keys[s].id.value();
}
int64_t Aid(const Identified& t, uint32_t tensor) {
  const uint32_t s = t.keys.of_tensor.at(tensor);
  return s == kNone32 ? -1 : t.keys.keys[s].allocation.value();
}
int64_t AllocId(const Identified& t, uint32_t alloc) {
  const uint32_t s = t.keys.of_alloc.at(alloc);
  return s == kNone32 ? -1 : t.keys.keys[s].id.value();
}

}  // namespace

TEST_CASE("identity: a reused storage pointer is a new allocation and a new tensor") {
  const Identified t =
      Identify(Header() + Alloc(0, -1, 1, 100, 16) + Op(1, -1, "aten::relu", 2, 3, T(1, 100)) +
               Alloc(2, -1, 4, 100, -16) + Alloc(3, -1, 5, 100, 16) +
               Op(4, -1, "aten::relu", 6, 7, T(2, 100)));
  CHECK(Aid(t, 0) != Aid(t, 1));
  CHECK(Id(t, 0) != Id(t, 1));
  CHECK(Id(t, 0) >= 0);
  CHECK(AllocId(t, 0) == Id(t, 0));  // the allocation carries its tensor's id
  CHECK(AllocId(t, 1) == Id(t, 0));  // so does the free
  CHECK(AllocId(t, 2) == Id(t, 1));
}

TEST_CASE("identity: allocation ids follow record order when the file is not in it") {
  // In file order the op sees the first allocation of pointer 100; in record
  // order (by start time) the free at t=20 and the new allocation at t=25
  // come before the op at t=30, so the op's tensor is the second storage.
  const Identified t =
      Identify(Header() + Alloc(0, -1, 1, 100, 16) + Op(1, -1, "aten::relu", 30, 31, T(1, 100)) +
               Alloc(2, -1, 20, 100, -16) + Alloc(3, -1, 25, 100, 16));
  REQUIRE(Id(t, 0) >= 0);
  CHECK(AllocId(t, 2) == Id(t, 0));
  CHECK(AllocId(t, 0) == -1);  // the first storage: never seen with a tensor
  CHECK(Aid(t, 0) == t.keys.keys[t.keys.of_alloc.at(2)].allocation.value());
}

TEST_CASE("identity: an allocation never seen with a tensor gets no tensor id") {
  const Identified t =
      Identify(Header() + Alloc(0, -1, 1, 500, 16) + Op(1, -1, "aten::relu", 2, 3, T(1, 100)) +
               Alloc(2, -1, 4, 500, -16));
  CHECK_FALSE(t.keys.SlotOfAlloc(0).valid());
  CHECK_FALSE(t.keys.SlotOfAlloc(1).valid());
  CHECK(Id(t, 0) == 0);
}

TEST_CASE("identity: ids follow PyTorch's order of first allocation id") {
  // The tensor allocated first gets T0 even though it is used second.
  const Identified t = Identify(Header() + Alloc(0, -1, 1, 100, 16) +
                                Op(1, -1, "aten::mul", 2, 5, T(10, 200) + "," + T(11, 100)));
  CHECK(Id(t, 1) == 0);
  CHECK(Id(t, 0) == 1);
}

TEST_CASE("identity: a genuine storage swap keeps the tensor id (1.13 rule)") {
  // resize_(Tensor(a!) self, ...) receives impl 1 with storage 100 and
  // allocates storage 200 for it: the same tensor, a new allocation.
  const Identified t = Identify(Header() + Op(0, -1, "aten::relu", 1, 2, T(1, 100)) +
                                Op(1, -1, "aten::resize_", 3, 6, T(1, 100) + ",null,null") +
                                Alloc(2, 1, 4, 200, 64) + Op(3, -1, "aten::relu", 7, 8, T(1, 200)));
  CHECK(Aid(t, 0) == Aid(t, 1));
  CHECK(Aid(t, 2) != Aid(t, 1));
  CHECK(Id(t, 2) == Id(t, 0));
}

TEST_CASE("identity: a reused TensorImpl address without a swap is a new tensor (1.13 rule)") {
  const Identified t =
      Identify(Header() + Op(0, -1, "aten::relu", 1, 2, T(1, 100)) + Alloc(1, -1, 3, 200, 64) +
               Op(2, -1, "aten::relu", 7, 8, T(1, 200)));
  CHECK(Id(t, 1) != Id(t, 0));
}

TEST_CASE("identity: with producer ids the storage merge of PyTorch 2.x applies directly") {
  // ids=true: impl 1 seen with two storages is one tensor (no 1.13 rule),
  // and the producer's ids are kept.
  const Identified t = Identify(Header(true) + Op(0, -1, "aten::relu", 1, 2, T(1, 100, 4, 0, 1)) +
                                Alloc(1, -1, 3, 200, 64, "cpu", 0, 2) +
                                Op(2, -1, "aten::relu", 7, 8, T(1, 200, 4, 0, 2)));
  CHECK(Id(t, 0) == 0);
  CHECK(Id(t, 1) == 0);
  CHECK(Aid(t, 1) == 2);
}

TEST_CASE("identity: 1.13 python-tracer storage addresses resolve to the nearest op input") {
  const std::string py =
      R"({"k":"py","i":2,"p":-1,"name":"nn.Module: Linear_0","t0":50,"t1":60,"tid":1,"module":{"self":null,"cls":"Linear","params":[{"name":"weight","t":{"ptr":100},"grad":null},{"name":"bias","t":{"ptr":999},"grad":null}]}})"
      "\n";
  const Identified t = Identify(Header() + Op(0, -1, "aten::relu", 1, 2, T(1, 100)) +
                                Op(1, -1, "aten::relu", 55, 58, T(7, 100)) + py);
  const ParamInfo& w = t.params[0];
  // Nearest in time: the input of the op at 55 (impl address 7), not 1's.
  CHECK(t.tensors[w.tensor].impl == t.tensors[1].impl);
  CHECK(t.tensors[w.tensor].impl != t.tensors[0].impl);
  CHECK(Id(t, w.tensor) >= 0);
  CHECK(Id(t, w.tensor) == Id(t, 1));
  CHECK_FALSE(t.keys.SlotOfTensor(t.params[1].tensor).valid());  // never an op input: dropped

  // The reader resolves them, as the last step of reading (identity only
  // reads the trace), and counts what it did.
  ReadInfo info;
  auto r = ReadTraceString(Header() + Op(0, -1, "aten::relu", 1, 2, T(1, 100)) +
                               Op(1, -1, "aten::relu", 55, 58, T(7, 100)) + py,
                           "t.trace", {}, &info);
  REQUIRE(r.ok());
  CHECK(info.python_tensors_resolved == 1);
  CHECK(info.python_tensors_dropped == 1);
  const bool weight_partial = r.value().tensors[r.value().params[0].tensor].partial;
  const bool bias_partial = r.value().tensors[r.value().params[1].tensor].partial;
  CHECK_FALSE(weight_partial);
  CHECK(bias_partial);
}

TEST_CASE("identity: record order puts ops before allocations before python at equal times") {
  auto r = ReadTraceString(Header() + Alloc(0, -1, 5, 100, 8) + Op(1, -1, "a::b", 5, 6, "") +
                               Op(2, -1, "a::c", 1, 9, ""),
                           "t.trace");
  REQUIRE(r.ok());
  CHECK(RecordOrder(r.value()) == std::vector<uint32_t>{2, 1, 0});
}

TEST_CASE("key table: slots follow TensorKey order, also for sparse and shared producer ids") {
  // Producer ids: allocation ids far apart (the array index would be huge),
  // and allocation id 7 seen with two tensor ids (only a malformed producer
  // does that; it takes the hash-map path and still gets two keys).
  const Identified t = Identify(
      Header(true) +
      Op(0, -1, "aten::relu", 1, 2, T(1, 100, 4, 5, 900000000000) + "," + T(2, 200, 4, 3, 7)) +
      Op(1, -1, "aten::relu", 3, 4, T(3, 300, 4, 4, 7) + "," + T(1, 100, 4, 5, 900000000000)) +
      Alloc(2, -1, 5, 400, 64, "cpu", 3, 7));
  const KeyTable& kt = t.keys;
  REQUIRE(kt.size() == 3);
  CHECK(std::is_sorted(kt.keys.begin(), kt.keys.end()));
  CHECK(kt.keys[0].id.value() == 3);
  CHECK(kt.keys[0].allocation.value() == 7);
  CHECK(kt.keys[1].id.value() == 4);
  CHECK(kt.keys[2].id.value() == 5);
  CHECK(kt.keys[2].allocation.value() == 900000000000);
  // Every observation maps to the slot of its own key.
  for (uint32_t i = 0; i < t.tensors.size(); ++i) {
    const KeySlot s = kt.SlotOfTensor(i);
    REQUIRE(s.valid());
    CHECK(kt[s].id == t.tensor_ids[i].id);
    CHECK(kt[s].allocation == t.tensor_ids[i].allocation);
    CHECK(kt.Find(kt[s]) == s);
  }
  CHECK(kt.of_alloc[0] == 0);  // the allocation carries T3 / aid 7
  // Tensor-id slots: dense, in id order.
  CHECK(kt.num_ids == 3);
  CHECK(kt.id_slot == std::vector<uint32_t>{0, 1, 2});
}

TEST_CASE("identity: a trace that says ids:true but lacks the id tables gets no keys, no crash") {
  auto r = ReadTraceString(Header(true) + Op(0, -1, "aten::relu", 1, 2, T(1, 100, 4, 0, 1)) +
                               Alloc(1, -1, 3, 200, 64, "cpu", 0, 2),
                           "t.trace");
  REQUIRE(r.ok());
  Trace t = std::move(r.value());
  REQUIRE(t.tensor_ids.size() == 1);
  t.tensor_ids.clear();  // as a producer building a Trace by hand might leave them
  t.alloc_ids.clear();
  Diagnostics diag;
  const KeyTable kt =
      AssignIdentity(t, test::RecordsOf(t), t.tensor_ptrs, SchemaRegistry::Builtin(), diag).keys;
  CHECK(kt.size() == 0);
  CHECK_FALSE(kt.SlotOfTensor(0).valid());
  CHECK_FALSE(kt.SlotOfAlloc(0).valid());
}

TEST_CASE("dense numbering: keys numbered from 1 in order of first sighting, through growth") {
  DenseNumbering numbers;
  std::vector<uint64_t> keys;
  for (uint64_t i = 0; i < 5000; ++i) keys.push_back(Mix64(i) | 1);  // distinct, never 0
  for (size_t i = 0; i < keys.size(); ++i) {
    CHECK(numbers.Number(keys[i]) == i + 1);
    CHECK(numbers.Number(keys[i / 2]) == i / 2 + 1);  // seen before: its number again
  }
  CHECK(numbers.size() == keys.size() + 1);
  const std::vector<uint64_t> taken = numbers.TakeKeys();
  REQUIRE(taken.size() == keys.size() + 1);
  CHECK(std::equal(keys.begin(), keys.end(), taken.begin() + 1));
}

TEST_CASE("identity: a trace built elsewhere that understates num_impls gets the same keys") {
  // Analyze() takes any Trace; only the reader keeps num_impls right, so
  // identity bounds its impl arrays by what it sees.
  const std::string text = Header() + Op(0, -1, "aten::add_", 1, 9, T(5, 100) + "," + T(6, 200)) +
                           Alloc(1, 0, 2, 300, 16) + Op(2, -1, "aten::mul", 10, 19, T(5, 300)) +
                           Op(3, -1, "aten::relu", 20, 29, T(7, 200));
  const Identified expected = Identify(text);
  auto r = ReadTraceString(text, "t.trace");
  REQUIRE(r.ok());
  Trace t = std::move(r.value());
  REQUIRE(t.num_impls == 4);
  t.num_impls = 1;
  Diagnostics diag;
  const KeyTable kt =
      AssignIdentity(t, test::RecordsOf(t), t.tensor_ptrs, SchemaRegistry::Builtin(), diag).keys;
  CHECK(kt.keys == expected.keys.keys);
  CHECK(kt.of_tensor == expected.keys.of_tensor);
  CHECK(kt.of_alloc == expected.keys.of_alloc);
}

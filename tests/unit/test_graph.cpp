// Data-flow graph: PyTorch's expectations on small synthetic traces, and
// broken invariants reported as errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>

#include "core/checks/allocation_checks.h"
#include "core/pipeline/analysis.h"
#include "core/timeline/timeline.h"
#include "passes/pass.h"
#include "trace_text.h"

using namespace memtl;
using namespace memtl::test;

namespace {

Expected<std::unique_ptr<Analysis>> Run(const std::string& text) {
  auto r = ReadTraceString(text, "t.trace");
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.status().message()));
  return Analyze(std::move(r.value()), "t.trace");
}

std::string Graph(const std::string& text) {
  auto a = Run(text);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.status().message()));
  return FormatDataFlow(a.value()->trace, a.value()->keys, *a.value()->graph);
}

}  // namespace

TEST_CASE("graph: allocations outside any op are [memory] nodes (PyTorch non_op_allocations)") {
  const std::string text = Header() + Alloc(0, -1, 1, 100, 8) +
                           Op(1, -1, "aten::mul", 2, 5, T(10, 200) + "," + T(11, 100)) +
                           Alloc(2, 1, 3, 300, 4) + Alloc(3, -1, 6, 100, -8);
  CHECK(Graph(text) ==
        "[memory]                                   ->  T0(v0)\n"
        "aten::mul                 T0(v0), T1(v0)   ->\n"
        "[memory]                  T0(v0*)          ->\n");
}

TEST_CASE("graph: annotations without a schema are looked through; in-place ops bump versions") {
  const std::string text =
      Header() + Op(0, -1, "Namespaced::Annotation", 1, 50, "", "user_scope") +
      Op(1, 0, "My Annotation", 2, 49, "", "user_scope") +
      Op(2, 1, "aten::zero_", 3, 6, T(1, 100)) +
      Op(3, 2, "aten::fill_", 4, 5, T(1, 100) + R"(,{"float":0.0})") +
      Op(4, 1, "aten::zero_", 7, 8, T(2, 200)) +
      Op(5, 1, "aten::ones_like", 9, 12, T(1, 100) + ",null,null,null,null,null") +
      Alloc(6, 5, 10, 300, 4) + Op(7, 5, "aten::fill_", 11, 11, T(3, 300) + R"(,{"float":1.0})");
  CHECK(Graph(text) ==
        "aten::zero_               T0(v0)           ->  T0(v1)\n"
        "aten::zero_               T1(v0)           ->  T1(v1)\n"
        "aten::ones_like           T0(v1)           ->  T2(v0)\n");
}

TEST_CASE("graph: temporaries are created and freed inside one op") {
  const std::string text = Header() + Op(0, -1, "aten::mul", 1, 9, T(1, 100) + "," + T(2, 200)) +
                           Alloc(1, 0, 2, 300, 4) + Op(2, 0, "aten::relu", 3, 4, T(3, 300)) +
                           Alloc(3, 0, 5, 400, 4) + Op(4, 0, "aten::relu", 6, 7, T(4, 400)) +
                           Alloc(5, 0, 8, 300, -4);
  auto a = Run(text);
  REQUIRE(a.ok());
  const auto& g = *a.value()->graph;
  REQUIRE(g.nodes().size() == 1);
  int intermediates = 0;
  for (const auto& e : g.edges()) intermediates += e.is_intermediate();
  CHECK(intermediates == 1);
  CHECK(Graph(text) == "aten::mul                 T0(v0), T1(v0)   ->  T3(v0)\n");
}

TEST_CASE("graph: a second free of a pointer is a new, untracked allocation, not a graph error") {
  // As in PyTorch: the first free closes the allocation id, so the second
  // free opens (and closes) an id that no tensor was seen with.
  const std::string text = Header() + Op(0, -1, "aten::relu", 1, 2, T(1, 100)) +
                           Op(1, -1, "aten::relu", 3, 9, T(2, 200)) + Alloc(2, 1, 4, 100, -16) +
                           Alloc(3, 1, 5, 100, -16);
  auto a = Run(text);
  REQUIRE(a.ok());
  CHECK_FALSE(a.value()->keys.SlotOfAlloc(1).valid());
  CHECK(FormatDataFlow(a.value()->trace, a.value()->keys, *a.value()->graph) ==
        "aten::relu                T0(v0)           ->\n"
        "aten::relu                T0(v0*), T1(v0)  ->\n");
}

TEST_CASE("graph: re-allocating a live tensor after an in-place write breaks an invariant") {
  const std::string text =
      Header() + Op(0, -1, "aten::zero_", 1, 2, T(1, 100)) + Alloc(1, -1, 3, 100, 16);
  auto a = Run(text);
  REQUIRE_FALSE(a.ok());
  CHECK(a.status().message() ==
        "t.trace: data-flow invariant broken at \"[memory]\" (event 1, t=3): it creates T0(v0) but "
        "the tensor is "
        "at v1");
}

TEST_CASE(
    "categories: a PyTorch 2.x trace with producer ids, module gradients and optimizer state") {
  // ids=true: tensors carry PyTorch's ids. The python tracer reports the
  // weight with its gradient, and the optimizer's momentum buffer.
  // PyTorch's numbering: allocation ids in record order (weight, grad, the
  // mul output, then the buffer at the optimizer step), tensor ids by them.
  const std::string w = T(1, 100, 4, 0, 1), g = T(2, 200, 4, 1, 2), buf = T(3, 300, 4, 3, 4);
  const std::string text =
      Header(true) +
      R"({"k":"py","i":0,"p":-1,"name":"nn.Module: Linear_0","t0":1,"t1":50,"tid":1,"module":{"self":7,"cls":"Linear","params":[{"name":"weight","t":)" +
      w + R"(,"grad":)" + g + R"(}]}})" + "\n" + Op(1, 0, "aten::mul", 2, 9, w + "," + w) +
      Alloc(2, 1, 3, 400, 16, "cpu", 2, 3) + Op(3, 0, "aten::relu", 10, 12, T(4, 400, 4, 2, 3)) +
      R"({"k":"py","i":4,"p":-1,"name":"Optimizer.step#SGD.step","t0":60,"t1":90,"tid":1,"optimizer":{"self":8,"params":[{"t":)" +
      w + R"(,"grad":)" + g + R"(,"state":[["momentum_buffer",)" + buf + R"(]]}]}})" + "\n" +
      Op(5, 4, "aten::add_", 61, 70, buf + "," + g + R"(,{"float":1.0})") +
      Op(6, 4, "aten::add_", 71, 80, w + "," + buf + R"(,{"float":-0.1})") +
      Alloc(7, -1, 95, 400, -16, "cpu", 2, 3);
  auto a = Run(text);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.status().message()));
  Analysis& an = *a.value();
  CHECK(an.identity.id_mismatches == 0);  // memtl's ids agree with the producer's
  CategoryDict cats;
  RunAllPasses(PassInput{an.trace, an.keys, *an.tree, *an.graph, *an.sizes}, cats);
  const auto key = [&](int64_t id, int64_t aid) {
    return an.keys.Find(an.trace.KeyOf(TensorId(id), AllocationId(aid), 0));
  };
  CHECK(cats.Get(key(0, 1), Version(0)) == Category::kParameter);
  CHECK(cats.Get(key(0, 1), Version(1)) == Category::kParameter);
  CHECK(cats.Get(key(1, 2), Version(0)) == Category::kGradient);
  CHECK(cats.Get(key(3, 4), Version(1)) == Category::kOptimizerState);
  CHECK(cats.Get(key(2, 3), Version(0)) != Category::kParameter);
}

TEST_CASE("pipeline: checks beside identity on a second thread give the same analysis") {
  // Diagnostics from both stages: a double free, a zero-byte event and a
  // free of another size than its allocation's (checks; a pointer
  // allocated again after its free is not a defect), and producer ids that
  // disagree with memtl's (identity).
  const std::string text =
      Header(true) + Op(0, -1, "aten::relu", 1, 2, T(1, 100, 4, 5, 9)) +
      Alloc(1, -1, 3, 300, 16, "cpu", 7, 8) + Alloc(2, -1, 4, 300, -16, "cpu", 7, 8) +
      Alloc(3, -1, 5, 300, -16, "cpu", 7, 8) + Alloc(4, -1, 6, 400, 0, "cpu", 9, 10) +
      Alloc(5, -1, 7, 500, 32, "cpu", 11, 12) + Alloc(6, -1, 8, 500, -16, "cpu", 11, 12) +
      Alloc(7, -1, 9, 500, 48, "cpu", 13, 14) + Alloc(8, -1, 10, 500, -48, "cpu", 13, 14);
  auto analyze = [&](bool threaded) {
    auto r = ReadTraceString(text, "t.trace");
    REQUIRE(r.ok());
    auto a = Analyze(std::move(r.value()), "t.trace", threaded);
    REQUIRE(a.ok());
    return std::move(a.value());
  };
  const auto one = analyze(false);
  const auto two = analyze(true);
  const auto& d1 = one->diagnostics.entries();
  const auto& d2 = two->diagnostics.entries();
  CHECK(d1.count("double free") == 1);
  CHECK(d1.count("allocation event of 0 bytes") == 1);
  REQUIRE(d1.count("free size differs from its allocation") == 1);
  const auto& differs = d1.at("free size differs from its allocation");
  CHECK(differs.count == 1);
  CHECK(differs.example.find("32 allocated, 16 freed") != std::string::npos);
  CHECK(d1.count("producer ids differ from memtl's") == 1);
  REQUIRE(d1.size() == d2.size());
  for (auto i = d1.begin(), j = d2.begin(); i != d1.end(); ++i, ++j) {
    CHECK(i->first == j->first);
    CHECK(i->second.count == j->second.count);
    CHECK(i->second.example == j->second.example);
  }
  CHECK(one->allocations.frees == two->allocations.frees);
  CHECK(one->allocations.allocations == two->allocations.allocations);
  CHECK(one->keys.keys == two->keys.keys);
  CHECK(one->keys.of_alloc == two->keys.of_alloc);
  CHECK(FormatDataFlow(one->trace, one->keys, *one->graph) ==
        FormatDataFlow(two->trace, two->keys, *two->graph));
}

TEST_CASE("pipeline: the tensor records and addresses are gone once the size map is built") {
  // They are a value of their own (TensorRecords), owned by the stages up
  // to the size map: an analysis holds none of them, whatever it keeps, and
  // the stages after read tensors through the key table and the size map.
  const std::string text = Header() + Op(0, -1, "aten::relu", 1, 2, T(1, 100) + "," + T(2, 200)) +
                           Alloc(1, 0, 1, 200, 16) + Alloc(2, -1, 3, 200, -16);
  auto r = ReadTraceString(text, "t.trace");
  REQUIRE(r.ok());
  REQUIRE(r.value().tensors.size() == 2);
  REQUIRE(r.value().alloc_ptrs.size() == 2);
  for (const bool threaded : {false, true}) {
    auto a = Analyze(Trace(r.value()), "t.trace", threaded);
    REQUIRE(a.ok());
    const Analysis& an = *a.value();
    CHECK(an.trace.tensors.empty());
    CHECK(an.trace.tensor_ptrs.empty());
    CHECK(an.trace.tensor_ids.empty());
    CHECK(an.trace.alloc_ptrs.empty());
    // What the stages after read of them was kept: a key and a size per
    // observed storage, and the untracked allocations' liveness.
    CHECK(an.keys.of_tensor.size() == 2);
    const KeySlot k = an.keys.SlotOfTensor(1);
    REQUIRE(k.valid());
    CHECK((*an.sizes)[k] == 16);
    CHECK(an.untracked_live.size() == 2);
  }
}

TEST_CASE("op tree: a trace whose subtrees interleave gives the analysis of its pre-order") {
  // The same events twice: in pre-order (as the format asks), and with the
  // second root written between the first root and its children (parents
  // still precede children, so the reader takes it). The gradient query
  // reads AccumulateGrad's first child, which the second layout puts after
  // an unrelated root.
  const std::string acc = "torch::autograd::AccumulateGrad";
  const std::string pre = Header() + Op(0, -1, acc, 1, 10, "", "backward_function") +
                          Op(1, 0, "aten::detach", 2, 3, T(1, 100)) + Alloc(2, 0, 4, 300, 8) +
                          Op(3, -1, "aten::relu", 20, 30, T(2, 300)) + Alloc(4, -1, 40, 300, -8);
  const std::string interleaved = Header() + Op(0, -1, acc, 1, 10, "", "backward_function") +
                                  Op(1, -1, "aten::relu", 20, 30, T(2, 300)) +
                                  Op(2, 0, "aten::detach", 2, 3, T(1, 100)) +
                                  Alloc(3, 0, 4, 300, 8) + Alloc(4, -1, 40, 300, -8);
  auto a = Run(pre);
  auto b = Run(interleaved);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  const OpTree& ta = *a.value()->tree;
  const OpTree& tb = *b.value()->tree;
  std::vector<uint32_t> order_a(ta.preorder().begin(), ta.preorder().end());
  std::vector<uint32_t> order_b(tb.preorder().begin(), tb.preorder().end());
  CHECK(order_a == std::vector<uint32_t>{0, 1, 2, 3, 4});
  CHECK(order_b == std::vector<uint32_t>{0, 2, 3, 1, 4});
  CHECK(tb.position(1) == 3);
  CHECK(tb.subtree_end(tb.position(0)) - tb.position(0) == 3);
  CHECK(ta.first_child(0) == 1);
  CHECK(tb.first_child(0) == 2);
  CHECK(tb.first_child(1) == kNone32);
  CHECK(tb.in_backward(2));
  CHECK(!tb.in_backward(1));
  CHECK(FormatDataFlow(a.value()->trace, a.value()->keys, *a.value()->graph) ==
        FormatDataFlow(b.value()->trace, b.value()->keys, *b.value()->graph));
  auto categories = [](Analysis& an) {
    CategoryDict cats;
    RunAllPasses(PassInput{an.trace, an.keys, *an.tree, *an.graph, *an.sizes}, cats);
    std::vector<int> out;
    for (const KeySlot k : an.keys.slots())
      out.push_back(cats.Get(k, Version(0)) ? static_cast<int>(*cats.Get(k, Version(0))) : -1);
    return out;
  };
  const auto ca = categories(*a.value());
  CHECK(ca == categories(*b.value()));
  CHECK(std::count(ca.begin(), ca.end(), static_cast<int>(Category::kGradient)) == 1);
}

TEST_CASE("graph: nodes follow start time when pre-order does not") {
  // Two roots whose pre-order (index order) is not their start-time order:
  // the allocation at t=1 comes before the op at t=20, as PyTorch sorts the
  // leaf events by start time.
  const std::string out_of_order = Header() + Op(0, -1, "aten::relu", 20, 30, T(10, 200)) +
                                   Alloc(1, -1, 1, 300, 8) + Alloc(2, -1, 40, 300, -8);
  auto a = Run(out_of_order);
  REQUIRE(a.ok());
  const auto& nodes = a.value()->graph->nodes();
  REQUIRE(nodes.size() == 3);
  CHECK(nodes[0].event == 1);
  CHECK(nodes[1].event == 0);
  CHECK(nodes[2].event == 2);
  CHECK(a.value()->tree->subtree_end(0) == 1);
}

TEST_CASE("size map stage: untracked allocations' pointer liveness, kept after the pointers go") {
  // No tensor names these pointers, so the allocations have no key and the
  // timeline keys them by (pointer, device), as PyTorch does.
  const std::string text = Header() + Alloc(0, -1, 1, 0x100, 64) +  // new
                           Alloc(1, -1, 2, 0x100, 64) +             // again while live
                           Alloc(2, -1, 3, 0x100, -64) +            // freed: was live
                           Alloc(3, -1, 4, 0x200, -32) +            // freed, never allocated
                           Alloc(4, -1, 5, 0x100, 64, "cuda:0") +   // another device
                           Alloc(5, -1, 6, 0x100, -64);             // freed again on cpu
  auto a = Run(text);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.status().message()));
  Analysis& an = *a.value();
  CHECK(an.trace.alloc_ptrs.empty());  // the pipeline freed them
  const std::vector<bool> expected = {false, true, true, false, false, false};
  CHECK(an.untracked_live == expected);
  // The timeline reads them: a second creation of a live pointer is a new
  // version, a free of a pointer not live also adds a pre-existing block.
  CategoryDict cats;
  auto timeline = BuildTimeline(*an.tree, an.keys, *an.graph, *an.sizes, an.untracked_live, cats,
                                an.diagnostics);
  REQUIRE(timeline.ok());
  std::string actions;
  for (const TimelineEvent& e : timeline.value())
    actions += std::string(ActionName(e.action)) + " ";
  CHECK(actions ==
        "preexisting preexisting create increment_version destroy destroy create destroy ");
  // Without the addresses the liveness cannot be computed, and the timeline
  // takes no liveness of another size: errors, not a guess.
  CHECK(!UntrackedAllocationsLive(*an.tree, an.keys, TensorRecords()).ok());
  CHECK(!BuildTimeline(*an.tree, an.keys, *an.graph, *an.sizes, {}, cats, an.diagnostics).ok());
}

TEST_CASE("allocation checks: the same verdicts as a map of every pointer's last event") {
  // CheckAllocations keeps only live pointers and settles frees of other
  // pointers in a second pass. The model here keeps every (pointer,
  // device)'s state, as the definition reads: a free of a pointer whose
  // last event was a free is a double free, of one never named before a
  // pre-existing free. Random traces over few pointers and two devices
  // give every case many times (free of a live pointer of the same or
  // another size, double and triple frees, pre-existing frees freed again,
  // a pointer allocated twice, 0-byte events, the same address on both
  // devices). The records are written in a shuffled order, their times
  // keeping the model's: the checks judge in time order, as the allocator
  // saw the events, not in the file's order (on a GPU, the backward
  // thread's records interleave in time with the main thread's).
  std::mt19937 rng(11);
  for (int round = 0; round < 200; ++round) {
    CAPTURE(round);
    std::string text = Header();
    struct Ev {
      unsigned long ptr;
      long bytes;
      const char* dev;
      long t;
    };
    std::vector<Ev> evs;
    const int n = 1 + static_cast<int>(rng() % 60);
    for (int i = 0; i < n; ++i) {
      const int r = static_cast<int>(rng() % 10);
      const long bytes = r == 0 ? 0 : (r < 5 ? 16 : -16) * (1 + static_cast<long>(rng() % 2));
      evs.push_back({1000 + 16 * (rng() % 4), bytes, rng() % 3 == 0 ? "cuda:0" : "cpu", 10 + i});
    }
    std::vector<int> file_order(evs.size());
    for (size_t i = 0; i < evs.size(); ++i) file_order[i] = static_cast<int>(i);
    std::shuffle(file_order.begin(), file_order.end(), rng);
    for (size_t i = 0; i < evs.size(); ++i) {
      const Ev& e = evs[file_order[i]];
      text += Alloc(static_cast<int>(i), -1, e.t, e.ptr, e.bytes, e.dev);
    }
    auto r = ReadTraceString(text, "t.trace");
    REQUIRE(r.ok());
    Diagnostics got_diag;
    const OpTree tree(r.value());
    const AllocationSummary got = CheckAllocations(tree, test::RecordsOf(r.value()), got_diag);

    // The model.
    Diagnostics want_diag;
    AllocationSummary want;
    std::map<std::pair<unsigned long, std::string>, long> state;  // live size, or 0 once freed
    for (const Ev& e : evs) {
      char where[96];
      std::snprintf(where, sizeof where, "0x%lx on %s at t=%ld", e.ptr, e.dev, e.t);
      const auto key = std::make_pair(e.ptr, std::string(e.dev));
      if (e.bytes > 0) {
        ++want.allocations;
        if (auto it = state.find(key); it != state.end() && it->second != 0)
          want_diag.Add("allocation at an address already live (a free missing?)", where);
        state[key] = e.bytes;
      } else if (e.bytes == 0) {
        want_diag.Add("allocation event of 0 bytes", where);
      } else {
        ++want.frees;
        auto it = state.find(key);
        if (it == state.end()) {
          ++want.preexisting_frees;
        } else if (it->second == 0) {
          want_diag.Add("double free", where);
        } else if (it->second != -e.bytes) {
          want_diag.Add("free size differs from its allocation",
                        std::string(where) + ": " + std::to_string(it->second) + " allocated, " +
                            std::to_string(-e.bytes) + " freed");
        }
        state[key] = 0;
      }
    }
    CHECK(got.allocations == want.allocations);
    CHECK(got.frees == want.frees);
    CHECK(got.preexisting_frees == want.preexisting_frees);
    REQUIRE(got_diag.entries().size() == want_diag.entries().size());
    for (auto i = got_diag.entries().begin(), j = want_diag.entries().begin();
         i != got_diag.entries().end(); ++i, ++j) {
      CHECK(i->first == j->first);
      CHECK(i->second.count == j->second.count);
      CHECK(i->second.example == j->second.example);
    }
  }
}

TEST_CASE("allocation checks: no defect in real CUDA training steps") {
  // Recorded on a GPU (fixtures/cuda/): the backward pass runs on the
  // autograd engine's device thread, so the op tree's pre-order visits the
  // main thread's allocations and the backward thread's in another order
  // than the allocator saw them, and checks in pre-order found double
  // frees, mismatched sizes and frees before their allocations in each of
  // these. Nor does any row of their timelines go below zero.
  int files = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(MEMTL_SOURCE_DIR) + "/fixtures/cuda")) {
    if (e.path().extension() != ".gz") continue;
    CAPTURE(e.path());
    auto c = RunPipeline(e.path().string());
    REQUIRE(c.ok());
    const Diagnostics& diag = c.value()->analysis->diagnostics;
    std::string said;
    for (const auto& [kind, entry] : diag.entries()) said += kind + ": " + entry.example + "\n";
    CHECK_MESSAGE(diag.empty(), said);
    ++files;
  }
  CHECK(files >= 5);
}

TEST_CASE("timeline: a row below zero is said") {
  // Roots out of time order: the timeline pairs the free with the
  // allocation in pre-order and, sorted by time, frees 16 bytes before it
  // allocates them.
  const std::string text = Header() + Op(0, -1, "aten::empty", 2000, 2100, "") +
                           Alloc(1, 0, 2001, 100, 16) + Op(2, -1, "aten::relu", 1000, 1100, "") +
                           Alloc(3, 2, 1001, 100, -16);
  auto r = ReadTraceString(text, "t.trace");
  REQUIRE(r.ok());
  auto a = Analyze(std::move(r.value()), "t.trace");
  REQUIRE(a.ok());
  auto c = Categorize(std::move(a.value()), PipelineOptions{});
  REQUIRE(c.ok());
  const Diagnostics& diag = c.value()->analysis->diagnostics;
  REQUIRE(diag.entries().size() == 1);
  CHECK(diag.entries().begin()->first ==
        "live bytes below zero (the trace's order and its times disagree)");
  CHECK(diag.entries().begin()->second.example == "cpu at t=1001 ns: -16 B");
}

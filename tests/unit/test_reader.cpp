// Trace reader: the format's container rules and its error messages.
#include <doctest/doctest.h>

#include "core/model/large_array.h"
#include "core/read/memtl/trace_reader.h"
#include "tests/unit/gzip_text.h"
#include "trace_text.h"

using namespace memtl;
using namespace memtl::test;

namespace {

std::string ErrorOf(const std::string& text, ReadOptions options = {}) {
  auto r = ReadTraceString(text, "t.trace", options);
  return r.ok() ? std::string("<ok>") : r.status().message();
}

const std::string kSmall = Header() + Op(0, -1, "aten::mul", 10, 20, T(1, 100) + "," + T(2, 200)) +
                           Alloc(1, 0, 12, 300, 16) + Alloc(2, -1, 30, 300, -16);

}  // namespace

TEST_CASE("reader: plain and gzip give the same trace") {
  for (const std::string& data :
       {kSmall, Gzip(kSmall), Gzip(kSmall.substr(0, 80)) + Gzip(kSmall.substr(80))}) {
    auto r = ReadTraceString(data, "t.trace");
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.status().message()));
    const Trace& t = r.value();
    REQUIRE(t.events.size() == 3);
    CHECK(t.Name(t.events[0]) == "aten::mul");
    CHECK(t.events[1].parent == 0);
    CHECK(t.allocs[1].bytes == -16);
    CHECK(t.events[2].parent == kNone32);
    CHECK(t.tensors.size() == 2);
  }
}

TEST_CASE("reader: errors name the file, the line and the problem") {
  CHECK(ErrorOf("") == "t.trace: empty file (no memtl trace header)");
  CHECK(ErrorOf("hello\n").find("t.trace: line 1: not valid JSON") == 0);
  CHECK(ErrorOf(R"({"format":"other","version":1})"
                "\n")
            .find("line 1: not a memtl trace") != std::string::npos);
  CHECK(ErrorOf(R"({"format":"memtl-trace","version":9})"
                "\n")
            .find("newer than this memtl reads") != std::string::npos);
  CHECK(ErrorOf(Header() + R"({"k":"op","i":0,"p":-1})"
                           "\n")
            .find("line 2: missing field \"name\"") != std::string::npos);
  CHECK(ErrorOf(Header() + Op(0, 5, "a", 1, 2, "")).find("line 2: parent 5 does not precede") !=
        std::string::npos);
  CHECK(ErrorOf(Header() + Op(1, -1, "a", 1, 2, "")).find("record index 1 out of order") !=
        std::string::npos);
  CHECK(ErrorOf(Header() + Alloc(0, -1, 1, 5, 8, "Cuda 0")).find("invalid device") !=
        std::string::npos);
  CHECK(ErrorOf(Header() + R"({"k":"alloc","i":0,"p":-1,"t":1,"ptr":-5,"bytes":8,"dev":"cpu"})"
                           "\n")
            .find("\"ptr\" must not be negative") != std::string::npos);
  CHECK(ErrorOf(Header() + R"({"k":"alloc","i":0,"p":-1,"t":"x","ptr":5,"bytes":8,"dev":"cpu"})"
                           "\n")
            .find("expected an integer for \"t\"") != std::string::npos);
  // The longest list of nulls that fits in a 64 MiB line keeps its length;
  // one line longer is an error.
  auto op_with_list = [](size_t n) {
    std::string list = R"({"list":[)";
    list.reserve(list.size() + 5 * n + 4);
    for (size_t i = 0; i < n; ++i) list += i == 0 ? "null" : ",null";
    return Op(0, -1, "a", 1, 2, list + "]}");
  };
  const size_t fits = (size_t{64} << 20) / 5 - 40;
  {
    auto longest = ReadTraceString(Header() + op_with_list(fits), "t.trace");
    REQUIRE(longest.ok());
    REQUIRE(longest.value().ops.size() == 1);
    const Arg arg = *longest.value().ArgsOf(0).begin();
    const uint32_t count = arg.count;
    CHECK(count == fits);
    CHECK((arg.kind == ArgKind::kTensorList));
  }
  CHECK(ErrorOf(Header() + op_with_list(fits + 40)).find("line 2: line longer than 64 MiB") !=
        std::string::npos);
  // A child that starts before its parent is counted (a diagnostic), not fatal.
  auto early =
      ReadTraceString(Header() + Op(0, -1, "a", 10, 20, "") + Op(1, 0, "b", 5, 8, ""), "t.trace");
  REQUIRE(early.ok());
  CHECK(early.value().events_before_parent == 1);
}

TEST_CASE("reader: thread ids are unsigned 64-bit in every record kind") {
  // torch 2.x's python tracer gives the calls of a thread that ran no op the
  // thread id 2^64-1.
  auto with_tid = [](std::string line, const char* tid) {
    const size_t at = line.find(R"("tid":1)");
    REQUIRE(at != std::string::npos);
    return line.replace(at, 7, std::string(R"("tid":)") + tid);
  };
  const std::string py =
      R"({"k":"py","i":2,"p":-1,"name":"threading.py(1002): _bootstrap","t0":1,"t1":40,"tid":1})"
      "\n";
  for (const char* tid : {"18446744073709551615", "9223372036854775808", "0", "null"}) {
    CAPTURE(tid);
    auto r = ReadTraceString(Header() + with_tid(Op(0, -1, "aten::mul", 10, 20, T(1, 100)), tid) +
                                 with_tid(Alloc(1, 0, 12, 300, 16), tid) + with_tid(py, tid),
                             "t.trace");
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.status().message()));
    CHECK(r.value().events.size() == 3);
  }
  CHECK(ErrorOf(Header() + with_tid(py, "18446744073709551616"))
            .find("line 2: \"tid\" is out of range (more than 2^64-1)") != std::string::npos);
  CHECK(ErrorOf(Header() + with_tid(Alloc(0, -1, 12, 300, 16), "-1"))
            .find("line 2: \"tid\" must not be negative") != std::string::npos);
}

TEST_CASE("reader: truncated input") {
  const std::string gz = Gzip(kSmall);
  CHECK(ErrorOf(gz.substr(0, gz.size() - 10)).find("truncated gzip stream") != std::string::npos);
  CHECK(ErrorOf(Gzip("garbage") + "xx").find("gzip") != std::string::npos);
  const std::string cut = kSmall.substr(0, kSmall.size() - 10);
  CHECK(ErrorOf(cut).find("the last record is cut off") != std::string::npos);
  ReadOptions partial;
  partial.partial = true;
  ReadInfo info;
  auto r = ReadTraceString(cut, "t.trace", partial, &info);
  REQUIRE(r.ok());
  CHECK(r.value().events.size() == 2);
  CHECK(info.stopped_early);
  CHECK(info.stopped_at_line == 4);
}

TEST_CASE("reader: errors carry the code callers branch on, not only a message") {
  auto code_of = [](const std::string& text) {
    auto r = ReadTraceString(text, "t.trace");
    return r.ok() ? StatusCode::kOk : r.status().code();
  };
  const std::string gz = Gzip(kSmall);
  CHECK(code_of(gz.substr(0, gz.size() - 10)) == StatusCode::kTruncated);
  CHECK(code_of(gz.substr(0, 5)) == StatusCode::kTruncated);  // inside the member's header
  // Refused at the start: another format, which the pipeline then names.
  CHECK(code_of("") == StatusCode::kNotThisFormat);
  CHECK(code_of("not json\n") == StatusCode::kNotThisFormat);
  CHECK(code_of("[1, 2]\n") == StatusCode::kNotThisFormat);
  CHECK(code_of("{\"format\": \"other\"}\n") == StatusCode::kNotThisFormat);
  // A memtl trace with a bad record is a bad input, not another format.
  CHECK(code_of(Header() + "not json\n") == StatusCode::kBadInput);
  CHECK(code_of(kSmall.substr(0, kSmall.size() - 10)) == StatusCode::kBadInput);
  // A truncated gzip member read with --partial stops at the last whole record.
  ReadOptions partial;
  partial.partial = true;
  CHECK(ReadTraceString(gz.substr(0, gz.size() - 10), "t.trace", partial).ok());
  // Prefixed and Suffixed keep the code.
  const Status s = Status::Error(StatusCode::kInternal, "b");
  CHECK(s.Prefixed("a: ").code() == StatusCode::kInternal);
  CHECK(s.Prefixed("a: ").message() == "a: b");
  CHECK(s.Suffixed("; c").message() == "b; c");
  CHECK(Status::Error("x").code() == StatusCode::kBadInput);
  CHECK(Status().ok());
}

TEST_CASE("reader: tensors and lists among an op's arguments, op after op") {
  const std::string text =
      Header() +
      Op(0, -1, "aten::a", 1, 2,
         T(1, 100) + R"(,{"int":1},{"list":[)" + T(2, 200) + ",null," + T(3, 300) + "]}," +
             T(4, 400)) +
      Op(1, -1, "aten::b", 3, 4,
         R"({"list":[]},null,)" + T(5, 500) + R"(,{"list":[)" + T(6, 600) + "]}");
  auto r = ReadTraceString(text, "t.trace");
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.status().message()));
  const Trace& t = r.value();
  REQUIRE(t.ops.size() == 2);
  std::string seen;
  for (uint32_t op = 0; op < t.ops.size(); ++op) {
    for (const Arg a : t.ArgsOf(op)) {
      if (a.kind == ArgKind::kTensor) {
        seen += "T" + std::to_string(t.tensors[a.begin].impl) + " ";
      } else if (a.kind == ArgKind::kTensorList) {
        seen += "[";
        for (uint32_t k = 0; k < a.count; ++k) {
          const uint32_t ti = t.list_items[a.begin + k];
          seen += ti == kNone32 ? "null " : "T" + std::to_string(t.tensors[ti].impl) + " ";
        }
        seen += "] ";
      } else {
        seen += a.kind == ArgKind::kInt ? "int " : "none ";
      }
    }
    seen += "| ";
  }
  CHECK(seen == "T1 int [T2 null T3 ] T4 | [] none T5 [T6 ] | ");
  CHECK(t.ArgsOf(1).size() == 4);
}

TEST_CASE("reader: shapes and dtypes only when asked (ReadOptions::keep_shapes)") {
  const std::string text =
      Header() + Op(0, -1, "aten::a", 1, 2,
                    T(1, 100, 8) + "," + T(2, 200, 8) + "," +
                        R"({"impl":3,"ptr":300,"dev":"cpu","dtype":"int64","sizes":[2,3],)"
                        R"("strides":[3,1]})" +
                        "," + R"({"impl":4,"ptr":400,"dev":"cpu","dtype":"bool","sizes":[]})");
  auto plain = ReadTraceString(text, "t.trace");
  REQUIRE(plain.ok());
  CHECK(plain.value().tensors.size() == 4);
  CHECK(plain.value().tensor_shapes.empty());
  CHECK(plain.value().shapes.size() == 0);
  ReadOptions options;
  options.keep_shapes = true;
  auto r = ReadTraceString(text, "t.trace", options);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.status().message()));
  const Trace& t = r.value();
  REQUIRE(t.tensor_shapes.size() == 4);
  CHECK(t.shapes.size() == 3);  // the two [8] float32 share one
  CHECK(t.tensor_shapes[0] == t.tensor_shapes[1]);
  CHECK(t.shapes.Get(t.tensor_shapes[0]) == "[8] float32");
  CHECK(t.shapes.Get(t.tensor_shapes[2]) == "[2, 3] int64");
  CHECK(t.shapes.Get(t.tensor_shapes[3]) == "[] bool");
  CHECK(t.tensors[2].bytes() == 48);
}

TEST_CASE("reader: each op's arguments end where the next op's begin (12-byte op records)") {
  // "args" on a record that is not an op, and an op's repeated "args" key,
  // must not leave arguments between two ops' (the count is not stored).
  std::string op1 = Op(1, -1, "aten::b", 3, 4, R"({"int":1},{"int":2})");
  op1.insert(op1.find(R"("args")"), R"("args":[{"int":9},{"int":9},{"int":9}],)");
  std::string alloc = Alloc(2, -1, 5, 4096, 64);
  alloc.insert(alloc.find(R"("ptr")"), R"("args":[{"int":9}],)");
  const std::string text = Header() + Op(0, -1, "aten::a", 1, 2, T(1, 100)) + op1 + alloc +
                           Op(3, -1, "aten::c", 6, 7, "null");
  auto r = ReadTraceString(text, "t.trace");
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.status().message()));
  const Trace& t = r.value();
  static_assert(sizeof(OpInfo) == 12);
  REQUIRE(t.ops.size() == 3);
  CHECK(t.ArgsOf(0).size() == 1);
  CHECK(t.ArgsOf(1).size() == 2);  // the later "args" key counts
  CHECK(t.ArgsOf(2).size() == 1);
  CHECK(t.arg_kinds.size() == 4);
  for (const Arg a : t.ArgsOf(1)) CHECK(a.kind == ArgKind::kInt);
  CHECK((*t.ArgsOf(2).begin()).kind == ArgKind::kNone);
}

TEST_CASE("reader: argument kinds and python-tracer records") {
  const std::string text =
      Header() +
      Op(0, -1, "aten::cat", 1, 9,
         R"({"list":[]},{"int":0},{"bool":true},{"float":"nan"},{"complex":[1,2]},{"str":"x"},null)") +
      R"({"k":"py","i":1,"p":-1,"name":"nn.Module: Linear_0","t0":10,"t1":20,"tid":1,"module":{"self":null,"cls":"Linear","params":[{"name":"weight","t":{"ptr":77},"grad":null}]}})"
      "\n"
      R"({"k":"schema","op":"aten::cat","schemas":["aten::cat(Tensor[] tensors, int dim=0) -> Tensor"]})"
      "\n";
  auto r = ReadTraceString(text, "t.trace");
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.status().message()));
  const Trace& t = r.value();
  REQUIRE(t.ops.size() == 1);
  std::vector<Arg> args(t.ArgsOf(0).begin(), t.ArgsOf(0).end());
  REQUIRE(args.size() == 7);
  CHECK(args[0].kind == ArgKind::kTensorList);
  CHECK(args[0].count == 0);
  CHECK(args[1].kind == ArgKind::kInt);
  CHECK(args[2].kind == ArgKind::kBool);
  CHECK(args[3].kind == ArgKind::kFloat);
  CHECK(args[4].kind == ArgKind::kComplex);
  CHECK(args[5].kind == ArgKind::kString);
  CHECK(args[6].kind == ArgKind::kNone);
  REQUIRE(t.modules.size() == 1);
  CHECK(t.tensors[t.params[0].tensor].partial);
  CHECK(t.tensor_ptrs[t.params[0].tensor] == 77);
  REQUIRE(t.schemas.size() == 1);
  CHECK(ErrorOf(text + R"({"k":"schema","op":"aten::cat","schemas":[]})"
                       "\n")
            .find("registered twice") != std::string::npos);
}

TEST_CASE("reader: names and scopes live in each kind's record; allocation bytes in 48 bits") {
  const std::string text =
      Header() + Op(0, -1, "aten::mul", 1, 9, "", "backward_function") + Alloc(1, 0, 2, 300, 16) +
      R"({"k":"py","i":2,"p":-1,"name":"nn.Module: Linear_0","t0":10,"t1":20,"tid":1,"module":{"self":null,"cls":"Linear","params":[]}})"
      "\n"
      R"({"k":"py","i":3,"p":-1,"name":"Optimizer.step#SGD.step","t0":21,"t1":30,"tid":1,"optimizer":{"self":5,"params":[]}})"
      "\n"
      R"({"k":"py","i":4,"p":-1,"name":"<built-in method x>","t0":31,"t1":32,"tid":1})"
      "\n"
      R"({"k":"other","i":5,"p":-1,"name":"gpu kernel","t0":33,"t1":34,"type":"kineto"})"
      "\n";
  auto r = ReadTraceString(text, "t.trace");
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.status().message()));
  const Trace& t = r.value();
  REQUIRE(t.events.size() == 6);
  CHECK(t.Name(t.events[0]) == "aten::mul");
  CHECK(t.ops[0].scope == RecordScope::kBackwardFunction);
  CHECK(t.Name(t.events[1]) == "[memory]");
  CHECK(t.Name(t.events[2]) == "nn.Module: Linear_0");
  CHECK(t.Name(t.events[3]) == "Optimizer.step#SGD.step");
  CHECK(t.Name(t.events[4]) == "<built-in method x>");
  CHECK(t.Name(t.events[5]) == "gpu kernel");
  CHECK(t.events[5].kind == EventKind::kOther);
  REQUIRE(t.py_names.size() == 3);
  CHECK(t.Py(0).module() == 0);
  CHECK(t.Py(0).optimizer() == kNone32);
  CHECK(t.Py(1).module() == kNone32);
  CHECK(t.Py(1).optimizer() == 0);
  CHECK(t.Py(2).module() == kNone32);
  CHECK(t.Py(2).optimizer() == kNone32);
  REQUIRE(t.py_links.size() == 2);  // only the calls with a module or an optimizer

  const std::string max = std::to_string(kMaxAllocBytes);
  auto read_bytes = [](const std::string& b) {
    return ReadTraceString(
        Header() + Alloc(0, -1, 1, 300, 0)
                       .replace(Alloc(0, -1, 1, 300, 0).find("\"bytes\":0"), 9, "\"bytes\":" + b),
        "t.trace");
  };
  auto big = read_bytes(max);
  REQUIRE(big.ok());
  CHECK(int64_t{big.value().allocs[0].bytes} == kMaxAllocBytes);
  auto big_free = read_bytes("-" + max);
  REQUIRE(big_free.ok());
  CHECK(int64_t{big_free.value().allocs[0].bytes} == -kMaxAllocBytes);
  auto over = read_bytes(std::to_string(kMaxAllocBytes + 1));
  REQUIRE_FALSE(over.ok());
  CHECK(over.status().message().find("\"bytes\" is out of range") != std::string::npos);
}

TEST_CASE("reader: TensorImpl addresses are numbered densely, in order of first sighting") {
  const std::string text =
      Header() +
      Op(0, -1, "aten::add", 1, 9,
         T(0x7f00deadbeef, 100) + "," + T(42, 200) + "," + T(0x7f00deadbeef, 300)) +
      Op(1, -1, "aten::mul", 10, 19, T(42, 400) + "," + T(0, 500));
  auto r = ReadTraceString(text, "t.trace");
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.status().message()));
  const Trace& t = r.value();
  REQUIRE(t.tensors.size() == 5);
  CHECK(t.tensors[0].impl == 1);
  CHECK(t.tensors[1].impl == 2);
  CHECK(t.tensors[2].impl == 1);
  CHECK(t.tensors[3].impl == 2);
  CHECK(t.tensors[4].impl == 0);  // address 0: no TensorImpl
  CHECK(t.num_impls == 3);
}

TEST_CASE("reader: impls are numbered in order even though each is looked up a tensor late") {
  // The reader numbers a tensor's impl once the next tensor has been read
  // (or the records end); the numbers must be those of numbering each
  // address as it is parsed. 40 distinct impls make the numbering grow
  // between a slot's fetch and its lookup; the last tensor's impl is new.
  std::string text = Header();
  std::vector<uint32_t> expected;
  for (int i = 0; i < 40; ++i) {
    const unsigned long impl = 0x7f0000001000ul + 0x40ul * static_cast<unsigned long>(i);
    text += Op(2 * i, -1, "aten::add", 10 * i + 1, 10 * i + 2,
               T(impl, 100) + "," + T(0x7f0000001000ul, 200));
    expected.push_back(static_cast<uint32_t>(i + 1));
    expected.push_back(1);
    text += Op(2 * i + 1, -1, "aten::mul", 10 * i + 3, 10 * i + 4, T(impl, 300));
    expected.push_back(static_cast<uint32_t>(i + 1));
  }
  text += Op(80, -1, "aten::neg", 500, 501, T(0x7f00ffff0000ul, 400));
  expected.push_back(41);
  auto r = ReadTraceString(text, "t.trace");
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.status().message()));
  const Trace& t = r.value();
  REQUIRE(t.tensors.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    CHECK_MESSAGE(t.tensors[i].impl == expected[i], "tensor " << i);
  }
  CHECK(t.num_impls == 42);

  // A line cut off after a tensor with a new impl, read with --partial:
  // every tensor read whole is numbered, the cut line's included.
  const std::string two = Header() + Op(0, -1, "aten::a", 1, 2, T(7, 100)) +
                          Op(1, -1, "aten::b", 3, 4, T(8, 200) + "," + T(9, 300));
  ReadOptions partial;
  partial.partial = true;
  auto cut = ReadTraceString(two.substr(0, two.size() - 40), "t.trace", partial);
  REQUIRE(cut.ok());
  // The cut line's first tensor was read whole (and stays, as before); the
  // second stops after its "impl".
  REQUIRE(cut.value().tensors.size() == 2);
  CHECK(cut.value().tensors[0].impl == 1);
  CHECK(cut.value().tensors[1].impl == 2);
  CHECK(cut.value().num_impls == 3);

  // A tensor object that repeats "impl": the first address is numbered too,
  // before the second, as when each address was numbered on sight.
  std::string repeated = T(5, 100);
  repeated.insert(1, R"("impl":6,)");
  auto rep =
      ReadTraceString(Header() + Op(0, -1, "aten::a", 1, 2, repeated + "," + T(6, 200)), "t.trace");
  REQUIRE_MESSAGE(rep.ok(), (rep.ok() ? "" : rep.status().message()));
  REQUIRE(rep.value().tensors.size() == 2);
  CHECK(rep.value().tensors[0].impl == 2);  // 6 took number 1, then 5 number 2
  CHECK(rep.value().tensors[1].impl == 1);
  CHECK(rep.value().num_impls == 3);
}

TEST_CASE("tensors: 12-byte records keep 47-bit sizes whole; pointers are kept beside them") {
  static_assert(sizeof(Tensor) == 12 && alignof(Tensor) == 4);
  std::vector<Tensor> ts(3);  // odd and even positions: no member is misaligned
  const int64_t sizes[] = {kMaxTensorBytes, kUnsized, 0};
  for (size_t i = 0; i < ts.size(); ++i) {
    ts[i].set_bytes(sizes[i]);
    ts[i].device = 0xffff;
    ts[i].partial = i == 1;
  }
  for (size_t i = 0; i < ts.size(); ++i) {
    CHECK(ts[i].bytes() == sizes[i]);
    CHECK(uint32_t{ts[i].device} == 0xffff);
    CHECK(bool(ts[i].partial) == (i == 1));
  }
  auto r = ReadTraceString(
      Header() + Op(0, -1, "aten::a", 1, 2, T(1, 0xfffffffffff0ul) + "," + T(2, 8)), "t.trace");
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.status().message()));
  REQUIRE(r.value().tensor_ptrs.size() == 2);
  CHECK(r.value().tensor_ptrs[0] == 0xfffffffffff0ull);
  CHECK(r.value().tensor_ptrs[1] == 8);
}

TEST_CASE("start times: 32-bit offsets per block, far ones kept whole") {
  StartTimes st;
  std::vector<int64_t> want;
  // Close times, a jump of hours, times before the block's first, both
  // ends of int64, and blocks of 1024 beyond the first.
  const int64_t base = 1795539220003445677;
  for (int64_t i = 0; i < 3000; ++i) want.push_back(base + i * 1000);
  want[5] = base + (int64_t{3} << 40);  // hours later: far
  want[6] = base - 2000000000;          // 2 s before the block's first: fits
  want[7] = base - 3000000000;          // 3 s before: far
  want[1100] = INT64_MIN;
  want[1101] = INT64_MAX;
  for (int64_t t : want) st.push_back(t);
  REQUIRE(st.size() == want.size());
  for (uint32_t i = 0; i < want.size(); ++i) CHECK(st[i] == want[i]);
  // Only the four too far from their block's first time are kept whole:
  // 5, 7, and 1100 and 1101 (block 1 starts at base + 1024000).
  CHECK(st.num_far() == 4);
  st = StartTimes();
  // A block whose first time is extreme: offsets are taken modulo 2^64, so
  // INT64_MIN is 1 past INT64_MAX and fits.
  for (int64_t t : {INT64_MAX, INT64_MAX - 5, INT64_MIN, int64_t{0}}) st.push_back(t);
  CHECK(st[0] == INT64_MAX);
  CHECK(st[1] == INT64_MAX - 5);
  CHECK(st[2] == INT64_MIN);
  CHECK(st[3] == 0);
  CHECK(st.num_far() == 1);
}

TEST_CASE("reader: start times come back exactly, near and far") {
  const std::string text = Header() + Op(0, -1, "aten::a", 5, 6, "") +
                           Alloc(1, 0, 5 + (long{1} << 40), 64, 16) +
                           Op(2, -1, "aten::b", 7, 8, "");
  auto r = ReadTraceString(text, "t.trace");
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.status().message()));
  const Trace& t = r.value();
  REQUIRE(t.event_t0.size() == 3);
  CHECK(t.event_t0[0] == 5);
  CHECK(t.event_t0[1] == 5 + (long{1} << 40));
  CHECK(t.event_t0[2] == 7);
  CHECK(t.event_t0.num_far() == 1);
}

TEST_CASE("large arrays: FreeArray gives the storage back, where `v = {}` keeps it") {
  std::vector<uint32_t> v(1000, 7);
  v = {};
  CHECK(v.capacity() >= 1000);  // why FreeArray exists
  FreeArray(v);
  CHECK(v.capacity() == 0);
}

TEST_CASE("tensors: the size map's bytes, as PyTorch's SizeMap computes them") {
  const int64_t s23[] = {2, 3}, st31[] = {3, 1}, neg[] = {-4}, one[] = {1},
                big[] = {int64_t{1} << 47};
  // max(size * stride) over the zipped dimensions, times the element size.
  CHECK(SizeOfObservation(s23, 2, st31, 2, 4) == 24);
  // A zero-dim tensor (sizes and strides []) is one element.
  CHECK(SizeOfObservation(nullptr, 0, nullptr, 0, 8) == 8);
  // zip stops at the shorter list.
  CHECK(SizeOfObservation(s23, 2, one, 1, 2) == 4);
  // Never negative; absurd shapes are clamped instead of overflowing.
  CHECK(SizeOfObservation(neg, 1, one, 1, 4) == 0);
  CHECK(SizeOfObservation(big, 1, big, 1, 16) == kMaxTensorBytes);
  // Through the reader: a non-strided layout is not sized at all.
  const std::string text =
      Header() + Op(0, -1, "aten::a", 1, 2, T(1, 100, 5)) +
      R"({"k":"op","i":1,"p":-1,"name":"aten::b","t0":3,"t1":4,"tid":1,"scope":"function","seq":-1,"args":[{"impl":2,"ptr":200,"id":null,"aid":null,"dev":"cpu","dtype":"float64","layout":"sparse_coo","sizes":[3],"strides":[1]}]})"
      "\n";
  auto r = ReadTraceString(text, "t.trace");
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.status().message()));
  REQUIRE(r.value().tensors.size() == 2);
  CHECK(r.value().tensors[0].bytes() == 20);  // 5 float32
  CHECK(r.value().tensors[1].bytes() == kUnsized);
}

// Issue #34 (6b): --device is checked by the rule the reader applies to
// the devices a trace names, whatever the input (a raw timeline names none,
// and took any text as its device).
TEST_CASE("reader: --device is a device by the trace reader's rule") {
  for (const char* ok : {"", "cpu", "cuda:0", "hip:3", "xpu:12", "privateuseone:999"}) {
    CAPTURE(ok);
    CHECK(IsDeviceName(ok) == (*ok != '\0'));
    CHECK(CheckDeviceOption(ok).ok());
  }
  for (const char* bad : {"not a device at all", "gpu0", "cuda:", "cuda:01", "cuda:1000", "tpu:0",
                          "cuda:-1", "CUDA:0"}) {
    CAPTURE(bad);
    CHECK(!IsDeviceName(bad));
    const Status s = CheckDeviceOption(bad);
    REQUIRE(!s.ok());
    CHECK(s.message() == "--device \"" + std::string(bad) +
                             "\" is not a device (PyTorch accepts \"type\" or \"type:index\" with "
                             "a known type such as cpu or cuda)");
  }
}

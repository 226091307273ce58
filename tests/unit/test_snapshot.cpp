// CUDA memory snapshots: the pickle subset decoder (values, every refusal
// with its opcode and byte offset, the limits) and the snapshot reader on
// the fixtures of tests/python/make_snapshot_fixtures.py.
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "core/pipeline/analysis.h"
#include "core/read/common/format.h"
#include "core/read/snapshot/pickle.h"
#include "core/read/snapshot/snapshot_reader.h"

using namespace memtl;
using pickle::Fault;
using pickle::FaultInfo;
using pickle::Kind;

namespace {

std::string Bytes(const char* s, size_t n) { return std::string(s, n); }
#define PICKLE(lit) Bytes(lit, sizeof(lit) - 1)

// "80 04 2e" -> the bytes 0x80 0x04 0x2e.
std::string Hex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 3)
    out += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  return out;
}

// {'a': [1, -2, 3.5, 'x', None, True, (1, 2)], 'b': 2**63 + 5, 'c': -2**40,
// 'd': b'\x00\x01'} as Python 3.11's pickle.dumps writes it, protocol 4.
const std::string kProto4 = PICKLE(
    "\x80\x04\x95\x4d\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x01\x61\x94\x5d\x94\x28\x4b\x01"
    "\x4a\xfe\xff\xff\xff\x47\x40\x0c\x00\x00\x00\x00\x00\x00\x8c\x01\x78\x94\x4e\x88\x4b\x01\x4b"
    "\x02\x86\x94\x65\x8c\x01\x62\x94\x8a\x09\x05\x00\x00\x00\x00\x00\x00\x80\x00\x8c\x01\x63\x94"
    "\x8a\x06\x00\x00\x00\x00\x00\xff\x8c\x01\x64\x94\x43\x02\x00\x01\x94\x75\x2e");
// The same without 'd', protocol 2 (which pickles bytes by a REDUCE).
const std::string kProto2 = PICKLE(
    "\x80\x02\x7d\x71\x00\x28\x58\x01\x00\x00\x00\x61\x71\x01\x5d\x71\x02\x28\x4b\x01\x4a\xfe\xff"
    "\xff\xff\x47\x40\x0c\x00\x00\x00\x00\x00\x00\x58\x01\x00\x00\x00\x78\x71\x03\x4e\x88\x4b\x01"
    "\x4b\x02\x86\x71\x04\x65\x58\x01\x00\x00\x00\x62\x71\x05\x8a\x09\x05\x00\x00\x00\x00\x00\x00"
    "\x80\x00\x58\x01\x00\x00\x00\x63\x71\x06\x8a\x06\x00\x00\x00\x00\x00\xff\x75\x2e");
// An object whose __reduce__ calls os.getcwd, protocol 4: STACK_GLOBAL at
// byte 28, then REDUCE.
const std::string kReduce = PICKLE(
    "\x80\x04\x95\x17\x00\x00\x00\x00\x00\x00\x00\x8c\x05\x70\x6f\x73\x69\x78\x94\x8c\x06\x67\x65"
    "\x74\x63\x77\x64\x94\x93\x94\x29\x52\x94\x2e");

void CheckValues(const pickle::Document& d, bool with_bytes) {
  const uint32_t a = d.Get(d.root(), "a");
  REQUIRE(d.kind(a) == Kind::kList);
  const auto items = d.Items(a);
  REQUIRE(items.size() == 7);
  CHECK(d.Int(items[0]) == 1);
  CHECK(d.Int(items[1]) == -2);
  CHECK(d.Number(items[2]) == 3.5);
  CHECK(d.Str(items[3]) == "x");
  CHECK(d.kind(items[4]) == Kind::kNone);
  CHECK(d.Int(items[5]) == 1);
  REQUIRE(d.kind(items[6]) == Kind::kTuple);
  CHECK(d.Int(d.Items(items[6])[1]) == 2);
  CHECK(d.UInt(d.Get(d.root(), "b")) == (uint64_t{1} << 63) + 5);
  CHECK_FALSE(d.Int(d.Get(d.root(), "b")).has_value());
  CHECK(d.Int(d.Get(d.root(), "c")) == -(int64_t{1} << 40));
  CHECK_FALSE(d.UInt(d.Get(d.root(), "c")).has_value());
  if (with_bytes) CHECK(d.Str(d.Get(d.root(), "d")) == std::string("\x00\x01", 2));
  CHECK(d.Get(d.root(), "missing") == pickle::kNoValue);
}

FaultInfo Refused(const std::string& bytes, std::string* message = nullptr) {
  FaultInfo f;
  auto d = pickle::Decode(bytes, "x.pickle", &f);
  CHECK_FALSE(d.ok());
  if (message != nullptr && !d.ok()) *message = d.status().message();
  return f;
}

std::string ReadFixture(const std::string& name) {
  std::ifstream in(std::string(MEMTL_SOURCE_DIR) + "/fixtures/snapshot/" + name, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

int64_t DiagnosticCount(const Diagnostics& d, std::string_view starts) {
  for (const auto& [kind, e] : d.entries())
    if (kind.starts_with(starts)) return static_cast<int64_t>(e.count);
  return 0;
}

}  // namespace

TEST_CASE("snapshot pickle: the values of protocols 2, 4 and 5") {
  auto d4 = pickle::Decode(kProto4, "x");
  REQUIRE(d4.ok());
  CheckValues(d4.value(), true);
  std::string p5 = kProto4;
  p5[1] = '\x05';
  auto d5 = pickle::Decode(p5, "x");
  REQUIRE(d5.ok());
  CheckValues(d5.value(), true);
  auto d2 = pickle::Decode(kProto2, "x");
  REQUIRE(d2.ok());
  CheckValues(d2.value(), false);
}

TEST_CASE("snapshot pickle: memo, marks and shared values") {
  // [x, x] where x = [] (memoized, fetched again), then x.append(x): a
  // cycle; POP leaves the outer list. EMPTY_LIST MEMOIZE MARK EMPTY_LIST
  // MEMOIZE BINGET 1 APPENDS BINGET 1 BINGET 1 APPEND POP STOP.
  auto d = pickle::Decode(Hex("80 04 5d 94 28 5d 94 68 01 65 68 01 68 01 61 30 2e"), "x");
  REQUIRE(d.ok());
  const auto outer = d.value().Items(d.value().root());
  REQUIRE(outer.size() == 2);
  CHECK(outer[0] == outer[1]);
  CHECK(d.value().Items(outer[0]).size() == 1);
  CHECK(d.value().Items(outer[0])[0] == outer[0]);
}

TEST_CASE("snapshot pickle: opcodes that are not data are refused with their offset") {
  std::string message;
  FaultInfo f = Refused(kReduce, &message);
  CHECK(f.fault == Fault::kForbiddenOpcode);
  CHECK(f.opcode == 0x93);
  CHECK(f.offset == 28);
  CHECK(message.find("STACK_GLOBAL") != std::string::npos);
  CHECK(message.find("byte 28") != std::string::npos);
  // Protocol 2's bytes: {'d': GLOBAL _codecs.encode ...}.
  f = Refused(Hex("80 02 7d 71 00 28 58 01 00 00 00 64 71 01") + "c_codecs\nencode\nq\x02u.");
  CHECK(f.fault == Fault::kForbiddenOpcode);
  CHECK(f.opcode == 'c');
  CHECK(f.offset == 14);
  for (const char op : {'R', 'b', 'i', 'o', 'P', 'Q'}) {
    f = Refused(Hex("80 04 4e") + op + ".");
    CHECK(f.fault == Fault::kForbiddenOpcode);
    CHECK(f.offset == 3);
  }
  for (const unsigned char op : {0x81, 0x82, 0x83, 0x84, 0x92, 0x97, 0x98}) {
    f = Refused(Hex("80 04 4e") + static_cast<char>(op) + ".");
    CHECK(f.fault == Fault::kForbiddenOpcode);
    CHECK(f.opcode == op);
  }
  // Text forms and sets are no snapshot's; 0xff is no opcode at all.
  CHECK(Refused(Hex("80 04") + "I1\n.").fault == Fault::kUnknownOpcode);
  CHECK(Refused(Hex("80 04 8f 2e")).fault == Fault::kUnknownOpcode);
  f = Refused(Hex("80 04 ff 2e"), &message);
  CHECK(f.fault == Fault::kUnknownOpcode);
  CHECK(message.find("unknown opcode 0xff") != std::string::npos);
}

TEST_CASE("snapshot pickle: truncation, malformed stacks and limits") {
  CHECK(Refused(kProto4.substr(0, 40)).fault == Fault::kTruncated);
  CHECK(Refused(kProto4.substr(0, kProto4.size() - 1)).fault == Fault::kTruncated);
  CHECK(Refused(Hex("80 04 58 ff ff ff 0f") + "ab.").fault == Fault::kLimit);  // a 256 MiB string
  CHECK(Refused(Hex("80 04") + "a.").fault == Fault::kMalformed);              // APPEND on nothing
  CHECK(Refused(Hex("80 04 4b 01") + "a.").fault == Fault::kMalformed);        // onto an int
  CHECK(Refused(Hex("80 04 68 05 2e")).fault == Fault::kMalformed);            // never memoized
  CHECK(Refused(Hex("80 04") + "e.").fault == Fault::kMalformed);              // no MARK
  CHECK(Refused(Hex("80 04 2e")).fault == Fault::kMalformed);                  // empty stack
  CHECK(Refused(Hex("80 01 4e 2e")).fault == Fault::kNotPickle);
  CHECK(Refused("N.").fault == Fault::kNotPickle);
  // 10-byte integers (more than 64 bits), LONG4 lengths past 9 bytes.
  CHECK(Refused(Hex("80 04 8a 0a 01 02 03 04 05 06 07 08 09 0a 2e")).fault == Fault::kLimit);
  CHECK(Refused(Hex("80 04 8b ff ff ff ff 2e")).fault == Fault::kLimit);
  // A memo key past the value limit is refused, not allocated.
  CHECK(Refused(Hex("80 04 4e 72 ff ff ff ff 2e")).fault == Fault::kLimit);
  // MARKs nested past kMaxMarks.
  CHECK(Refused(Hex("80 04") + std::string(pickle::kMaxMarks + 1, '(') + ".").fault ==
        Fault::kLimit);
  const std::string ok = Hex("80 04") + std::string(pickle::kMaxMarks, '(') +
                         std::string(pickle::kMaxMarks, 'l') + ".";
  CHECK(pickle::Decode(ok, "x").ok());
}

TEST_CASE("snapshot: detected by its first bytes, plain or gzip'd") {
  CHECK(SniffFormat(kProto4, true) == InputFormat::kSnapshot);
  CHECK(SniffFormat(std::string("\x80"), false) == InputFormat::kNeedMore);
  CHECK(SniffFormat(std::string("\x80\x01", 2), true) == InputFormat::kMemtlTrace);
  const std::string gz = ReadFixture("train.pickle.gz");
  REQUIRE(gz.size() > 100);
  CHECK(OpenInputFromMemory(gz, "train.pickle.gz").format == InputFormat::kSnapshot);
}

TEST_CASE("snapshot: a training run's entries, frames and segments") {
  auto r = ReadSnapshotString(ReadFixture("train.pickle.gz"), "train.pickle.gz");
  REQUIRE(r.ok());
  const Trace& t = r.value().trace;
  REQUIRE(t.devices.size() == 1);
  CHECK(t.devices[0].name == "cuda:0");
  CHECK(r.value().diagnostics.empty());
  // Every alloc and free_completed is an allocation record.
  size_t allocs = 0, frees = 0;
  for (const AllocInfo& a : t.allocs) (a.bytes > 0 ? allocs : frees)++;
  CHECK(allocs == 38);
  CHECK(frees == 26);
  CHECK(t.strings.Contains("nn.Module: linear.forward"));
  CHECK(t.strings.Contains("AddmmBackward0"));
  CHECK(t.strings.Contains("aten::addmm"));
  CHECK(t.strings.Contains("/home/user/train.py(25): main"));
  // Reserved: one 2 MiB segment, from the first entry.
  REQUIRE_FALSE(r.value().reserved.empty());
  CHECK(r.value().reserved.front().bytes == 0);
  CHECK(t.devices[0].max_total_reserved == 2 << 20);
  CHECK(t.devices[0].reserved_at_peak == 2 << 20);
  CHECK(t.devices[0].max_total_allocated > 0);
}

TEST_CASE("snapshot: a trace that starts late says so, its memory from before it one block") {
  auto r = ReadSnapshotString(ReadFixture("truncated.pickle.gz"), "truncated.pickle.gz");
  REQUIRE(r.ok());
  CHECK(DiagnosticCount(r.value().diagnostics, "snapshot whose trace starts after") > 0);
  const Trace& t = r.value().trace;
  REQUIRE_FALSE(t.allocs.empty());
  CHECK(t.alloc_ptrs[0] == kPreProfileAddress);
  CHECK(t.events[0].kind == EventKind::kAlloc);
  // The reserved total at the start is the segments', the trace's
  // segment_alloc being among the entries dropped.
  CHECK(r.value().reserved.front().bytes == 2 << 20);
}

TEST_CASE("snapshot: devices, expandable segments and an out-of-memory entry") {
  auto m = ReadSnapshotString(ReadFixture("multi_device.pickle.gz"), "m");
  REQUIRE(m.ok());
  CHECK(m.value().trace.devices.size() == 2);
  auto e = ReadSnapshotString(ReadFixture("expandable.pickle.gz"), "e");
  REQUIRE(e.ok());
  CHECK(DiagnosticCount(e.value().diagnostics, "out-of-memory error") == 1);
  // mapped 3 MiB, then 2 more, then 2 unmapped
  const auto& res = e.value().reserved;
  REQUIRE(res.size() == 4);
  CHECK(res[0].bytes == 0);
  CHECK(res[1].bytes == 3 << 20);
  CHECK(res[2].bytes == 5 << 20);
  CHECK(res[3].bytes == 3 << 20);
}

TEST_CASE("snapshot: a pickle of another shape is no snapshot") {
  auto r = ReadSnapshotString(kProto4, "x.pickle");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("no CUDA memory snapshot") != std::string::npos);
}

TEST_CASE("snapshot: categories inferred from the frames") {
  const std::string path = std::string(MEMTL_SOURCE_DIR) + "/fixtures/snapshot/train.pickle.gz";
  auto c = RunPipeline(path);
  REQUIRE(c.ok());
  CHECK(c.value()->inferred);
  const InferredCategories& inf = c.value()->analysis->inferred;
  CHECK(inf.bytes_by_rule[static_cast<int>(InferRule::kParameter)] > 0);
  CHECK(inf.bytes_by_rule[static_cast<int>(InferRule::kOptimizerState)] > 0);
  CHECK(inf.bytes_by_rule[static_cast<int>(InferRule::kGradient)] > 0);
  CHECK(inf.bytes_by_rule[static_cast<int>(InferRule::kTemporary)] > 0);
  CHECK(inf.bytes_by_rule[static_cast<int>(InferRule::kActivationSaved)] > 0);
  CHECK(inf.bytes_by_rule[static_cast<int>(InferRule::kInput)] > 0);
}

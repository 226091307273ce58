// The CUPTI collector (collect/cupti/) without a GPU: buffers of activity
// records laid out here, decoded with CUPTI's own record iterator, written
// as a memtl trace, and that trace read back by memtl's reader and
// pipeline.
#include <doctest/doctest.h>

#include <cupti.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "collect/cupti/cupti_activity.h"
#include "collect/cupti/cupti_trace.h"
#include "core/pipeline/analysis.h"
#include "core/read/memtl/trace_reader.h"

using namespace memtl_cupti;

namespace {

// Records laid out one after another, as CUPTI fills a buffer.
struct Buffer {
  alignas(8) std::vector<uint8_t> bytes;
  template <typename R>
  void Add(const R& r) {
    const size_t at = bytes.size();
    bytes.resize(at + sizeof(R));
    std::memcpy(bytes.data() + at, &r, sizeof(R));
  }
};

CUpti_ActivityMemory4 Memory(CUpti_ActivityMemoryOperationType op, uint64_t t, uint64_t addr,
                             uint64_t bytes, CUpti_ActivityMemoryKind kind, uint32_t device = 0) {
  CUpti_ActivityMemory4 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  m.memoryOperationType = op;
  m.memoryKind = kind;
  m.timestamp = t;
  m.address = addr;
  m.bytes = bytes;
  m.deviceId = device;
  return m;
}

CUpti_ActivityMarker2 Marker(CUpti_ActivityFlag flag, uint64_t t, uint32_t id, const char* name) {
  CUpti_ActivityMarker2 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MARKER;
  m.flags = flag;
  m.timestamp = t;
  m.id = id;
  m.name = name;
  m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  m.objectId.pt.threadId = 42;
  return m;
}

// One step of a CUDA program: an NVTX range "step" with a nested range
// "forward", 1 MiB and 256 KiB allocated on cuda:0 inside them, a kernel,
// a copy, pinned host memory, a pool, then the 256 KiB freed after it.
Activity OneStep() {
  constexpr auto kAlloc = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  constexpr auto kRelease = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  Buffer b;
  b.Add(Marker(CUPTI_ACTIVITY_FLAG_MARKER_START, 100, 1, "step"));
  b.Add(Memory(kAlloc, 110, 0x7f0000000000, 1 << 20, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE));
  b.Add(Marker(CUPTI_ACTIVITY_FLAG_MARKER_START, 120, 2, "forward <b>&"));
  b.Add(Memory(kAlloc, 130, 0x7f0000100000, 256 << 10, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE));
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = 140;
  k.end = 150;
  k.name = "gemm_kernel";
  b.Add(k);
  b.Add(Marker(CUPTI_ACTIVITY_FLAG_MARKER_END, 160, 2, nullptr));
  CUpti_ActivityMemcpy6 c{};
  c.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  c.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  c.start = 170;
  c.end = 180;
  c.bytes = 4096;
  b.Add(c);
  b.Add(Memory(kAlloc, 185, 0x10000, 4096, CUPTI_ACTIVITY_MEMORY_KIND_PINNED));
  CUpti_ActivityMemoryPool3 p{};
  p.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
  p.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED;
  p.timestamp = 186;
  p.address = 0x9000;
  p.size = 2 << 20;
  b.Add(p);
  b.Add(Marker(CUPTI_ACTIVITY_FLAG_MARKER_END, 190, 1, nullptr));
  b.Add(Memory(kRelease, 200, 0x7f0000100000, 256 << 10, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE));
  CUpti_ActivityDevice5 other{};
  other.kind = CUPTI_ACTIVITY_KIND_DEVICE;
  b.Add(other);
  Activity a;
  CHECK(DecodeBuffer(b.bytes.data(), b.bytes.size(), a) == 12);
  return a;
}

std::string Text(const Activity& a) {
  std::string text;
  WriteTrace(a, "memtl_cupti", [&](std::string_view s) { text += s; });
  return text;
}

}  // namespace

TEST_CASE("cupti: a buffer of activity records decoded") {
  const Activity a = OneStep();
  REQUIRE(a.memory.size() == 4);
  CHECK(a.memory[0].bytes == (1 << 20));
  CHECK(a.memory[3].bytes == -(256 << 10));
  CHECK_FALSE(a.memory[0].host);
  CHECK(a.memory[2].host);  // pinned
  REQUIRE(a.ranges.size() == 2);
  CHECK(a.names[a.ranges[0].name] == "forward <b>&");  // ends first
  CHECK(a.ranges[1].start == 100);
  CHECK(a.ranges[1].end == 190);
  CHECK(a.ranges[1].thread == 42);
  CHECK(a.open.empty());
  REQUIRE(a.kernels.size() == 1);
  CHECK(a.names[a.kernels[0].name] == "gemm_kernel");
  REQUIRE(a.copies.size() == 1);
  CHECK(a.names[a.copies[0].name] == "Memcpy HtoD");
  REQUIRE(a.pools.size() == 1);
  CHECK(a.pools[0].size == (2u << 20));
  CHECK(a.other_records == 1);
}

TEST_CASE("cupti: the trace it writes is a memtl trace, nested by time") {
  const std::string text = Text(OneStep());
  auto t = memtl::ReadTraceString(text, "cupti.trace.jsonl");
  REQUIRE(t.ok());
  const memtl::Trace& trace = t.value();
  // Devices in the order their memory first appears.
  REQUIRE(trace.devices.size() == 2);
  CHECK(trace.devices[0].name == "cuda:0");
  CHECK(trace.devices[1].name == "cpu");
  // step > (alloc, forward > (alloc, kernel), copy, pinned alloc); the free after.
  REQUIRE(trace.events.size() == 8);
  CHECK(trace.Name(trace.events[0]) == "step");
  CHECK(trace.events[1].parent == 0);  // 1 MiB, in step
  CHECK(trace.Name(trace.events[2]) == "forward <b>&");
  CHECK(trace.events[2].parent == 0);
  CHECK(trace.events[3].parent == 2);               // 256 KiB, in forward
  CHECK(trace.events[4].parent == 2);               // the kernel
  CHECK(trace.events[5].parent == 0);               // the copy, after forward
  CHECK(trace.events[6].parent == 0);               // pinned host memory
  CHECK(trace.events[7].parent == memtl::kNone32);  // the free, after step
  // Strings are escaped as JSON, not HTML: the reader gives them back whole.
  CHECK(text.find(R"("forward <b>&")") != std::string::npos);
  // A pool is reserved memory, not allocated: after it is made, the free
  // leaves 1 MiB allocated and 3 MiB reserved.
  CHECK(text.find(R"("total_allocated":1310720,"total_reserved":1310720)") != std::string::npos);
  CHECK(text.find(R"("total_allocated":1048576,"total_reserved":3145728)") != std::string::npos);
}

TEST_CASE("cupti: memtl's pipeline gives its peak per device") {
  char path[] = "/tmp/memtl_cupti_testXXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  {
    std::ofstream out(path);
    out << Text(OneStep());
  }
  memtl::PipelineOptions options;
  options.device = "cuda:0";
  auto c = memtl::RunPipeline(path, options);
  std::remove(path);
  REQUIRE(c.ok());
  int64_t live = 0, peak = 0;
  for (const memtl::TimelineEvent& e : c.value()->timeline) {
    if (e.device != c.value()->device) continue;
    live += e.action == memtl::Action::kDestroy ? -e.bytes : e.bytes;
    peak = std::max(peak, live);
  }
  CHECK(peak == (1 << 20) + (256 << 10));
  CHECK(live == (1 << 20));
}

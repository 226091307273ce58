// What the CUPTI collector (memtl_cupti.cpp) keeps of CUPTI's activity
// records: memory allocations and releases (CUPTI_ACTIVITY_KIND_MEMORY2,
// with their addresses, sizes, devices and streams), memory pools
// (MEMORY_POOL), kernels (CONCURRENT_KERNEL), copies (MEMCPY) and NVTX
// ranges (MARKER). Decoding is apart from the CUDA driver: a buffer of
// records is read with cuptiActivityGetNextRecord, which needs no GPU, so
// the unit tests decode buffers they lay out themselves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace memtl_cupti {

// An allocation (bytes > 0) or a release (bytes < 0).
struct Memory {
  uint64_t time = 0;  // ns, CUPTI's clock
  uint64_t address = 0;
  int64_t bytes = 0;
  uint32_t device = 0;  // the CUDA device; for host memory, unused
  uint32_t stream = 0;
  bool host = false;    // pinned or pageable host memory, not the device's
  bool pooled = false;  // from a memory pool (cudaMallocAsync)
};

// A memory pool made, trimmed or destroyed: its size after the event.
struct Pool {
  uint64_t time = 0;
  uint64_t address = 0;
  uint64_t size = 0;  // 0 once destroyed
  uint32_t device = 0;
};

// A kernel or a copy on the device, or an NVTX range on a host thread.
struct Span {
  uint64_t start = 0, end = 0;
  uint32_t name = 0;  // Activity::names
  uint32_t device = 0;
  uint64_t thread = 0;  // ranges: the host thread
};

struct Activity {
  std::vector<Memory> memory;
  std::vector<Pool> pools;
  std::vector<Span> kernels, copies, ranges;
  // Names, each once (kernels repeat theirs).
  std::vector<std::string> names;
  std::unordered_map<std::string, uint32_t> name_ids;
  // Ranges started and not yet ended, by CUPTI's marker id: the index of
  // their start's Span, kept aside until the end comes.
  std::unordered_map<uint32_t, Span> open;
  uint64_t other_records = 0;    // kinds the collector does not keep
  uint64_t dropped_records = 0;  // CUPTI's own count of records it lost

  uint32_t Name(std::string_view name);
};

// Reads the `valid` bytes of one buffer CUPTI completed into `out`;
// returns the number of records read.
size_t DecodeBuffer(uint8_t* buffer, size_t valid, Activity& out);

}  // namespace memtl_cupti

// Fuzz target: the trace reader (gzip detection, line splitting, JSON
// cursor, record validation) on arbitrary bytes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/read/memtl/trace_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  memtl::ReadOptions options;
  options.partial = size % 2 == 0;  // exercise both modes
  auto r = memtl::ReadTraceString(std::string(reinterpret_cast<const char*>(data), size), "fuzz",
                                  options);
  (void)r.ok();
  return 0;
}

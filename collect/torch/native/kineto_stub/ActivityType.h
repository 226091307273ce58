// Stand-in for Kineto's ActivityType.h, which torch 1.13's profiler headers
// include but Debian's libtorch-dev does not ship (Debian builds torch
// without Kineto). The native walk only needs the enum as a field type of
// the profiler's records: Kineto declares it as a plain `enum class` (int
// underlying type), and so does this. The module checks at import that its
// record layout matches torch's (memtl_torch_native.cpp), so a mismatch
// falls back to the Python walk instead of misreading records.
#pragma once

namespace libkineto {

enum class ActivityType {
  CPU_OP = 0,
  USER_ANNOTATION,
  GPU_USER_ANNOTATION,
  GPU_MEMCPY,
  GPU_MEMSET,
  CONCURRENT_KERNEL,
  EXTERNAL_CORRELATION,
  CUDA_RUNTIME,
  CUDA_PROFILER_RANGE,
  GLOW_RUNTIME,
  CPU_INSTANT_EVENT,
  PYTHON_FUNCTION,
  OVERHEAD,
  ENUM_COUNT
};

}  // namespace libkineto

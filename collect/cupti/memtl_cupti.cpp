// libmemtl_cupti.so: a memtl trace from any CUDA program (PyTorch or not:
// JAX, TensorRT, custom kernels), recorded with CUPTI's activity API. Load
// it with CUDA_INJECTION64_PATH=/path/libmemtl_cupti.so (the CUDA driver
// calls InitializeInjection when the program initializes CUDA) or with
// LD_PRELOAD (it starts when loaded). It records memory, memory pools,
// kernels, copies and NVTX ranges, and at exit writes the trace to
// MEMTL_CUPTI_OUTPUT (default memtl_cupti.PID.trace.jsonl.gz; plain text
// unless the name ends in .gz), written whole under a temporary name and
// renamed, so a crash leaves no partial trace. Where CUPTI cannot record
// (no GPU, no driver) it says so in one line on stderr (once: not again in
// the processes the program starts) and the program runs on without it; nothing is written for a
// process that used no GPU.
#include <cupti.h>
#include <dlfcn.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>

#include "collect/cupti/cupti_activity.h"
#include "collect/cupti/cupti_trace.h"

namespace {

constexpr size_t kBufferBytes = 8 << 20;
constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_MEMORY2, CUPTI_ACTIVITY_KIND_MEMORY_POOL,
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MARKER};

std::mutex g_mu;
memtl_cupti::Activity* g_activity = nullptr;  // lives to the process's end

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext context, uint32_t stream, uint8_t* buffer, size_t,
                              size_t valid) {
  {
    const std::lock_guard<std::mutex> lock(g_mu);
    memtl_cupti::DecodeBuffer(buffer, valid, *g_activity);
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS)
      g_activity->dropped_records += dropped;
  }
  std::free(buffer);
}

std::string ResultText(CUptiResult r) {
  const char* text = nullptr;
  return cuptiGetResultString(r, &text) == CUPTI_SUCCESS && text != nullptr ? text : "?";
}

// Writes the trace under a temporary name, then renames it into place.
bool WriteFile(const std::string& path) {
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  const bool gz = path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
  gzFile z = gz ? gzopen(tmp.c_str(), "wb6") : nullptr;
  FILE* f = gz ? nullptr : std::fopen(tmp.c_str(), "wb");
  if (z == nullptr && f == nullptr) return false;
  bool ok = true;
  memtl_cupti::WriteTrace(*g_activity, "memtl_cupti", [&](std::string_view s) {
    if (gz) {
      ok &= gzwrite(z, s.data(), static_cast<unsigned>(s.size())) == static_cast<int>(s.size());
    } else {
      ok &= std::fwrite(s.data(), 1, s.size(), f) == s.size();
    }
  });
  ok &= gz ? gzclose(z) == Z_OK : std::fclose(f) == 0;
  if (ok) ok = std::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) std::remove(tmp.c_str());
  return ok;
}

void Finish() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  const std::lock_guard<std::mutex> lock(g_mu);
  const memtl_cupti::Activity& a = *g_activity;
  if (a.memory.empty() && a.kernels.empty() && a.copies.empty()) return;  // no GPU work
  const char* out = std::getenv("MEMTL_CUPTI_OUTPUT");
  const std::string path = out != nullptr && *out != '\0'
                               ? out
                               : "memtl_cupti." + std::to_string(getpid()) + ".trace.jsonl.gz";
  if (!WriteFile(path)) {
    std::fprintf(stderr, "memtl_cupti: %s: could not be written\n", path.c_str());
    return;
  }
  std::fprintf(
      stderr, "memtl_cupti: wrote %s (%zu memory events, %zu kernels, %zu NVTX ranges%s)\n",
      path.c_str(), a.memory.size(), a.kernels.size(), a.ranges.size(),
      a.dropped_records > 0 ? "; CUPTI dropped records: enlarge nothing, rerun shorter" : "");
}

// NVTX ranges reach CUPTI only through NVTX's injection hook: point it at
// the libcupti this library uses, unless the user chose one.
void HookNvtx() {
  if (std::getenv("NVTX_INJECTION64_PATH") != nullptr) return;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuptiActivityEnable), &info) != 0 &&
      info.dli_fname != nullptr)
    setenv("NVTX_INJECTION64_PATH", info.dli_fname, 0);
}

void Start() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_activity = new memtl_cupti::Activity();
    HookNvtx();
    CUptiResult r = cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted);
    for (const CUpti_ActivityKind kind : kKinds) {
      if (r != CUPTI_SUCCESS) break;
      r = cuptiActivityEnable(kind);
    }
    if (r != CUPTI_SUCCESS) {
      for (const CUpti_ActivityKind kind : kKinds) cuptiActivityDisable(kind);
      // Said once per run: the processes it starts inherit LD_PRELOAD, and
      // this variable with it.
      if (std::getenv("MEMTL_CUPTI_SAID") != nullptr) return;
      setenv("MEMTL_CUPTI_SAID", "1", 1);
      std::fprintf(stderr,
                   "memtl_cupti: CUPTI cannot record here (%s: no GPU or CUDA driver?); the "
                   "program runs on without it\n",
                   ResultText(r).c_str());
      return;
    }
    std::atexit(Finish);
  });
}

__attribute__((constructor)) void OnLoad() { Start(); }

}  // namespace

// The CUDA driver's entry point for CUDA_INJECTION64_PATH.
extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  Start();
  return 1;
}

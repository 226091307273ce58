// A small CUDA program that is not PyTorch, for the CUPTI collector's GPU
// check (tests/gpu/cupti_check.sh): it allocates and frees device memory
// with cudaMalloc and from the default memory pool, inside NVTX ranges,
// runs a kernel, and prints what it allocated at its peak and what
// cudaMemGetInfo saw, as "key value" lines.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>

__global__ void Fill(float* p, size_t n) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) p[i] = 1.0f;
}

#define CHECK(call)                                                               \
  do {                                                                            \
    cudaError_t e = (call);                                                       \
    if (e != cudaSuccess) {                                                       \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e));             \
      return 1;                                                                   \
    }                                                                             \
  } while (0)

int main() {
  CHECK(cudaFree(nullptr));  // the context, before the first reading
  size_t free0 = 0, total = 0;
  CHECK(cudaMemGetInfo(&free0, &total));
  const size_t a = 64 << 20, b = 16 << 20, c = 1 << 20, d = 8 << 20;
  float *pa = nullptr, *pb = nullptr, *pc = nullptr, *pd = nullptr;
  nvtxRangePushA("setup");
  CHECK(cudaMalloc(&pa, a));
  CHECK(cudaMalloc(&pb, b));
  nvtxRangePop();
  nvtxRangePushA("step");
  CHECK(cudaMalloc(&pc, c));
  CHECK(cudaMallocAsync(&pd, d, 0));
  Fill<<<(a / 4 + 255) / 256, 256>>>(pa, a / 4);
  CHECK(cudaDeviceSynchronize());
  size_t free1 = 0;
  CHECK(cudaMemGetInfo(&free1, &total));
  CHECK(cudaFree(pb));
  CHECK(cudaFreeAsync(pd, 0));
  CHECK(cudaDeviceSynchronize());
  nvtxRangePop();
  CHECK(cudaFree(pc));
  CHECK(cudaFree(pa));
  std::printf("peak_allocated %zu\n", a + b + c + d);
  std::printf("end_allocated %d\n", 0);
  std::printf("meminfo_delta_at_peak %zu\n", free0 - free1);
  return 0;
}

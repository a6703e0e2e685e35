// smem_fill_probe: how long one block takes to pull N bytes of a warm-L2 buffer into its shared
// memory, with every thread's 16-byte cp.async or with one thread's bulk copies (the copy engine
// TMA drives), for 1, 16 and 128 blocks at once. At sequence 512 a 32-row attention block must
// pull all of K and V (128 KiB at head dim 64) before its last tile; this says what that costs.
//
//   nvcc -arch=sm_90a -std=c++17 -O3 lab/smem_fill_probe.cu -o smem_fill_probe
//
// One line per (method, blocks, bytes): the per-call time by CUDA-graph replay, the time above a
// kernel that copies nothing, and the bytes per microsecond per block that implies.
#include "gpu_timing.cuh"

constexpr int kThreads = 256;
constexpr int kSources = 8;  // blocks read one of 8 regions, as the 16 blocks of a head share K/V
constexpr int kRegionBytes = 128 * 1024;

__device__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__global__ void fill_cp_async(const char* src, int bytes, int* sink) {
  extern __shared__ __align__(128) char tile[];
  const char* region = src + size_t(blockIdx.x % kSources) * kRegionBytes;
  for (int off = threadIdx.x * 16; off < bytes; off += kThreads * 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(tile + off)),
                 "l"(region + off));
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0 && bytes > 0 && tile[bytes - 1] == 127) atomicAdd(sink, 1);
}

// Chunks of `chunk` bytes, all issued by thread 0 and completing on one mbarrier.
__global__ void fill_bulk(const char* src, int bytes, int chunk, int* sink) {
  extern __shared__ __align__(128) char tile[];
  __shared__ __align__(8) unsigned long long bar;
  const char* region = src + size_t(blockIdx.x % kSources) * kRegionBytes;
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_u32(&bar)));
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(&bar)),
                 "r"(bytes)
                 : "memory");
    for (int off = 0; off < bytes; off += chunk)
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
              smem_u32(tile + off)),
          "l"(region + off), "r"(chunk), "r"(smem_u32(&bar))
          : "memory");
  }
  __syncthreads();
  unsigned done = 0;
  while (!done)
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_u32(&bar))
        : "memory");
  if (threadIdx.x == 0 && bytes > 0 && tile[bytes - 1] == 127) atomicAdd(sink, 1);
}

int main() {
  char* src;
  int* sink;
  CHECK(cudaMalloc(&src, size_t(kSources) * kRegionBytes));
  CHECK(cudaMemset(src, 1, size_t(kSources) * kRegionBytes));
  CHECK(cudaMalloc(&sink, 4));
  const int max_smem = 200 * 1024;
  CHECK(cudaFuncSetAttribute(fill_cp_async, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem));
  CHECK(cudaFuncSetAttribute(fill_bulk, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem));
  const int blocks[] = {1, 16, 128};
  const int sizes[] = {0, 32 * 1024, 64 * 1024, 96 * 1024, 128 * 1024};
  for (int g : blocks) {
    float empty_cp = 0, empty_bulk = 0;
    for (int bytes : sizes) {
      // Same shared memory for every size, so that the occupancy (one block per SM) stays fixed.
      const float cp = median_graph_us([&](cudaStream_t st) {
        fill_cp_async<<<g, kThreads, max_smem, st>>>(src, bytes, sink);
      }, 20, 30);
      const float bulk4 = median_graph_us([&](cudaStream_t st) {
        fill_bulk<<<g, kThreads, max_smem, st>>>(src, bytes, 4096, sink);
      }, 20, 30);
      const float bulk16 = median_graph_us([&](cudaStream_t st) {
        fill_bulk<<<g, kThreads, max_smem, st>>>(src, bytes, 16384, sink);
      }, 20, 30);
      CHECK(cudaGetLastError());
      if (bytes == 0) {
        empty_cp = cp;
        empty_bulk = bulk4;
      }
      auto rate = [&](float t, float base) { return t > base ? bytes / (t - base) / 1e3 : 0.f; };
      std::printf(
          "blocks=%3d bytes=%6d  cp.async %.2f us (+%.2f, %.1f GB/s/block)  bulk 4K %.2f us "
          "(+%.2f, %.1f GB/s/block)  bulk 16K %.2f us (+%.2f, %.1f GB/s/block)\n",
          g, bytes, cp, cp - empty_cp, rate(cp, empty_cp), bulk4, bulk4 - empty_bulk,
          rate(bulk4, empty_bulk), bulk16, bulk16 - empty_bulk, rate(bulk16, empty_bulk));
    }
  }
  CHECK(cudaFree(src));
  CHECK(cudaFree(sink));
  return 0;
}

#pragma once
// Thread-block clusters (sm_90), for SPLIT_KV: this block's rank, a peer's shared-memory address,
// and the cluster-wide barrier whose release/acquire orders shared-memory writes across the
// cluster.
#include "ptx.cuh"

namespace evo {
namespace fa {

__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r = 0;
#if __CUDA_ARCH__ >= 900
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
#endif
  return r;
}
__device__ __forceinline__ unsigned peer_smem_addr(const void* p, unsigned rank) {
  unsigned out = 0;
#if __CUDA_ARCH__ >= 900
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(smem_addr(p)), "r"(rank));
#endif
  return out;
}
__device__ __forceinline__ void store_peer_f32(unsigned addr, float v) {
#if __CUDA_ARCH__ >= 900
  asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(addr), "f"(v) : "memory");
#endif
}
// A block may touch another's shared memory only once that block has started: every block
// arrives (relaxed: it orders nothing) as it starts, and waits before its first remote access.
__device__ __forceinline__ void cluster_arrive_on_start() {
#if __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait_until_started() {
#if __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
#endif
}
// Release: this thread's earlier writes, remote ones included, are visible to every block of the
// cluster once it has passed the barrier (acquire).
__device__ __forceinline__ void cluster_sync() {
#if __CUDA_ARCH__ >= 900
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::
          : "memory");
#else
  __trap();  // SPLIT_KV > 1 needs clusters, which exist from sm_90 on
#endif
}

}  // namespace fa
}  // namespace evo

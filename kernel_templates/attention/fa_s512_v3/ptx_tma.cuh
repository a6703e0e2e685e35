#pragma once
// The tensor memory accelerator (sm_90a): mbarriers that count a stage's bytes in, bulk tensor
// copies in and out through the tensor maps of tensor_maps.h, and stmatrix for the
// output tile they store.
#include "../params.h"
#include "ptx.cuh"

namespace evo {
namespace fa {

// A stage's mbarrier completes a phase when its expected bytes have landed; waiters name the
// phase by its parity. Off sm_90a the TMA path cannot be instantiated (WGMMA is required), so
// these are empty there.

__device__ __forceinline__ void mbarrier_init(unsigned long long* bar, unsigned count) {
#if EVO_HAS_WGMMA
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
#endif
}
// Makes the initialised barriers visible to the copy engine before any copy names them.
__device__ __forceinline__ void mbarrier_init_fence() {
#if EVO_HAS_WGMMA
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
// The calling thread's arrival, announcing `bytes` still to land in this phase.
__device__ __forceinline__ void mbarrier_expect_bytes(unsigned long long* bar, unsigned bytes) {
#if EVO_HAS_WGMMA
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
#endif
}
// The calling thread's plain arrival (a computing warp freeing a stage for the producer).
__device__ __forceinline__ void mbarrier_arrive(unsigned long long* bar) {
#if EVO_HAS_WGMMA
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
#endif
}
__device__ __forceinline__ void mbarrier_wait(unsigned long long* bar, unsigned parity) {
#if EVO_HAS_WGMMA
  unsigned done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  } while (!done);
#endif
}
// A warpgroup's registers per thread, lowered or raised (every thread of the warpgroup, together):
// the producer warpgroup gives registers back to the pool, the computing ones take them.
template <int kRegs>
__device__ __forceinline__ void warpgroup_lower_registers() {
#if EVO_HAS_WGMMA
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}
template <int kRegs>
__device__ __forceinline__ void warpgroup_raise_registers() {
#if EVO_HAS_WGMMA
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}
// Brings a tensor map into the copy engine's cache ahead of the first copy that names it.
__device__ __forceinline__ void prefetch_tensor_map(const FaParams::TensorMap& map) {
#if EVO_HAS_WGMMA
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(&map))
               : "memory");
#endif
}
// One box of a 3-d tensor map (column, row, batch*head) into shared memory, completing on `bar`.
__device__ __forceinline__ void tma_load_box(void* dst, const FaParams::TensorMap& map, int col,
                                             int row, int bh, unsigned long long* bar) {
#if EVO_HAS_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<unsigned long long>(&map)), "r"(col), "r"(row), "r"(bh),
      "r"(smem_addr(bar))
      : "memory");
#endif
}
// One box of shared memory out through a 3-d tensor map; rows past the map's bounds (the end of
// the sequence) are not written.
__device__ __forceinline__ void tma_store_box(const void* src, const FaParams::TensorMap& map,
                                              int col, int row, int bh) {
#if EVO_HAS_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];\n" ::"l"(
          reinterpret_cast<unsigned long long>(&map)),
      "r"(col), "r"(row), "r"(bh), "r"(smem_addr(src))
      : "memory");
#endif
}
// The block's shared memory is released when it exits: the copy engine must have read it all.
__device__ __forceinline__ void tma_store_commit_and_wait_read() {
#if EVO_HAS_WGMMA
  asm volatile("cp.async.bulk.commit_group;\ncp.async.bulk.wait_group.read 0;\n" ::: "memory");
#endif
}
// Four 8x8 fp16 matrices from a warp's registers into shared memory; lane i names row i % 8 of
// matrix i / 8.
__device__ __forceinline__ void stmatrix_x4(void* p, const unsigned (&r)[4]) {
#if EVO_HAS_WGMMA
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(
                   smem_addr(p)),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
#endif
}

}  // namespace fa
}  // namespace evo

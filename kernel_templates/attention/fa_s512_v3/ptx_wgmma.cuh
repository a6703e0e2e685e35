#pragma once
// Warpgroup MMA (sm_90a): shared-memory descriptors, the fences and waits that order a wgmma
// against the registers and shared memory it reads, and wgmma.mma_async m64nNk16 per N.
#include "ptx.cuh"

namespace evo {
namespace fa {

// One stage: the tiles sit at the same addresses in every iteration, so the compiler would compute
// every k-step's K and V descriptor once, before the loop, and hold them all in registers. Made
// opaque here, they are computed where they are used: with kWaitVBeforePack, wg 64x128x4x1 at
// head dim 64 takes 122 registers instead of 154, and four blocks fit on an SM instead of three.
template <class T>
__device__ __forceinline__ unsigned long long per_iteration(unsigned long long desc) {
  if constexpr (T::kStages == 1) asm volatile("" : "+l"(desc));
  return desc;
}

// Shared-memory matrix descriptor: start address, leading and stride byte offsets (all in 16-byte
// units) and the swizzle mode, 128-byte (panels of 64 units) or 64-byte (e4m3's panels of 32).
// K-major tiles ignore the leading offset; for N-major ones it is the distance between 64-column
// panels. The stride offset is the distance between groups of 8 rows: 8 swizzled rows.
template <int PANEL = 64>
__device__ __forceinline__ unsigned long long smem_desc(const void* p, unsigned leading_bytes) {
  static_assert(PANEL == 64 || PANEL == 32, "128- or 64-byte swizzle");
  constexpr unsigned long long kStride = 8 * PANEL * 2;
  constexpr unsigned long long kMode = PANEL == 64 ? 1 : 2;
  return (unsigned long long)((smem_addr(p) & 0x3FFFF) >> 4) |
         ((unsigned long long)((leading_bytes >> 4) & 0x3FFF) << 16) | ((kStride >> 4) << 32) |
         (kMode << 62);
}

// Register accesses before a wgmma, and shared-memory writes of the generic proxy (cp.async, st)
// before the async proxy reads them, must be ordered explicitly.
__device__ __forceinline__ void wgmma_fence() {
#if EVO_HAS_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if EVO_HAS_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most N committed groups are still in flight; groups retire in order.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if EVO_HAS_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
__device__ __forceinline__ void fence_proxy_async() {
#if EVO_HAS_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// A wgmma reads and writes its registers asynchronously; after the wait, these empty asm
// statements keep the compiler from touching them any earlier.
template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+f"(d[i][j])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_operands(unsigned (&a)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(a[i][j])::"memory");
}

#define EVO_ACC4(d, j) "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
// The accumulator operands of the wider shapes, 32 floats (8 rows of d) at a time: their
// placeholders in the instruction and their bindings, so that each N names only what it adds.
#define EVO_D0_31 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, " \
                  "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define EVO_D32_63 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
                   "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define EVO_D64_95 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
                   "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define EVO_ACC_0_7(d) \
  EVO_ACC4(d, 0), EVO_ACC4(d, 1), EVO_ACC4(d, 2), EVO_ACC4(d, 3), EVO_ACC4(d, 4), EVO_ACC4(d, 5), \
      EVO_ACC4(d, 6), EVO_ACC4(d, 7)
#define EVO_ACC_8_15(d) \
  EVO_ACC4(d, 8), EVO_ACC4(d, 9), EVO_ACC4(d, 10), EVO_ACC4(d, 11), EVO_ACC4(d, 12), EVO_ACC4(d, 13), \
      EVO_ACC4(d, 14), EVO_ACC4(d, 15)
#define EVO_ACC_16_23(d) \
  EVO_ACC4(d, 16), EVO_ACC4(d, 17), EVO_ACC4(d, 18), EVO_ACC4(d, 19), EVO_ACC4(d, 20), EVO_ACC4(d, 21), \
      EVO_ACC4(d, 22), EVO_ACC4(d, 23)

// wgmma.mma_async m64nNkK, inputs of type D, fp32 accumulators, one specialisation per N (32,
// 64, 128; 192 for QK^T only, where a warpgroup's keys are that N) and input type, written for each
// type by EVO_WGMMA_FOR; K is 16 for 16-bit types and 32 for e4m3 (32 bytes of a row either way):
//   ss(d, a, b, accumulate): d (+)= A[64xK] * B[KxN]; A and B from shared memory, both K-major.
//   rs(d, a, b): d += A[64xK] * B[KxN]; A from registers (the m16n8k16 A fragment of each warp's
//     16 rows; e4m3: the m16n8k32 one), B from shared memory, N-major (transposed) for 16-bit
//     types and K-major for e4m3, which has no transposed form. (N = 64 and 128 only.)
template <int N, DType D>
struct Wgmma;

#if EVO_HAS_WGMMA
#define EVO_WGMMA_FOR(D, AB, K, SS_TAIL, RS_TAIL) \
template <> \
struct Wgmma<32, D> { \
  static __device__ __forceinline__ void ss(float (&d)[4][4], unsigned long long a, \
                                            unsigned long long b, int accumulate) { \
    asm volatile( \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n" \
        "wgmma.mma_async.sync.aligned.m64n32" K ".f32." AB "." AB " " \
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, " \
        "%16, %17, " SS_TAIL ";\n}\n" \
        : EVO_ACC4(d, 0), EVO_ACC4(d, 1), EVO_ACC4(d, 2), EVO_ACC4(d, 3) \
        : "l"(a), "l"(b), "r"(accumulate)); \
  } \
}; \
template <> \
struct Wgmma<64, D> { \
  static __device__ __forceinline__ void ss(float (&d)[8][4], unsigned long long a, \
                                            unsigned long long b, int accumulate) { \
    asm volatile( \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n" \
        "wgmma.mma_async.sync.aligned.m64n64" K ".f32." AB "." AB " " \
        "{" EVO_D0_31 "}, " \
        "%32, %33, " SS_TAIL ";\n}\n" \
        : EVO_ACC_0_7(d) \
        : "l"(a), "l"(b), "r"(accumulate)); \
  } \
  static __device__ __forceinline__ void rs(float (&d)[8][4], const unsigned (&a)[4], \
                                            unsigned long long b) { \
    asm volatile( \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n" \
        "wgmma.mma_async.sync.aligned.m64n64" K ".f32." AB "." AB " " \
        "{" EVO_D0_31 "}, " \
        "{%32, %33, %34, %35}, %36, " RS_TAIL ";\n}\n" \
        : EVO_ACC_0_7(d) \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1)); \
  } \
}; \
template <> \
struct Wgmma<128, D> { \
  static __device__ __forceinline__ void ss(float (&d)[16][4], unsigned long long a, \
                                            unsigned long long b, int accumulate) { \
    asm volatile( \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n" \
        "wgmma.mma_async.sync.aligned.m64n128" K ".f32." AB "." AB " " \
        "{" EVO_D0_31 ", " EVO_D32_63 "}, " \
        "%64, %65, " SS_TAIL ";\n}\n" \
        : EVO_ACC_0_7(d), EVO_ACC_8_15(d) \
        : "l"(a), "l"(b), "r"(accumulate)); \
  } \
  static __device__ __forceinline__ void rs(float (&d)[16][4], const unsigned (&a)[4], \
                                            unsigned long long b) { \
    asm volatile( \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n" \
        "wgmma.mma_async.sync.aligned.m64n128" K ".f32." AB "." AB " " \
        "{" EVO_D0_31 ", " EVO_D32_63 "}, " \
        "{%64, %65, %66, %67}, %68, " RS_TAIL ";\n}\n" \
        : EVO_ACC_0_7(d), EVO_ACC_8_15(d) \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1)); \
  } \
}; \
template <> \
struct Wgmma<192, D> { \
  static __device__ __forceinline__ void ss(float (&d)[24][4], unsigned long long a, \
                                            unsigned long long b, int accumulate) { \
    asm volatile( \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n" \
        "wgmma.mma_async.sync.aligned.m64n192" K ".f32." AB "." AB " " \
        "{" EVO_D0_31 ", " EVO_D32_63 ", " EVO_D64_95 "}, " \
        "%96, %97, " SS_TAIL ";\n}\n" \
        : EVO_ACC_0_7(d), EVO_ACC_8_15(d), EVO_ACC_16_23(d) \
        : "l"(a), "l"(b), "r"(accumulate)); \
  } \
};
EVO_WGMMA_FOR(DType::kF16, "f16", "k16", "p, 1, 1, 0, 0", "p, 1, 1, 1")
EVO_WGMMA_FOR(DType::kBF16, "bf16", "k16", "p, 1, 1, 0, 0", "p, 1, 1, 1")
EVO_WGMMA_FOR(DType::kE4M3, "e4m3", "k32", "p, 1, 1", "p, 1, 1")
#undef EVO_WGMMA_FOR
#else
// Without sm_90a features the instructions do not exist: a WGMMA genome built for another
// architecture compiles, and traps if launched.
template <int N, DType D>
struct Wgmma {
  static __device__ __forceinline__ void ss(float (&)[N / 8][4], unsigned long long,
                                            unsigned long long, int) {
    __trap();
  }
  static __device__ __forceinline__ void rs(float (&)[N / 8][4], const unsigned (&)[4],
                                            unsigned long long) {
    __trap();
  }
};
#endif
#undef EVO_ACC4
#undef EVO_D0_31
#undef EVO_D32_63
#undef EVO_D64_95
#undef EVO_ACC_0_7
#undef EVO_ACC_8_15
#undef EVO_ACC_16_23

}  // namespace fa
}  // namespace evo

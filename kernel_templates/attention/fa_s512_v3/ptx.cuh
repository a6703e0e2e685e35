#pragma once
// Wrappers over single PTX instructions every path uses: programmatic dependent launch,
// cp.async, ldmatrix, mma.sync m16n8k16, named barriers, and a few float helpers. Also defines
// EVO_HAS_WGMMA, whether this build has sm_90a's features; and the element type of a DType with
// what differs between fp16 and bf16 (packing, the MMA's operand type).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "../dtype.h"

namespace evo {
namespace fa {

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Programmatic dependent launch (sm_90). Launched with programmatic stream serialization, the
// next kernel in the stream may start while this one still runs, so that its launch and its
// blocks' start-up overlap this kernel's tail instead of following it. Both instructions are
// no-ops for a launch without that attribute.
// Lets the next kernel launch once every block of this grid has executed it (or exited).
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
// Blocks until the grids this one depends on have finished and their writes are visible: no
// global memory may be read (or written) before it, since Q, K and V may be the previous
// kernel's output and O its input.
__device__ __forceinline__ void wait_for_prerequisite_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Copies 16 bytes, or writes 16 zero bytes when !valid (tails past the sequence end).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

template <DType D>
struct ElementOf;
template <>
struct ElementOf<DType::kF16> {
  using type = __half;
};
template <>
struct ElementOf<DType::kBF16> {
  using type = __nv_bfloat16;
};
// e4m3 tensors are moved and addressed in 16-bit units, two FP8 elements each (kernel_traits.cuh).
template <>
struct ElementOf<DType::kE4M3> {
  using type = unsigned short;
};
// The unit of a kernel's Q, K and V tiles and tensors, and the element type of its O.
template <class T>
using Element = typename ElementOf<T::kDType>::type;
template <class T>
using OutElement = typename ElementOf<T::kOutDType>::type;

// d += a * b, m16n8k16, 16-bit inputs of type D, fp32 accumulators.
template <DType D>
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                          unsigned b1) {
  if constexpr (D == DType::kF16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define EVO_HAS_WGMMA 1
#else
#define EVO_HAS_WGMMA 0
#endif

// Named barriers 1 and 2 pass the tensor cores' turn between two warpgroups (PINGPONG): `sync`
// waits for the 128 arrivals of the other warpgroup, `arrive` gives them without waiting.
// Barrier 0 is __syncthreads'; kOutputBarrier gathers the warps that write the output tile, and
// kMergeBarrier (kMergeApart) hands key groups 1..'s partials to key group 0; kComputeBarrier
// stands for __syncthreads where a producer warpgroup has left (block_sync).
// Enumerators rather than constants: a kernel that names neither (the mma.sync register store)
// then compiles without nvcc's unused-variable warning in an exported file.
enum NamedBarrier : int {
  kOutputBarrier = 3,
  kMergeBarrier = 4,  // kMergeApart: key groups 1.. arrive, key group 0 waits
  kComputeBarrier = 5,
};
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// -inf without <math.h>, which NVRTC does not provide.
__device__ __forceinline__ float neg_inf() { return __int_as_float(static_cast<int>(0xff800000u)); }

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Two floats rounded to a pair of D in one 32-bit register (lo in the low half).
template <DType D>
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  if constexpr (D == DType::kF16) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&h);
  } else {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&h);
  }
}
// Two floats rounded to e4m3 (to nearest, finite values beyond 448 saturated), lo in bits 0-7
// and hi in bits 8-15 of the result.
__device__ __forceinline__ unsigned pack2_e4m3(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  unsigned short r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
#else
  __trap();  // e4m3 kernels are compiled for sm_90a only (kernel_traits.cuh: kE4m3)
  return 0;
#endif
}
// 1.0 twice, as pack2 would give it.
template <DType D>
constexpr unsigned kOnes2 = D == DType::kF16 ? 0x3C003C00u : 0x3F803F80u;

}  // namespace fa
}  // namespace evo

// Shared by the planted kernels: the attention family's FaParams (the one definition a candidate
// takes), so that the evaluator launches them exactly as it launches a real candidate, and typed
// views of its untyped tensors.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "../../../kernel_templates/attention/params.h"

namespace planted {
using evo::FaParams;

template <int DTYPE> struct ElementOf { using type = __half; };
template <> struct ElementOf<1> { using type = __nv_bfloat16; };

__device__ inline float to_float(__half x) { return __half2float(x); }
__device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <class Elem> __device__ inline Elem from_float(float x);
template <> __device__ inline __half from_float<__half>(float x) { return __float2half(x); }
template <> __device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16(x); }

// fp16 unless a kernel asks for another element type.
template <class Elem = __half> __device__ inline const Elem* q_of(const FaParams& p) { return static_cast<const Elem*>(p.q); }
template <class Elem = __half> __device__ inline const Elem* k_of(const FaParams& p) { return static_cast<const Elem*>(p.k); }
template <class Elem = __half> __device__ inline const Elem* v_of(const FaParams& p) { return static_cast<const Elem*>(p.v); }
template <class Elem = __half> __device__ inline Elem* o_of(const FaParams& p) { return static_cast<Elem*>(p.o); }
}  // namespace planted

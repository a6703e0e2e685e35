// The exported FP8 quantizer: fp16 or bf16 tensors [batch, heads, seq, head_dim] to e4m3 with one
// scale per (batch, head) by e4m3_scale (fp8.h), Q and K as they are laid out and V transposed
// ([batch, heads, head_dim, seq] with rows e4m3_vt_pitch(seq) bytes apart, the pad zeroed), so
// that a caller with 16-bit tensors reaches the FP8 kernel in two calls. Three passes on the
// caller's stream: each head's largest magnitude (atomicMax over the float's bits, which order
// non-negative floats and put NaN above infinity, so a NaN is never lost as fmaxf would lose it),
// the scales in place of those bits, then the elements divided by their head's scale and rounded
// to nearest (finite values saturate at 448; NaN stays NaN).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "fp8.h"

namespace evo {
namespace fp8_quantize {

__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

__device__ __forceinline__ unsigned char to_e4m3(float x) {
  return static_cast<unsigned char>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

// grid (blocks per slice, slices): each slice's |x| maximum as float bits into bits[slice] (zeroed
// by the caller).
template <class In>
__global__ void absmax_bits(const In* x, unsigned* bits, long long slice_elems) {
  const In* slice = x + static_cast<long long>(blockIdx.y) * slice_elems;
  unsigned m = 0;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < slice_elems;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    m = max(m, __float_as_uint(to_float(slice[i])) & 0x7FFFFFFFu);
  m = __reduce_max_sync(0xffffffffu, m);
  if ((threadIdx.x & 31) == 0 && m != 0) atomicMax(&bits[blockIdx.y], m);
}

__global__ void scales_from_bits(float* scales, int slices) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < slices) scales[i] = e4m3_scale(scales[i]);  // (absmax_bits left the maximum's bits there)
}

// Q and K: element i of slice s to out[i].
template <class In>
__global__ void quantize_rows(const In* x, unsigned char* out, const float* scales, long long slice_elems) {
  const long long base = static_cast<long long>(blockIdx.y) * slice_elems;
  const float scale = scales[blockIdx.y];
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < slice_elems;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    out[base + i] = to_e4m3(to_float(x[base + i]) / scale);
}

// V: 32x32 tiles of (key, dim) through shared memory, so that reads run along the head dim and
// writes along the keys. grid (pitch / 32 rounded up, head_dim / 32, slices), block (32, 8).
template <class In>
__global__ void quantize_transposed(const In* x, unsigned char* out, const float* scales, int seq,
                                    int head_dim, long long pitch) {
  __shared__ unsigned char tile[32][33];
  const int key0 = blockIdx.x * 32, dim0 = blockIdx.y * 32;
  const float scale = scales[blockIdx.z];
  const In* src = x + static_cast<long long>(blockIdx.z) * seq * head_dim;
  for (int r = threadIdx.y; r < 32; r += 8) {
    const int key = key0 + r, dim = dim0 + threadIdx.x;
    tile[r][threadIdx.x] =
        key < seq && dim < head_dim ? to_e4m3(to_float(src[static_cast<long long>(key) * head_dim + dim]) / scale) : 0;
  }
  __syncthreads();
  unsigned char* dst = out + static_cast<long long>(blockIdx.z) * head_dim * pitch;
  for (int r = threadIdx.y; r < 32; r += 8) {
    const int dim = dim0 + r, key = key0 + threadIdx.x;
    if (dim < head_dim && key < pitch) dst[static_cast<long long>(dim) * pitch + e4m3_vt_column(key)] = tile[threadIdx.x][r];
  }
}

template <class In>
cudaError_t quantize(const In* x, unsigned char* out, float* scales, int slices, int seq, int head_dim,
                     bool transpose, cudaStream_t stream) {
  const long long slice_elems = static_cast<long long>(seq) * head_dim;
  cudaError_t e = cudaMemsetAsync(scales, 0, sizeof(float) * slices, stream);
  if (e != cudaSuccess) return e;
  const unsigned per_slice = static_cast<unsigned>((slice_elems + 256 * 8 - 1) / (256 * 8));
  const dim3 grid(per_slice < 64 ? per_slice : 64, static_cast<unsigned>(slices));
  absmax_bits<In><<<grid, 256, 0, stream>>>(x, reinterpret_cast<unsigned*>(scales), slice_elems);
  scales_from_bits<<<(slices + 255) / 256, 256, 0, stream>>>(scales, slices);
  if (transpose) {
    const long long pitch = e4m3_vt_pitch(seq);
    const dim3 tiles(static_cast<unsigned>((pitch + 31) / 32), static_cast<unsigned>((head_dim + 31) / 32),
                     static_cast<unsigned>(slices));
    quantize_transposed<In><<<tiles, dim3(32, 8), 0, stream>>>(x, out, scales, seq, head_dim, pitch);
  } else {
    quantize_rows<In><<<grid, 256, 0, stream>>>(x, out, scales, slice_elems);
  }
  return cudaGetLastError();
}

}  // namespace fp8_quantize
}  // namespace evo

// x: [batch, heads, seq, head_dim] contiguous, of x_dtype (0 fp16, 1 bf16: evo::DType's values);
// out: e4m3 bytes, [batch, heads, seq, head_dim] (transpose 0: Q, K) or [batch, heads, head_dim,
// pitch] with pitch = seq rounded up to 16 and the pad zeroed (transpose 1: V, as the FP8 kernel
// reads it); scales: batch * heads floats, each head's e4m3_scale (fp8.h): its largest magnitude
// over 448, 1 for an all-zero head, at least 2^-126, NaN for a head holding NaN or an infinity
// (every output that reads it is then NaN). out[i] is x[i] / scale rounded to nearest e4m3, finite
// values beyond 448 saturated. Returns 0 or the CUDA error; cudaErrorInvalidValue for null
// pointers, a dimension under 1, an unknown dtype or transpose flag, or a head of 2^31 elements or
// more. Launches on `stream` and never synchronizes.
extern "C" int evo_attention_quantize_fp8(const void* x, int x_dtype, void* out, float* scales, int batch, int heads,
                                          int seq, int head_dim, int transpose, cudaStream_t stream) {
  if (x == nullptr || out == nullptr || scales == nullptr) return cudaErrorInvalidValue;
  if (batch <= 0 || heads <= 0 || seq <= 0 || head_dim <= 0) return cudaErrorInvalidValue;
  if ((x_dtype != 0 && x_dtype != 1) || (transpose != 0 && transpose != 1)) return cudaErrorInvalidValue;
  if (static_cast<long long>(seq + 16) * head_dim > 2147483647LL ||
      static_cast<long long>(batch) * heads > 65535LL)
    return cudaErrorInvalidValue;
  unsigned char* bytes = static_cast<unsigned char*>(out);
  const int slices = batch * heads;
  if (x_dtype == 0)
    return evo::fp8_quantize::quantize(static_cast<const __half*>(x), bytes, scales, slices, seq, head_dim,
                                       transpose == 1, stream);
  return evo::fp8_quantize::quantize(static_cast<const __nv_bfloat16*>(x), bytes, scales, slices, seq, head_dim,
                                     transpose == 1, stream);
}

// FP8 (e4m3) attention inputs: the quantization rule and V's transposed layout, one home for the
// worker's input draws (runtime.cpp), the exported quantizer (quantize_fp8.cuh), the exported
// entry point and the tensor maps. Plain C++ for host and device, no includes.
#ifndef EVO_ATTENTION_FP8_H
#define EVO_ATTENTION_FP8_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define EVO_FP8_HD __host__ __device__
#else
#define EVO_FP8_HD
#endif

namespace evo {

// e4m3's largest finite value.
constexpr float kE4m3Max = 448.f;
// The smallest scale: float's smallest normal, 2^-126, so that a scale is never zero (the FP8
// predecessor gave an all-zero head a scale of 0.0022, and zero would turn x / scale into NaN)
// nor a subnormal that a flush-to-zero division would read as zero.
constexpr float kE4m3MinScale = 1.17549435e-38f;

// The scale of one (batch, head) of a tensor whose largest magnitude is absmax: absmax / 448, so
// that the largest value maps to e4m3's largest (the predecessor's per-head rule); 1 for a head of
// zeros (its elements quantize to 0 under any scale, and 1 keeps scale * element exact); at least
// kE4m3MinScale (a head of magnitudes below 448 * 2^-126 quantizes to e4m3's subnormals and zeros);
// NaN where the head holds a NaN or an infinity, so that every output reading it is NaN, as
// fp16 attention's would be.
EVO_FP8_HD inline float e4m3_scale(float absmax) {
  if (!(absmax <= 3.40282347e38f)) return __builtin_nanf("");  // NaN or +infinity
  if (absmax == 0.f) return 1.f;
  const float s = absmax / kE4m3Max;
  return s < kE4m3MinScale ? kE4m3MinScale : s;
}

// V^T's row pitch in bytes for seq_k keys: the copy engine reads rows 16-byte aligned. The kernel
// reads whole rows of it, pad included (a key's column may lie past seq_k within its 16, below):
// the pad meets only masked scores (P = 0), so it must hold finite values, and the quantizer
// writes zeros there.
EVO_FP8_HD constexpr long long e4m3_vt_pitch(long long seq_k) { return (seq_k + 15) / 16 * 16; }

// The column of V^T's row that holds key `key`: each 16 keys in the order in which the kernel's P
// fragment holds them. The kernel rounds P to e4m3 in registers as wgmma's A fragment, whose lane
// q holds columns 4q..4q+3 of each 16 (of two rows), while the scores' fragment gives lane q keys
// 2q, 2q+1, 2q+8 and 2q+9 of each 16; with V^T's columns in that order every lane packs its own
// scores as they are, with no exchange between lanes: column 4q + i holds key
// 2q + (i & 1) + 8 (i >> 1).
EVO_FP8_HD constexpr long long e4m3_vt_column(long long key) {
  const long long k = key & 15;
  return key - k + 4 * ((k & 7) >> 1) + 2 * (k >> 3) + (k & 1);
}

}  // namespace evo

#undef EVO_FP8_HD
#endif  // EVO_ATTENTION_FP8_H

#pragma once
// The element types of attention tensors <-> float on the host, for the worker's input draws and
// output reads (runtime.cpp), so that host code needs no CUDA compiler: IEEE binary16 (fp16),
// bfloat16 (bf16) and FP8 e4m3. Round to nearest even; handles subnormals, infinities and NaN.
#include <cstdint>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "dtype.h"

namespace evo::attention {

inline uint16_t float_to_half_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) return static_cast<uint16_t>(sign | (abs > 0x7F800000u ? 0x7E00u : 0x7C00u));
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to infinity
  if (abs < 0x38800000u) {                                              // subnormal or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t mant = (abs & 0x7FFFFFu) | 0x800000u;
    const int shift = 126 - static_cast<int>(abs >> 23);  // value = mant * 2^(exp-150), half ulp 2^-24
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = ((abs - 0x38000000u) >> 13);
  const uint32_t rem = abs & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  uint32_t x;
  if (exp == 0x1F) {
    x = sign | 0x7F800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal: normalise
      exp = 113;
      while (!(mant & 0x400u)) {
        mant <<= 1;
        --exp;
      }
      x = sign | (exp << 23) | ((mant & 0x3FFu) << 13);
    }
  } else {
    x = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

// bfloat16 is float's upper half: the same sign and exponent, 7 of float's 23 stored mantissa bits.
inline uint16_t float_to_bf16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);  // quiet NaN
  const uint32_t rounding = 0x7FFFu + ((x >> 16) & 1u);  // ties to even; overflow reaches infinity
  return static_cast<uint16_t>((x + rounding) >> 16);
}

inline float bf16_bits_to_float(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

// FP8 e4m3 (the "fn" variant: 4 exponent bits, bias 7, 3 mantissa bits, no infinities, NaN
// only at S.1111.111): finite values beyond the largest, 448, saturate to it, as the GPU's
// cvt.rn.satfinite does; NaN stays NaN (0x7F with the sign).
inline uint8_t float_to_e4m3_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint8_t sign = static_cast<uint8_t>((x >> 24) & 0x80u);
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return static_cast<uint8_t>(sign | 0x7Fu);
  float a;
  std::memcpy(&a, &abs, 4);
  if (a >= 448.f) return static_cast<uint8_t>(sign | 0x7Eu);  // satfinite (infinity included)
  // Below 2^-6 the values are subnormal, multiples of 2^-9: round a * 2^9 to an integer.
  if (a < 0.015625f) {
    const float scaled = a * 512.f;
    uint32_t m = static_cast<uint32_t>(scaled);
    const float rem = scaled - static_cast<float>(m);
    if (rem > 0.5f || (rem == 0.5f && (m & 1u))) ++m;
    return static_cast<uint8_t>(sign | m);  // m == 8 is the smallest normal, 0x08
  }
  // Normal: keep 3 of float's 23 mantissa bits, rounding the other 20 to nearest even.
  const uint32_t exp = (abs >> 23) - 127 + 7;  // 1..15 here
  uint32_t bits = (exp << 3) | ((abs >> 20) & 7u);
  const uint32_t rem = abs & 0xFFFFFu, half = 0x80000u;
  if (rem > half || (rem == half && (bits & 1u))) ++bits;  // may carry into the exponent
  return static_cast<uint8_t>(sign | std::min<uint32_t>(bits, 0x7Eu));
}

inline float e4m3_bits_to_float(uint8_t b) {
  const float sign = (b & 0x80u) ? -1.f : 1.f;
  const uint32_t exp = (b >> 3) & 0xFu, mant = b & 7u;
  if (exp == 0xFu && mant == 7u) return std::numeric_limits<float>::quiet_NaN();
  if (exp == 0) return sign * static_cast<float>(mant) / 512.f;
  return sign * std::ldexp(1.f + static_cast<float>(mant) / 8.f, static_cast<int>(exp) - 7);
}

// The 16-bit types only (e4m3's tensors are bytes).
inline uint16_t float_to_bits(DType d, float f) {
  return d == DType::kBF16 ? float_to_bf16_bits(f) : float_to_half_bits(f);
}

inline float bits_to_float(DType d, uint16_t b) {
  return d == DType::kBF16 ? bf16_bits_to_float(b) : half_bits_to_float(b);
}

}  // namespace evo::attention

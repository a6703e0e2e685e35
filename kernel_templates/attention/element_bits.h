#pragma once
// The 16-bit element types of attention tensors <-> float on the host, for the worker's input
// draws and output reads (runtime.cpp), so that host code needs no CUDA compiler: IEEE binary16
// (fp16) and bfloat16 (bf16). Round to nearest even; handles subnormals, infinities and NaN.
#include <cstdint>
#include <cstring>

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

inline uint16_t float_to_bits(DType d, float f) {
  return d == DType::kBF16 ? float_to_bf16_bits(f) : float_to_half_bits(f);
}

inline float bits_to_float(DType d, uint16_t b) {
  return d == DType::kBF16 ? bf16_bits_to_float(b) : half_bits_to_float(b);
}

}  // namespace evo::attention

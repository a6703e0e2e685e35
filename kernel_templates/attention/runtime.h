#pragma once
// The attention family's CUDA side for the worker's gates (family_runtime.h): Q, K and V drawn in
// the problem's dtype, the output poisoned and read back, FaParams filled (tensor maps included),
// the float32 reference (reference.cuh) launched over the same inputs, and the dtype's tolerance
// (tolerances.h). runtime_registry.cpp names it.
#include <cstdint>
#include <vector>

#include "../family_runtime.h"

namespace evo::attention {

const FamilyRuntime& runtime();

// One tensor of a check ('q', 'k' or 'v') as the bits of the problem's dtype: what
// ProblemRuntime::draw_inputs uploads for check seed `seed` and draw `draw` (0: U(-1, 1)
// everywhere; 1: K's rows scaled up along the keys). Host only, for tests that pin the inputs.
// 16-bit dtypes (e4m3's inputs are quantize_e4m3's).
std::vector<uint16_t> draw_tensor(const RuntimeProblem& p, uint64_t seed, char tensor, int draw);

// An e4m3 tensor: its bytes, one scale per slice (batch, head) by e4m3_scale (fp8.h), and the
// values the bytes stand for (byte times scale, in the values' layout).
struct Fp8Tensor {
  std::vector<uint8_t> bytes;
  std::vector<float> scales, values;
};
// `values` as `slices` slices of rows x cols, quantized by the exported quantizer's rule
// (quantize_fp8.cuh): bytes in the same layout, or (transpose) each slice's cols x rows with rows
// of e4m3_vt_pitch(rows) bytes, the pad zero. Host only.
Fp8Tensor quantize_e4m3(const std::vector<float>& values, int slices, int rows, int cols, bool transpose);

// The output's elements, bits of the problem's dtype, as ProblemRuntime::read_output gives them:
// floats, the poison (kPoisonByte in both bytes) as unwritten_output(). Host only.
std::vector<float> output_as_floats(const RuntimeProblem& p, const std::vector<uint16_t>& bits);

}  // namespace evo::attention

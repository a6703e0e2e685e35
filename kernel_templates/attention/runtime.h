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
std::vector<uint16_t> draw_tensor(const RuntimeProblem& p, uint64_t seed, char tensor, int draw);

// The output's elements, bits of the problem's dtype, as ProblemRuntime::read_output gives them:
// floats, the poison (kPoisonByte in both bytes) as unwritten_output(). Host only.
std::vector<float> output_as_floats(const RuntimeProblem& p, const std::vector<uint16_t>& bits);

}  // namespace evo::attention

#pragma once
// What a kernel family's analytical estimate reads: one launch of a genome on a problem, with the
// occupancy the model evaluator (worker/model_evaluator.cpp) worked out from the compiler's real
// registers and shared memory. The evaluator keeps what every family shares (occupancy, waves,
// launch overhead); the family says how long one wave of its blocks lasts.
#include <cstdint>
#include <map>
#include <string>

#include "device_model.h"
#include "problem.h"

namespace evo {

struct ModelInput {
  const DeviceModel& device;
  const Problem& problem;
  // The space's values for the genome on this problem and device: genes, derived values, the
  // problem's variables, SMEM_LIMIT and SM_ARCH (SearchSpace::variables).
  const std::map<std::string, int64_t>& variables;
  int64_t waves = 0;    // ceil(grid blocks / (resident blocks per SM * SMs))
  int concurrent = 0;   // blocks that share an SM in the busiest wave
};

// Seconds one wave of the family's blocks lasts on the device.
using ModelWaveSeconds = double (*)(const ModelInput&);

}  // namespace evo

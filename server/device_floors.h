#pragma once
// The physical floor of a device class: no kernel computes an attention problem faster than its
// FLOPs at the device's peak tensor rate, its bytes at the device's memory bandwidth, or one empty
// kernel call. A reported time below that floor is not a fast kernel but a broken timer or a lie,
// and evod refuses it (lease_scheduler.h) before it can rank, confirm or be cached.
//
// The figures are vendors' data-sheet peaks (never reached in practice), and the floor is half of
// what they give, so that no honest measurement comes near it: the check catches 1e-9 µs, not a
// kernel 20 % faster than expected (that is the confirmation's job).
#include <string>

#include "evo/evo.pb.h"
#include "store.h"

namespace evo {

struct DeviceFloor {
  const char* gpu;         // a substring of DeviceInfo.gpu_name; "" for any other device
  double peak_tflops;      // dense fp16/bf16 tensor-core rate, fp32 accumulate, whole chip
  double memory_gbps;      // device memory bandwidth
  double empty_call_us;    // one call of an empty kernel, back to back by graph replay, where measured
  const char* source;
};

// The row of the table for a registered device: the first whose gpu substring its gpu_name holds
// (model workers name the card they model, "model:H100-SXM"), else the fastest card listed.
const DeviceFloor& device_floor(const v1::DeviceInfo& device);

// Why an OK evaluation of this run is faster than the device can be, or "" when it is not: its
// ranked fitness against the run's problem, and each shape's times against that shape's floor.
// Inputs cycled past L2 (the fitness, median_us) are held to all three limits; L2-resident times
// (resident_us) to the compute and call limits only.
std::string implausible_time(const v1::Evaluation& evaluation, const RunRecord& run, const v1::DeviceInfo& device);

}  // namespace evo

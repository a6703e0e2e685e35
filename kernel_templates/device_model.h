#pragma once
// What the model evaluator knows of a device it has no GPU of: the figures an analytical estimate
// reads, generic ones (occupancy, waves) in worker/model_evaluator.cpp and a family's own in its
// model estimate (kernel_templates/<family>/model_estimate.cpp). worker/device_catalog.cpp holds
// the figures per architecture.
#include <cstdint>
#include <string>

namespace evo {

struct DeviceModel {
  std::string arch;             // "sm_90a"
  std::string gpu_name;         // "model:H100-SXM"
  int sm_count = 0;
  int sm_clock_mhz = 0;         // boost clock
  int mem_clock_mhz = 0;
  // The architecture's limits (DeviceLimits).
  int64_t smem_per_block_optin = 0;
  int64_t smem_per_sm = 0;
  int64_t smem_reserved_per_block = 0;
  int regs_per_sm = 0;
  int max_threads_per_sm = 0;
  int max_blocks_per_sm = 0;
  double mma_sync_tflops = 0;   // fp16 mma.sync, fp32 accumulate, dense, whole chip
  double wgmma_tflops = 0;      // the same through wgmma (sm_90a); 0 where it does not exist
  double fp32_tflops = 0;       // non-tensor FP32 (softmax arithmetic)
  double hbm_gbps = 0;
  double l2_gbps = 0;           // K/V re-reads of a head mostly hit L2
  int64_t l2_bytes = 0;
  int64_t global_mem_bytes = 0;
  double launch_overhead_us = 0;
};

}  // namespace evo

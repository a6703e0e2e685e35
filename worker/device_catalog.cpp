#include "device_catalog.h"

#include "device_limits.h"

namespace evo {
namespace {

// The architecture's limits (device_limits.h), the part of a model that is not an assumption.
void set_limits(DeviceModel& d, int sm_arch) {
  const DeviceLimits& l = *device_limits(sm_arch);
  d.smem_per_block_optin = l.smem_per_block_optin;
  d.smem_per_sm = l.smem_per_sm;
  d.smem_reserved_per_block = l.smem_reserved_per_block;
  d.regs_per_sm = l.regs_per_sm;
  d.max_threads_per_sm = l.max_threads_per_sm;
  d.max_blocks_per_sm = l.max_blocks_per_sm;
}

// Assumptions (public data sheets; boost clocks; dense fp16 tensor rates with fp32 accumulate).
// mma.sync on Hopper reaches about two thirds of the wgmma peak (989 TFLOP/s), hence 660.
// L2 bandwidth figures are rough multiples of HBM bandwidth, as commonly measured.
DeviceModel hopper(const char* arch) {
  DeviceModel d;
  d.arch = arch;
  d.gpu_name = "model:H100-SXM";
  d.sm_count = 132;
  d.sm_clock_mhz = 1980;
  d.mem_clock_mhz = 2619;
  set_limits(d, 90);
  d.mma_sync_tflops = 660;
  d.wgmma_tflops = 989;
  d.fp32_tflops = 67;
  d.hbm_gbps = 3350;
  d.l2_gbps = 3350 * 2.5;
  d.l2_bytes = 50ll << 20;
  d.global_mem_bytes = 80ll << 30;
  d.launch_overhead_us = 2.5;
  return d;
}

DeviceModel ampere() {
  DeviceModel d;
  d.arch = "sm_80";
  d.gpu_name = "model:A100-SXM";
  d.sm_count = 108;
  d.sm_clock_mhz = 1410;
  d.mem_clock_mhz = 1593;
  set_limits(d, 80);
  d.mma_sync_tflops = 312;
  d.fp32_tflops = 19.5;
  d.hbm_gbps = 2039;
  d.l2_gbps = 2039 * 2.5;
  d.l2_bytes = 40ll << 20;
  d.global_mem_bytes = 80ll << 30;
  d.launch_overhead_us = 3.0;
  return d;
}

DeviceModel ada() {
  DeviceModel d;
  d.arch = "sm_89";
  d.gpu_name = "model:L40S";
  d.sm_count = 142;
  d.sm_clock_mhz = 2520;
  d.mem_clock_mhz = 2250;
  set_limits(d, 89);
  d.mma_sync_tflops = 362;
  d.fp32_tflops = 91.6;
  d.hbm_gbps = 864;
  d.l2_gbps = 864 * 3.0;
  d.l2_bytes = 96ll << 20;
  d.global_mem_bytes = 48ll << 30;
  d.launch_overhead_us = 3.0;
  return d;
}

}  // namespace

const DeviceModel* find_device_model(std::string_view arch) {
  static const DeviceModel kModels[] = {hopper("sm_90a"), hopper("sm_90"), ampere(), ada()};
  for (const auto& m : kModels)
    if (m.arch == arch) return &m;
  return nullptr;
}

std::string modeled_archs() { return "sm_80, sm_89, sm_90, sm_90a"; }

}  // namespace evo

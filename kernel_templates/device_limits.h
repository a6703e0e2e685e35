#pragma once
// What each GPU architecture evo targets lets one kernel use: the one table of these numbers, from
// the vendor's published per-architecture limits. Every host user reads it (the strategies' and
// the exporter's default shared-memory limit, the model evaluator's device figures, the worker's
// launch). The kernel and the search space cannot include host code and state the sm_90 opt-in
// figure themselves (attention/fa_s512_v3/kernel_traits.cuh: kSmemOptInSm90; space.json:
// MERGE_APART); tests/unit/templates/device_limits_test.cpp fails when either drifts from here.
#include <cstdint>

namespace evo {

struct DeviceLimits {
  int sm_arch = 0;                      // 90 for sm_90 and sm_90a (sm_arch_number)
  int64_t smem_per_block_optin = 0;     // bytes one block may use after raising the attribute
  int64_t smem_per_sm = 0;              // bytes of shared memory per SM (carve-out maximum)
  int64_t smem_reserved_per_block = 0;  // what the runtime keeps of each block's share
  int regs_per_sm = 0;
  int max_threads_per_sm = 0;
  int max_blocks_per_sm = 0;
};

inline constexpr DeviceLimits kDeviceLimits[] = {
    {80, 163 * 1024, 164 * 1024, 1024, 65536, 2048, 32},
    {89, 99 * 1024, 100 * 1024, 1024, 65536, 1536, 24},
    {90, 227 * 1024, 228 * 1024, 1024, 65536, 2048, 32},
};

// nullptr for an architecture the table does not hold.
constexpr const DeviceLimits* device_limits(int sm_arch) {
  for (const DeviceLimits& l : kDeviceLimits)
    if (l.sm_arch == sm_arch) return &l;
  return nullptr;
}

// Dynamic shared memory a block may take without raising the attribute, on every architecture.
inline constexpr int64_t kSmemPerBlockDefault = 48 * 1024;

// The architecture a run's genomes are checked against when no device names its own: sm_90, the
// only one that TMA and wgmma compile for. Fixed per run, so that a run's genome sequence does not
// depend on which worker shows up first.
inline constexpr int kDefaultSmArch = 90;
inline constexpr int64_t kDefaultSmemLimit = device_limits(kDefaultSmArch)->smem_per_block_optin;

}  // namespace evo

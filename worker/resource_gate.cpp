#include "resource_gate.h"

#include <algorithm>

#include "gate_thresholds.h"
#include "ptxas_report.h"

namespace evo {

std::optional<std::string> resource_violation(const v1::ResourceReport& r, int64_t smem_limit,
                                              int64_t min_registers) {
  const int spills = std::max(r.spill_store_bytes(), r.spill_load_bytes());
  if (spills > gates::kMaxSpillBytes)
    return "register spills " + std::to_string(r.spill_store_bytes()) + " bytes stored / " +
           std::to_string(r.spill_load_bytes()) + " bytes loaded > limit " +
           std::to_string(gates::kMaxSpillBytes) + " bytes";
  if (r.stack_frame_bytes() > gates::kMaxStackFrameBytes)
    return "stack frame " + std::to_string(r.stack_frame_bytes()) + " bytes > limit " +
           std::to_string(gates::kMaxStackFrameBytes) +
           " bytes (an array in local memory)";
  const int64_t smem = int64_t{r.static_smem_bytes()} + r.dynamic_smem_bytes();
  if (smem > smem_limit)
    return "shared memory " + std::to_string(smem) + " bytes (" +
           std::to_string(r.static_smem_bytes()) + " static + " +
           std::to_string(r.dynamic_smem_bytes()) + " dynamic) > device limit " +
           std::to_string(smem_limit) + " bytes";
  if (r.registers() < min_registers)
    return std::to_string(r.registers()) + " registers a thread at launch, fewer than the " +
           std::to_string(min_registers) + " its warpgroups' register hand-over draws on";
  return std::nullopt;
}

std::optional<std::string> register_shortage(const std::string& ptxas_log, int64_t threads) {
  const auto failure = register_allocation_failure(ptxas_log);
  if (!failure) return std::nullopt;
  return "ptxas: " + *failure + ": more registers than " + std::to_string(threads) + " threads leave each thread";
}

}  // namespace evo

#pragma once
// Gate 3: does the kernel's SASS use the tensor cores (HMMA on sm_80+, HGMMA on sm_90a, in any of
// their input types: HMMA.16816.F32 for fp16, HMMA.16816.F32.BF16 for bf16; QGMMA, sm_90a's FP8
// warpgroup MMA)? Read from the cubin with cuobjdump, never inferred from compiler warnings.
// Without cuobjdump the verdict is "skipped", never "passed". A family may require one instruction
// for a problem (KernelFamily::tensor_core_instruction: QGMMA for e4m3 attention); the gate reads
// it from the counts.
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "evo/evo.pb.h"

namespace evo {

// Tensor-core instructions by mnemonic ("HGMMA": 64), those with at least one.
using TensorCoreOps = std::map<std::string, int>;

struct SassVerdict {
  v1::Verdict verdict;  // passed, failed or skipped
  std::string detail;
  TensorCoreOps ops;
};

// cuobjdump in $PATH, else $CUDA_HOME/bin (default /usr/local/cuda/bin); nullopt if neither.
std::optional<std::string> find_cuobjdump();

// Counts HMMA/HGMMA/QGMMA instructions in the `Function : <lowered_name>` section of a
// `cuobjdump --dump-sass` listing; nullopt when the listing has no such section.
std::optional<TensorCoreOps> count_tensor_core_ops(std::string_view sass_listing, std::string_view lowered_name);
int total_ops(const TensorCoreOps& ops);

// Empty when the counts hold `required` (or it is empty); else why not, for the gate's detail.
std::string missing_instruction(const TensorCoreOps& ops, std::string_view required);

// Runs cuobjdump on the cubin and judges the named kernel.
SassVerdict check_tensor_core_sass(const std::string& cubin_path, const std::string& lowered_name);

}  // namespace evo

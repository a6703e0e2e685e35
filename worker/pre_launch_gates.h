#pragma once
// Gates 1-3 of DESIGN.md, shared by every evaluator: valid (the search space's constraints, before
// any compile), compile (NVRTC + the resource gate) and tensor_cores (SASS). The cuda evaluator
// runs these before it hands the cubins to its child process; the model evaluator before it
// estimates.
#include <cstdint>
#include <optional>
#include <vector>

#include "evo/evo.pb.h"
#include "genome.h"
#include "kernel_compiler.h"
#include "problem.h"

namespace evo {

// Fills eval's gates valid, compile and tensor_cores, its resources (of the first shape's
// kernel, with that launch's dynamic shared memory and threads), compile_options, compile_ms and
// cache_hit. On a rejection also status (INVALID, COMPILE_ERROR or RESOURCE_REJECT) and a one-line
// message, and returns nullopt. Otherwise returns one kernel per shape, in the order of `shapes`.
// Never throws for a bad candidate.
std::optional<std::vector<CompiledKernel>> run_pre_launch_gates(KernelCompiler& compiler,
                                                                const Genome& g,
                                                                const std::vector<Problem>& shapes,
                                                                int64_t smem_limit,
                                                                v1::Evaluation& eval);

// Appends a gate verdict to eval, with the wall time spent in the gate.
void add_gate(v1::Evaluation& eval, v1::Gate gate, v1::Verdict verdict, const std::string& detail,
              double elapsed_ms = 0);
// Sets the gate's verdict and detail, adding the gate where eval has none of its kind; its elapsed
// time only where one is given (a later verdict on a gate keeps the time it measured).
void set_gate(v1::Evaluation& eval, v1::Gate gate, v1::Verdict verdict, const std::string& detail,
              std::optional<double> elapsed_ms = std::nullopt);

}  // namespace evo

#pragma once
// A kernel family's CUDA side, as the worker's correctness and timing gates use it: a problem's
// inputs (drawn from a seed, the same on every host), the candidate's parameter block, the float32
// reference launch over the same inputs, the output read back as floats, the tolerance, and the
// sizes the gates plan with. The gates (worker/cuda/shape_gates.cpp) know no family: each family
// implements this interface in its own folder (attention/runtime.cpp) and runtime_registry.cpp
// names each family's implementation in one line. Needs the CUDA runtime API: only the worker and
// its GPU tests link it (the target evo_family_runtimes). CUDA errors are thrown as
// evo::cuda::CudaFailure (cuda_error.h), so that the evaluation child reports them as a crash.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "problem.h"
#include "tolerance.h"

namespace evo {

// The problem the gates hand a family's runtime, of the runtime's family.
using RuntimeProblem = Problem;

// The byte a candidate's output is filled with before each check (cudaMemset). Bytes of all ones
// are a NaN in any IEEE-style type of 16 or 32 bits (every exponent bit set, a mantissa not zero),
// and not the NaN arithmetic produces, so that one still there after the launch was never written.
inline constexpr unsigned char kPoisonByte = 0xFF;

// What ProblemRuntime::read_output gives for an element still holding the poison: a NaN of all
// ones, which no 16-bit element converts to (their widening leaves the low bits zero), so that the
// comparison tells "never written" from "wrote NaN or Inf".
inline float unwritten_output() {
  const uint32_t bits = 0xFFFFFFFFu;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline bool is_unwritten_output(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits == 0xFFFFFFFFu;
}

// The space's launch formulas a family's parameter block takes besides the problem (see
// LaunchConfig): the kernel's scratch, and the box heights of TMA kernels' tensor maps.
struct LaunchValues {
  void* workspace = nullptr;      // zeroed device scratch ("workspace_bytes"); nullptr for none
  int tensor_map_box_rows = 0;    // "tensor_map_box_rows"; 0: the kernel takes no tensor maps
  int tensor_map_q_box_rows = 0;  // "tensor_map_q_box_rows"
};

// A kernel's one parameter, passed by value: its bytes, which the launch copies.
struct KernelParams {
  const void* data = nullptr;
  size_t size = 0;
};

// One problem's device data in the evaluation child: `sets` copies of the candidate's inputs and
// output (the timing gate cycles through them so that L2 cannot hold them) and, for the
// correctness gate, the reference's float32 output. FamilyRuntime::prepare makes it; it frees its
// memory when destroyed.
class ProblemRuntime {
 public:
  virtual ~ProblemRuntime() = default;
  // Draws every input from `seed` alone (element i of a tensor depends on the seed and i, not on
  // the host or its core count) and uploads the same values into every set. Draw 0 is the
  // family's plain inputs; draw d > 0 is FamilyRuntime::hard_inputs()[d - 1].
  virtual void draw_inputs(uint64_t seed, int draw) = 0;
  // Fills set 0's output with kPoisonByte.
  virtual void poison_output() = 0;
  // The candidate's parameter block for input set `set`, valid while this object lives.
  virtual KernelParams params(int set) const = 0;
  // Launches `reference` (the cubin's FamilyRuntime::reference_kernel of this problem) over set
  // 0's inputs into the reference's output. Asynchronous.
  virtual void launch_reference(cudaKernel_t reference, cudaStream_t stream) const = 0;
  // Set 0's output as floats, an element that still holds the poison as unwritten_output().
  virtual std::vector<float> read_output() const = 0;
  // The reference's output, in the same order.
  virtual std::vector<float> read_reference() const = 0;
};

class FamilyRuntime {
 public:
  virtual ~FamilyRuntime() = default;
  // The family's id, as its KernelFamily in template_registry.cpp has it ("attention").
  virtual std::string_view family() const = 0;
  // Every extern "C" kernel of the family's reference source (KernelFamily::reference_source):
  // one compile holds them all.
  virtual std::vector<std::string_view> reference_kernels() const = 0;
  // The reference kernel for problem p, one of reference_kernels().
  virtual std::string_view reference_kernel(const RuntimeProblem& p) const = 0;
  // How far p's output may be from the reference's.
  virtual Tolerance tolerance(const RuntimeProblem& p) const = 0;
  // The correctness gate's checks beyond the plain inputs, each a stage phrase for the failure
  // message ("on scores that grow along the keys"): inputs the family knows some wrong kernels
  // get right by chance on plain ones. ProblemRuntime::draw_inputs draws the d-th as draw d + 1.
  virtual std::vector<std::string> hard_inputs() const = 0;
  // The values of p that every check's seed mixes in (seed_for_check in shape_gates.cpp), so that
  // two problems never share inputs.
  virtual std::vector<int64_t> seed_words(const RuntimeProblem& p) const = 0;
  // The device bytes of one input set (inputs and output): what the timing gate rotates.
  virtual int64_t input_set_bytes(const RuntimeProblem& p) const = 0;
  // The elements of p's tensors (inputs and output): what the watchdog's allowance grows with.
  virtual double elements(const RuntimeProblem& p) const = 0;
  // Small problems that run the kernel serving p, for the sanitizer gate (compute-sanitizer is
  // slow): the same list for two problems one kernel serves, and disjoint lists otherwise.
  virtual std::vector<RuntimeProblem> sanitizer_problems(const RuntimeProblem& p) const = 0;
  // Allocates p's `sets` input sets (and the reference's output if with_reference) and fills
  // each set's parameter block, tensor maps included where `launch` asks for them. The inputs
  // are undefined until draw_inputs.
  virtual std::unique_ptr<ProblemRuntime> prepare(const RuntimeProblem& p, int sets, bool with_reference,
                                                  const LaunchValues& launch) const = 0;
};

// Every family's runtime, in runtime_registry.cpp's order.
const std::vector<const FamilyRuntime*>& family_runtimes();
// The runtime of a family id; nullptr for one without.
const FamilyRuntime* find_family_runtime(std::string_view family);
// The runtime of p's family. Throws std::invalid_argument where that family has none.
const FamilyRuntime& runtime_for(const RuntimeProblem& p);

}  // namespace evo

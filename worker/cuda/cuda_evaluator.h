#pragma once
// The `cuda` evaluator: gates 1-3 in this process (NVRTC needs no GPU context), gates 4-5 in a
// child process under a watchdog, so that a hung or faulting candidate can only take its child
// down: a serving child that answers evaluation after evaluation until one fails
// (evaluation_server.h), or with EvaluatorOptions::child_per_evaluation a fresh one each time.
// Gate 6, the sanitizer, wraps a process of its own. This process never creates a CUDA context
// for a candidate kernel.
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "evaluator.h"
#include "kernel_compiler.h"
#include "search_space.h"

namespace evo {

namespace cuda {
class EvaluationServer;
}

// Any kernel that takes its family's parameter block, given as source: how
// the tests run planted faults (wrong, hanging, out-of-bounds, spilling kernels) through the same
// compiler, gates and child as a real candidate.
struct SourceKernel {
  std::string source_id;  // names it in logs and NVRTC diagnostics
  std::string source;
  std::function<std::string(const Problem&)> name_expression;
  std::function<LaunchConfig(const Problem&)> launch;
};

// The child's watchdog for one evaluation: base_ms plus gates::kWatchdogNsPerElement for every
// element of the shapes' tensors (FamilyRuntime::elements; attention's 2x16x4096x128, causal and
// not: about 13 s more).
int watchdog_ms_for(int base_ms, const std::vector<Problem>& shapes);

class CudaEvaluator : public Evaluator {
 public:
  // device: from cuda::probe_device. Compiles every family's float32 reference kernels for the
  // device's arch up front; throws std::runtime_error (one line) when that fails.
  CudaEvaluator(const EvaluatorOptions& options, v1::DeviceInfo device);
  ~CudaEvaluator() override;

  const v1::DeviceInfo& device() const override { return device_; }
  void prefetch(const Genome& g, const std::vector<Problem>& shapes) override;
  bool compiled(const Genome& g, const std::vector<Problem>& shapes) override;
  v1::Evaluation evaluate(const Genome& g, const std::vector<Problem>& shapes,
                          bool run_sanitizer) override;

  // The same gates for an arbitrary source (tensor_cores is "skipped": no search space asks for
  // it). Never throws for a bad kernel.
  v1::Evaluation evaluate_source(const SourceKernel& kernel, const std::vector<Problem>& shapes,
                                 bool run_sanitizer);

  KernelCompiler& compiler() { return *compiler_; }
  // Gate processes the serving child started so far; -1 with a child per evaluation.
  int gate_process_starts() const;
  // Genomes whose prefetched compiles are still held (tests: none piles up for dropped leases).
  size_t prefetches_held();

 private:
  using LaunchFor = std::function<LaunchConfig(const Problem&)>;
  static bool all_ready(const std::vector<std::shared_future<CompiledKernel>>& compiles);
  // Gates 4-6 for kernels that passed gates 1-3; fills eval's remaining gates, shapes, status.
  void run_launch_gates(const std::vector<CompiledKernel>& kernels,
                        const std::vector<Problem>& shapes, const LaunchFor& launch_for,
                        bool run_sanitizer, const std::string& candidate, v1::Evaluation& eval);

  EvaluatorOptions options_;
  v1::DeviceInfo device_;
  std::unique_ptr<KernelCompiler> compiler_;
  std::map<std::string, CompiledKernel> references_;  // by family id
  std::mutex prefetch_mutex_;
  // The compiles prefetch started, by genome hash, until evaluate() takes the genome.
  std::map<std::string, std::vector<std::shared_future<CompiledKernel>>> prefetched_;
  std::string child_exe_;
  std::string server_dir_;                          // the serving child's log
  std::unique_ptr<cuda::EvaluationServer> server_;  // null: a child per evaluation
  std::string sanitizer_;
  std::mutex eval_mutex_;  // one child on the GPU at a time: timings must not overlap
  // Sanitizer requests that passed (their JSON: cubins, kernels, launches, inputs' seed) and the
  // verdict's detail; guarded by eval_mutex_.
  std::map<std::string, std::string> sanitizer_passes_;
  uint64_t evaluations_ = 0;
};

// Probes the GPU (throws "no GPU found (...); use --backend model" without one), then builds a
// CudaEvaluator.
std::unique_ptr<Evaluator> make_cuda_evaluator(const EvaluatorOptions& options);

}  // namespace evo

#include "shape_gates.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "cuda_error.h"
#include "family_runtime.h"
#include "gate_clock.h"
#include "gate_thresholds.h"

namespace evo::cuda {
namespace {

struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
using DevicePtr = std::unique_ptr<void, DeviceFree>;

// The kernel's scratch, zeroed once as its contract asks; every later launch on the stream must
// leave it reusable (the repeated-launch check holds it to that). Empty when none is needed.
DevicePtr zeroed_workspace(const ShapeJob& job) {
  if (job.workspace_bytes <= 0) return DevicePtr(nullptr);
  void* p = nullptr;
  EVO_CUDA_CHECK(cudaMalloc(&p, static_cast<size_t>(job.workspace_bytes)));
  DevicePtr w(p);
  EVO_CUDA_CHECK(cudaMemset(w.get(), 0, static_cast<size_t>(job.workspace_bytes)));
  return w;
}

LaunchValues launch_values(const ShapeJob& job, void* workspace) {
  LaunchValues l;
  l.workspace = workspace;
  l.tensor_map_box_rows = job.tensor_map_box_rows;
  l.tensor_map_q_box_rows = job.tensor_map_q_box_rows;
  return l;
}

}  // namespace

LaunchDims dims_of(const ShapeJob& job) {
  LaunchDims d;
  d.grid = job.grid;
  d.persistent = job.persistent;
  d.persistent_blocks = job.persistent_blocks;
  d.threads = job.threads;
  d.smem_bytes = job.smem_bytes;
  return d;
}

CorrectnessResult check_correctness(const LoadedKernel& candidate, const LoadedKernel& reference,
                                    const ShapeJob& job, uint64_t seed, int repeated_launches) {
  const RuntimeProblem& problem = job.shape;
  const FamilyRuntime& family = runtime_for(problem);
  const std::string where = problem.text();
  const std::vector<int64_t> words = family.seed_words(problem);
  DevicePtr workspace = zeroed_workspace(job);
  const std::unique_ptr<ProblemRuntime> data =
      family.prepare(problem, 1, true, launch_values(job, workspace.get()));
  const LaunchDims dims = dims_of(job);

  CorrectnessResult result;
  // Check `check` on the family's draw `draw` of inputs.
  auto one_check = [&](int check, const std::string& stage, int draw) {
    GateClock clock;
    data->draw_inputs(check_seed(seed, words, check), draw);
    data->poison_output();
    const double inputs_ms = clock.lap_ms();
    data->launch_reference(reference.handle(), 0);
    candidate.launch(data->params(0), dims, 0);
    EVO_CUDA_CHECK(cudaDeviceSynchronize());
    const double kernels_ms = clock.lap_ms();
    const ErrorFigures f = compare_with_reference(data->read_output(), data->read_reference());
    // In the child's log (evo-worker -v shows it): what a check of a big shape spends its time on.
    spdlog::info("event=correctness_check check={} shape={} inputs_ms={:.0f} kernels_ms={:.0f} compare_ms={:.0f}",
                 check, where, inputs_ms, kernels_ms, clock.lap_ms());
    result.worst.rel_l2_error = std::max(result.worst.rel_l2_error, f.rel_l2_error);
    result.worst.max_abs_error = std::max(result.worst.max_abs_error, f.max_abs_error);
    result.worst.nonfinite = std::max(result.worst.nonfinite, f.nonfinite);
    result.worst.unwritten = std::max(result.worst.unwritten, f.unwritten);
    if (!result.failure) result.failure = correctness_failure(f, where, family.tolerance(problem), stage);
  };

  one_check(0, "on the first launch", 0);
  if (result.failure) return result;
  // The family's hard inputs, checks 2, 3, ... (1 is the re-check's).
  const std::vector<std::string> hard = family.hard_inputs();
  for (size_t d = 0; d < hard.size(); ++d) {
    one_check(static_cast<int>(2 + d), hard[d], static_cast<int>(d + 1));
    if (result.failure) return result;
  }
  // The seed kernel passed one call and failed on the next: hammer it, then check again with
  // inputs it has never seen.
  for (int i = 0; i < repeated_launches; ++i) candidate.launch(data->params(0), dims, 0);
  EVO_CUDA_CHECK(cudaDeviceSynchronize());
  one_check(1, "after " + std::to_string(repeated_launches) + " back-to-back launches", 0);
  return result;
}

TimingSummary time_shape(const LoadedKernel& candidate, const ShapeJob& job, uint64_t seed,
                         int warmup, int timed, int per_sample, int64_t rotation_bytes,
                         int64_t l2_bytes) {
  GateClock clock;
  const RuntimeProblem& problem = job.shape;
  const FamilyRuntime& family = runtime_for(problem);
  const int64_t set_bytes = family.input_set_bytes(problem);
  size_t free_bytes = 0, total_bytes = 0;
  EVO_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const int max_sets = static_cast<int>(std::max<int64_t>(1, static_cast<int64_t>(free_bytes / 2) / set_bytes));
  const int sets = rotation_sets(set_bytes, rotation_bytes, l2_bytes, std::min(max_sets, 4096));

  // One workspace serves every set: launches on one stream run one after another.
  DevicePtr workspace = zeroed_workspace(job);
  const std::unique_ptr<ProblemRuntime> data =
      family.prepare(problem, sets, false, launch_values(job, workspace.get()));
  data->draw_inputs(check_seed(seed, family.seed_words(problem), 1000), 0);
  const LaunchDims dims = dims_of(job);
  const double inputs_ms = clock.lap_ms();
  // A stream of its own: the default stream cannot be captured. Being non-blocking, it does not
  // wait for the workspace's memset and the uploads on the default stream, so wait for them here.
  EVO_CUDA_CHECK(cudaDeviceSynchronize());
  cudaStream_t stream = nullptr;
  EVO_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  std::vector<cudaEvent_t> events;
  struct Guard {
    cudaStream_t& stream;
    cudaGraph_t& graph;
    cudaGraphExec_t& exec;
    std::vector<cudaEvent_t>& events;
    ~Guard() {
      for (auto e : events)
        if (e) cudaEventDestroy(e);
      if (exec) cudaGraphExecDestroy(exec);
      if (graph) cudaGraphDestroy(graph);
      if (stream) cudaStreamDestroy(stream);
    }
  } guard{stream, graph, exec, events};
  // The warm-up, timed: what a call costs tells whether the planned replays fit the budget.
  events.resize(2);
  for (auto& e : events) EVO_CUDA_CHECK(cudaEventCreate(&e));
  EVO_CUDA_CHECK(cudaEventRecord(events[0], stream));
  for (int i = 0; i < warmup; ++i) candidate.launch(data->params(i % sets), dims, stream);
  EVO_CUDA_CHECK(cudaEventRecord(events[1], stream));
  EVO_CUDA_CHECK(cudaEventSynchronize(events[1]));
  float warmup_ms = 0;
  EVO_CUDA_CHECK(cudaEventElapsedTime(&warmup_ms, events[0], events[1]));

  // One sample is one replay of a graph of back-to-back launches, each on the next input set, so
  // that neither the host's launch cost nor L2 holding one set's inputs sets the time.
  const TimingPlan plan =
      plan_timing(warmup > 0 ? warmup_ms * 1000.0 / warmup : 0.0, per_sample, sets, timed,
                  gates::kTimingBudgetMs * 1000.0 / 2, gates::kMinTimingSamples);  // replayed twice
  const int per_graph = plan.launches_per_sample, samples = plan.samples;
  events.resize(2 + 2 * static_cast<size_t>(samples));
  for (size_t i = 2; i < events.size(); ++i) EVO_CUDA_CHECK(cudaEventCreate(&events[i]));
  cudaEvent_t* pairs = events.data() + 2;
  // Captures per_graph launches, the i-th on input set set_of(i), and replays the graph once
  // untimed (its own warm-up), then `samples` times between event pairs: per-call µs of each.
  auto time_graph = [&](auto set_of) {
    if (exec) EVO_CUDA_CHECK(cudaGraphExecDestroy(exec));
    if (graph) EVO_CUDA_CHECK(cudaGraphDestroy(graph));
    exec = nullptr;
    graph = nullptr;
    EVO_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int j = 0; j < per_graph; ++j) candidate.launch(data->params(set_of(j)), dims, stream);
    EVO_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    EVO_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    EVO_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    for (int i = 0; i < samples; ++i) {
      EVO_CUDA_CHECK(cudaEventRecord(pairs[2 * i], stream));
      EVO_CUDA_CHECK(cudaGraphLaunch(exec, stream));
      EVO_CUDA_CHECK(cudaEventRecord(pairs[2 * i + 1], stream));
    }
    EVO_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<double> times_us(static_cast<size_t>(samples));
    for (int i = 0; i < samples; ++i) {
      float ms = 0;
      EVO_CUDA_CHECK(cudaEventElapsedTime(&ms, pairs[2 * i], pairs[2 * i + 1]));
      times_us[i] = ms * 1000.0 / per_graph;
    }
    return times_us;
  };
  TimingSummary summary = summarise_times(time_graph([&](int j) { return (warmup + j) % sets; }));
  summary.samples = samples;
  summary.launches_per_sample = per_graph;
  // The resident figure: the same graph and replays with every launch on the first input set,
  // which then stays in L2. Reported beside the fitness; a run submitted with
  // --fitness-inputs resident ranks by it instead (DESIGN.md, the timing gate).
  summary.resident_median_us = summarise_times(time_graph([](int) { return 0; })).median_us;
  spdlog::info("event=timed shape={} input_sets={} inputs_ms={:.0f} replays_ms={:.0f}", problem.text(), sets,
               inputs_ms, clock.lap_ms());
  return summary;
}

}  // namespace evo::cuda

#include "shape_gates.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "attention/problem.h"
#include "attention/tensor_maps.h"
#include "cuda_error.h"
#include "element_bits.h"
#include "gate_clock.h"
#include "gate_thresholds.h"

namespace evo::cuda {
namespace {

struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
using DevicePtr = std::unique_ptr<void, DeviceFree>;

DevicePtr device_alloc(size_t bytes) {
  void* p = nullptr;
  EVO_CUDA_CHECK(cudaMalloc(&p, bytes));
  return DevicePtr(p);
}

size_t q_elems(const attention::Shape& s) { return size_t(s.batch) * s.heads * s.seq_q * s.head_dim; }
size_t kv_elems(const attention::Shape& s) { return size_t(s.batch) * s.heads * s.seq_k * s.head_dim; }

// The kernel's scratch, zeroed once as its contract asks; every later launch on the stream must
// leave it reusable (the repeated-launch check holds it to that). Empty when none is needed.
DevicePtr zeroed_workspace(const ShapeJob& job) {
  if (job.workspace_bytes <= 0) return DevicePtr(nullptr);
  DevicePtr w = device_alloc(static_cast<size_t>(job.workspace_bytes));
  EVO_CUDA_CHECK(cudaMemset(w.get(), 0, static_cast<size_t>(job.workspace_bytes)));
  return w;
}

// SplitMix64's finaliser: a counter-based generator, so that element i of a tensor depends on
// (seed, i) alone.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// U(-1, 1), 2^24 levels, never exactly 0.
float uniform_pm1(uint64_t seed, size_t i) {
  const uint64_t z = mix64(seed + 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(i) + 1));
  return (static_cast<float>(z >> 40) + 0.5f) * (2.f / 16777216.f) - 1.f;
}

// Runs fn(i) for i in [0, n) on every core. With elements independent of each other, a tensor is
// the same whatever the core count. Drawn one by one from a sequential generator on one core, the
// inputs of the large shapes took most of the correctness gate's time (bench/NOTES.md, 2026-11-28).
template <class Fn>
void parallel_for(size_t n, Fn fn) {
  const size_t threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 64);
  const size_t chunk = std::max<size_t>(size_t(1) << 16, (n + threads - 1) / threads);
  std::vector<std::thread> pool;
  for (size_t begin = chunk; begin < n; begin += chunk)
    pool.emplace_back([=] {
      for (size_t i = begin; i < std::min(n, begin + chunk); ++i) fn(i);
    });
  for (size_t i = 0; i < std::min(n, chunk); ++i) fn(i);
  for (auto& t : pool) t.join();
}

// U(-1, 1) in the shape's element type: never all zeros, never all-equal, so a kernel that
// ignores an input shows.
std::vector<uint16_t> random_elements(size_t n, uint64_t seed, DType dtype) {
  std::vector<uint16_t> out(n);
  parallel_for(n, [&](size_t i) { out[i] = float_to_bits(dtype, uniform_pm1(seed, i)); });
  return out;
}

// K's rows scaled from x1 at the first key to x16 at the last, so that each row's running max
// keeps rising from tile to tile and the online softmax must shrink what it has accumulated. On
// uniform inputs every later tile's max stays within 2^8 of the first's, and a kernel whose
// rescale is wrong (or, with LAZY_RESCALE, never runs) would pass.
std::vector<uint16_t> growing_keys(const attention::Shape& s, uint64_t seed) {
  std::vector<uint16_t> out(kv_elems(s));
  const double last = std::max(1, s.seq_k - 1);
  parallel_for(out.size(), [&](size_t i) {
    const int key = static_cast<int>((i / s.head_dim) % s.seq_k);
    out[i] = float_to_bits(s.dtype, uniform_pm1(seed, i) * static_cast<float>(1.0 + 15.0 * key / last));
  });
  return out;
}

void upload(void* dst, const std::vector<uint16_t>& src) {
  EVO_CUDA_CHECK(cudaMemcpy(dst, src.data(), src.size() * 2, cudaMemcpyHostToDevice));
}

// A seed per (run seed, check): checks never share inputs, and a rerun sees the same ones.
uint64_t check_seed(uint64_t seed, const ShapeJob& job, int check) {
  uint64_t h = seed * 0x9E3779B97F4A7C15ull;
  const attention::Shape shape = attention::shape_of(job.shape);
  for (int64_t v : {int64_t(shape.batch), int64_t(shape.heads), int64_t(shape.seq_q),
                    int64_t(shape.seq_k), int64_t(shape.head_dim),
                    int64_t(shape.causal), int64_t(check)})
    h = (h ^ static_cast<uint64_t>(v)) * 0x100000001B3ull;
  return h;
}

// One check's Q, K or V: a seed of its own, so that the three never share their values.
uint64_t tensor_seed(uint64_t check, char tensor) {
  return mix64(check ^ (0xD1B54A32D192ED03ull * static_cast<uint64_t>(tensor)));
}

FaParams params_for(const ShapeJob& job, void* q, void* k, void* v, void* o, void* workspace) {
  const attention::Shape shape = attention::shape_of(job.shape);
  FaParams p{};
  p.q = q;
  p.k = k;
  p.v = v;
  p.o = o;
  p.batch = shape.batch;
  p.heads = shape.heads;
  p.seq_q = shape.seq_q;
  p.seq_k = shape.seq_k;
  p.softmax_scale = 1.f / std::sqrt(static_cast<float>(shape.head_dim));
  p.workspace = workspace;
  if (job.tensor_map_box_rows > 0)
    EVO_CUDA_CHECK(encode_attention_tensor_maps(p, shape.dtype, shape.head_dim,
                                                job.tensor_map_box_rows, job.tensor_map_q_box_rows));
  return p;
}

}  // namespace

LaunchDims dims_of(const ShapeJob& job) {
  LaunchDims d;
  d.grid = job.grid;
  d.threads = job.threads;
  d.smem_bytes = job.smem_bytes;
  return d;
}

CorrectnessResult check_correctness(const LoadedKernel& candidate, const LoadedKernel& reference,
                                    const ShapeJob& job, uint64_t seed, int repeated_launches) {
  const attention::Shape s = attention::shape_of(job.shape);
  const size_t nq = q_elems(s), nkv = kv_elems(s);
  DevicePtr q = device_alloc(nq * 2), k = device_alloc(nkv * 2), v = device_alloc(nkv * 2);
  DevicePtr o = device_alloc(nq * 2), ref = device_alloc(nq * 4);
  DevicePtr workspace = zeroed_workspace(job);
  const FaParams p = params_for(job, q.get(), k.get(), v.get(), o.get(), workspace.get());
  const LaunchDims dims = dims_of(job);

  CorrectnessResult result;
  std::vector<uint16_t> out(nq);
  std::vector<float> expected(nq);
  auto one_check = [&](int check, const std::string& stage, bool growing_scores) {
    GateClock clock;
    const uint64_t inputs = check_seed(seed, job, check);
    upload(q.get(), random_elements(nq, tensor_seed(inputs, 'q'), s.dtype));
    const uint64_t k_seed = tensor_seed(inputs, 'k');
    upload(k.get(), growing_scores ? growing_keys(s, k_seed) : random_elements(nkv, k_seed, s.dtype));
    upload(v.get(), random_elements(nkv, tensor_seed(inputs, 'v'), s.dtype));
    EVO_CUDA_CHECK(cudaMemset(o.get(), kPoisonByte, nq * 2));
    const double inputs_ms = clock.lap_ms();
    reference.launch_reference(p, static_cast<float*>(ref.get()), s.head_dim, s.causal ? 1 : 0, 0);
    candidate.launch(p, dims, 0);
    EVO_CUDA_CHECK(cudaDeviceSynchronize());
    const double kernels_ms = clock.lap_ms();
    EVO_CUDA_CHECK(cudaMemcpy(out.data(), o.get(), nq * 2, cudaMemcpyDeviceToHost));
    EVO_CUDA_CHECK(cudaMemcpy(expected.data(), ref.get(), nq * 4, cudaMemcpyDeviceToHost));
    const ErrorFigures f = compare_with_reference(out, expected, s.dtype);
    // In the child's log (evo-worker -v shows it): what a check of a big shape spends its time on.
    spdlog::info("event=correctness_check check={} shape={} inputs_ms={:.0f} kernels_ms={:.0f} compare_ms={:.0f}",
                 check, s.text(), inputs_ms, kernels_ms, clock.lap_ms());
    result.worst.rel_l2_error = std::max(result.worst.rel_l2_error, f.rel_l2_error);
    result.worst.max_abs_error = std::max(result.worst.max_abs_error, f.max_abs_error);
    result.worst.nonfinite = std::max(result.worst.nonfinite, f.nonfinite);
    result.worst.unwritten = std::max(result.worst.unwritten, f.unwritten);
    if (!result.failure) result.failure = correctness_failure(f, s, stage);
  };

  one_check(0, "on the first launch", false);
  if (result.failure) return result;
  one_check(2, "on scores that grow along the keys", true);
  if (result.failure) return result;
  // The seed kernel passed one call and failed on the next: hammer it, then check again with
  // inputs it has never seen.
  for (int i = 0; i < repeated_launches; ++i) candidate.launch(p, dims, 0);
  EVO_CUDA_CHECK(cudaDeviceSynchronize());
  one_check(1, "after " + std::to_string(repeated_launches) + " back-to-back launches", false);
  return result;
}

TimingSummary time_shape(const LoadedKernel& candidate, const ShapeJob& job, uint64_t seed,
                         int warmup, int timed, int per_sample, int64_t rotation_bytes,
                         int64_t l2_bytes) {
  GateClock clock;
  const attention::Shape s = attention::shape_of(job.shape);
  const size_t nq = q_elems(s), nkv = kv_elems(s);
  const int64_t set_bytes = static_cast<int64_t>((2 * nq + 2 * nkv) * 2);
  size_t free_bytes = 0, total_bytes = 0;
  EVO_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const int max_sets = static_cast<int>(std::max<int64_t>(1, static_cast<int64_t>(free_bytes / 2) / set_bytes));
  const int sets = rotation_sets(set_bytes, rotation_bytes, l2_bytes, std::min(max_sets, 4096));

  DevicePtr q = device_alloc(nq * 2 * sets), k = device_alloc(nkv * 2 * sets);
  DevicePtr v = device_alloc(nkv * 2 * sets), o = device_alloc(nq * 2 * sets);
  // One workspace serves every set: launches on one stream run one after another.
  DevicePtr workspace = zeroed_workspace(job);
  const uint64_t inputs = check_seed(seed, job, 1000);
  const auto hq = random_elements(nq, tensor_seed(inputs, 'q'), s.dtype);
  const auto hk = random_elements(nkv, tensor_seed(inputs, 'k'), s.dtype);
  const auto hv = random_elements(nkv, tensor_seed(inputs, 'v'), s.dtype);
  std::vector<FaParams> params;
  for (int i = 0; i < sets; ++i) {
    auto* qi = static_cast<uint16_t*>(q.get()) + nq * i;
    auto* ki = static_cast<uint16_t*>(k.get()) + nkv * i;
    auto* vi = static_cast<uint16_t*>(v.get()) + nkv * i;
    auto* oi = static_cast<uint16_t*>(o.get()) + nq * i;
    upload(qi, hq);
    upload(ki, hk);
    upload(vi, hv);
    params.push_back(params_for(job, qi, ki, vi, oi, workspace.get()));
  }
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
  for (int i = 0; i < warmup; ++i) candidate.launch(params[i % sets], dims, stream);
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
    for (int j = 0; j < per_graph; ++j) candidate.launch(params[set_of(j)], dims, stream);
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
  spdlog::info("event=timed shape={} input_sets={} inputs_ms={:.0f} replays_ms={:.0f}", s.text(), sets,
               inputs_ms, clock.lap_ms());
  return summary;
}

}  // namespace evo::cuda

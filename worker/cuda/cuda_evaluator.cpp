#include "cuda_evaluator.h"

#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "child_process.h"
#include "device_probe.h"
#include "evaluation_child.h"
#include "evaluation_server.h"
#include "family_runtime.h"
#include "gate_clock.h"
#include "gate_math.h"
#include "gate_thresholds.h"
#include "pre_launch_gates.h"
#include "resource_gate.h"
#include "sanitizer_gate.h"
#include "template_registry.h"
#include "log_ids.h"

namespace evo {
namespace {

// Puts eval's gates in DESIGN.md's order (the Gate enum's); a gate never reached becomes not_run.
void complete_gates(v1::Evaluation& eval) {
  std::map<v1::Gate, v1::GateVerdict> by_kind;
  for (const auto& g : eval.gates()) by_kind.emplace(g.kind(), g);
  eval.clear_gates();
  for (int k = v1::GATE_VALID; k <= v1::GATE_SANITIZER; ++k) {
    const auto kind = static_cast<v1::Gate>(k);
    auto it = by_kind.find(kind);
    if (it != by_kind.end()) {
      *eval.add_gates() = it->second;
    } else {
      add_gate(eval, kind, v1::VERDICT_NOT_RUN, "");
    }
  }
}

// A private directory for one evaluation's request, result and log files.
std::string make_work_dir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "evo-eval-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("cannot create a temp dir for the evaluation child");
  return tmpl;
}

struct WorkDir {
  std::string path = make_work_dir();
  ~WorkDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

int watchdog_ms_for(int base_ms, const std::vector<Problem>& shapes) {
  double elements = 0;
  for (const auto& s : shapes) elements += runtime_for(s).elements(s);
  const double ms = base_ms + elements * gates::kWatchdogNsPerElement * 1e-6;
  return static_cast<int>(std::min(ms, 3600.0 * 1000));
}

namespace {

// A persistent kernel's blocks under the sanitizer: few, so that each takes several of the small
// problem's work tiles and the tools see the stages, barriers and output tile carried from one
// work tile to the next.
constexpr int64_t kSanitizerPersistentBlocks = 3;

// Sanitizer passes a worker keeps (a request's JSON is a few KB): plenty for one run's elites.
constexpr size_t kSanitizerPassesKept = 4096;

uint64_t seed_of(const std::string& candidate) {
  return std::stoull(fnv1a_hex(candidate), nullptr, 16);
}

cuda::ShapeJob job_for(const Problem& shape, const CompiledKernel& k, const LaunchConfig& l) {
  cuda::ShapeJob job;
  job.shape = shape;
  job.flops = shape.flops();
  job.cubin_path = k.cubin_path;
  job.kernel = k.lowered_name;
  job.grid = {l.persistent ? l.grid_x * l.grid_y : l.grid_x, l.persistent ? 1 : l.grid_y, l.grid_z};
  job.persistent = l.persistent != 0;
  job.threads = l.threads;
  job.smem_bytes = l.smem_bytes;
  job.workspace_bytes = l.workspace_bytes;
  job.tensor_map_box_rows = static_cast<int>(l.tensor_map_box_rows);
  job.tensor_map_q_box_rows = static_cast<int>(l.tensor_map_q_box_rows);
  return job;
}

// compute-sanitizer is slow: it gets its family's small problems (FamilyRuntime::
// sanitizer_problems) for each kernel the evaluation used, run by that kernel.
std::vector<cuda::ShapeJob> sanitizer_jobs(const std::vector<CompiledKernel>& kernels,
                                           const std::vector<Problem>& shapes,
                                           const std::function<LaunchConfig(const Problem&)>& launch_for) {
  std::vector<cuda::ShapeJob> jobs;
  std::vector<std::vector<Problem>> seen;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::vector<Problem> small = runtime_for(shapes[i]).sanitizer_problems(shapes[i]);
    if (std::find(seen.begin(), seen.end(), small) != seen.end()) continue;  // a kernel already seen
    seen.push_back(small);
    for (const auto& p : small) {
      jobs.push_back(job_for(p, kernels[i], launch_for(p)));
      jobs.back().persistent_blocks = kSanitizerPersistentBlocks;
    }
  }
  return jobs;
}

}  // namespace

CudaEvaluator::CudaEvaluator(const EvaluatorOptions& options, v1::DeviceInfo device)
    : options_(options), device_(std::move(device)) {
  if (options_.timeout_ms <= 0) options_.timeout_ms = gates::kDefaultWatchdogMs;
  const std::string arch = options_.arch.empty() ? device_.arch() : options_.arch;
  compiler_ = std::make_unique<KernelCompiler>(options_.cache_dir, arch, options_.compile_threads);
  // Each family's reference source, compiled once: the one cubin holds every reference kernel
  // of the family, and the child loads the one a shape needs.
  for (const FamilyRuntime* family : family_runtimes()) {
    const KernelFamily* host = find_family(family->family());
    if (!host) throw std::runtime_error("no kernel family '" + std::string(family->family()) + "' for its runtime");
    try {
      references_[std::string(family->family())] =
          compiler_->compile("reference_" + std::string(family->family()), host->reference_source,
                             std::string(family->reference_kernels().front()));
    } catch (const CompileError& e) {
      throw std::runtime_error("the float32 reference kernel of " + std::string(family->family()) +
                               " does not compile: " + e.what());
    }
  }
  child_exe_ = cuda::self_executable();
  if (!options_.child_per_evaluation) {
    server_dir_ = make_work_dir();
    server_ = std::make_unique<cuda::EvaluationServer>(child_exe_, server_dir_);
  }
  sanitizer_ = cuda::find_compute_sanitizer();
  const int sanitizer_jobs = cuda::sanitizer_jobs();  // a bad EVO_SANITIZER_JOBS stops the start
  spdlog::info("event=cuda_evaluator gpu=\"{}\" arch={} sms={} watchdog_ms={} compute_sanitizer=\"{}\" sanitizer_jobs={} "
               "gate_process={}",
               device_.gpu_name(), arch, device_.sm_count(), options_.timeout_ms,
               sanitizer_.empty() ? "not found" : sanitizer_, sanitizer_jobs,
               options_.child_per_evaluation ? "per-evaluation" : "serving");
}

CudaEvaluator::~CudaEvaluator() {
  server_.reset();  // its process ends before its log's directory goes
  if (!server_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(server_dir_, ec);
  }
}

int CudaEvaluator::gate_process_starts() const { return server_ ? server_->starts() : -1; }

void CudaEvaluator::prefetch(const Genome& g, const std::vector<Problem>& shapes) {
  try {
    const auto& space = SearchSpace::for_template(g.template_id());
    std::set<std::string> names;
    std::vector<std::shared_future<CompiledKernel>> compiles;
    for (const auto& s : shapes)
      if (!space.violated_constraint(g, s, device_.smem_per_block_optin(),
                                     sm_arch_number(compiler_->arch())) &&
          names.insert(space.kernel_name(g, s)).second)
        compiles.push_back(compiler_->compile_candidate_async(g, s));  // lands in the cache; evaluate() finds it
    std::lock_guard<std::mutex> lock(prefetch_mutex_);
    // A genome prefetched and never evaluated (its lease dropped) would stay: entries whose compiles
    // have all landed are dropped here, since compiled() answers the same for a missing one.
    for (auto it = prefetched_.begin(); it != prefetched_.end();)
      it = all_ready(it->second) ? prefetched_.erase(it) : std::next(it);
    prefetched_[g.hash()] = std::move(compiles);
  } catch (const std::exception& e) {
    // A bad candidate is evaluate()'s to report, with its status.
    spdlog::debug("event=prefetch_skipped {}genome_hash={} reason=\"{}\"", log_ids(), g.hash(), e.what());
  }
}

bool CudaEvaluator::compiled(const Genome& g, const std::vector<Problem>&) {
  std::lock_guard<std::mutex> lock(prefetch_mutex_);
  const auto it = prefetched_.find(g.hash());
  return it == prefetched_.end() || all_ready(it->second);  // nothing in flight: evaluate() compiles what it needs
}

bool CudaEvaluator::all_ready(const std::vector<std::shared_future<CompiledKernel>>& compiles) {
  for (const auto& f : compiles)
    if (f.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return false;
  return true;
}

size_t CudaEvaluator::prefetches_held() {
  std::lock_guard<std::mutex> lock(prefetch_mutex_);
  return prefetched_.size();
}

v1::Evaluation CudaEvaluator::evaluate(const Genome& g, const std::vector<Problem>& shapes,
                                       bool run_sanitizer) {
  {
    std::lock_guard<std::mutex> lock(prefetch_mutex_);
    prefetched_.erase(g.hash());
  }
  GateClock clock;
  v1::Evaluation eval;
  *eval.mutable_device() = device_;
  auto kernels = run_pre_launch_gates(*compiler_, g, shapes, device_.smem_per_block_optin(), eval);
  if (kernels) {
    const auto& space = SearchSpace::for_template(g.template_id());
    run_launch_gates(*kernels, shapes, [&](const Problem& p) { return space.launch(g, p); },
                     run_sanitizer || options_.sanitize, g.hash(), eval);
  }
  complete_gates(eval);
  eval.set_wall_ms(clock.total_ms());
  spdlog::info("event=measured {}genome_hash={} status={} fitness_us={:.2f} genome={} message=\"{}\"", log_ids(),
               g.hash(), v1::EvalStatus_Name(eval.status()), eval.fitness_us(), g.genes_text(), eval.message());
  return eval;
}

v1::Evaluation CudaEvaluator::evaluate_source(const SourceKernel& kernel,
                                              const std::vector<Problem>& shapes,
                                              bool run_sanitizer) {
  GateClock clock;
  v1::Evaluation eval;
  *eval.mutable_device() = device_;
  const std::string candidate = kernel.source_id;
  auto reject = [&](v1::EvalStatus status, v1::Gate gate, const std::string& msg) {
    eval.set_status(status);
    eval.set_message(msg);
    set_gate(eval, gate, v1::VERDICT_FAILED, msg, clock.lap_ms());
    complete_gates(eval);
    eval.set_wall_ms(clock.total_ms());
    spdlog::info("event=measured {}source={} status={} message=\"{}\"", log_ids(), candidate,
                 v1::EvalStatus_Name(status), msg);
    return eval;
  };
  if (shapes.empty()) return reject(v1::INVALID, v1::GATE_VALID, "no problem shape given");
  add_gate(eval, v1::GATE_VALID, v1::VERDICT_PASSED, "source kernel: no search space to check", clock.lap_ms());

  std::map<std::string, std::shared_future<CompiledKernel>> pending;
  for (const auto& s : shapes) {
    const std::string name = kernel.name_expression(s);
    if (!pending.count(name))
      pending.emplace(name, compiler_->compile_async(kernel.source_id, kernel.source, name));
  }
  std::vector<CompiledKernel> kernels;
  for (const auto& s : shapes) {
    CompiledKernel k;
    try {
      k = pending.at(kernel.name_expression(s)).get();
    } catch (const CompileError& e) {
      eval.mutable_resources()->set_ptxas_log(e.log());
      if (const auto why = register_shortage(e.log(), kernel.launch(s).threads))
        return reject(v1::RESOURCE_REJECT, v1::GATE_COMPILE, *why);
      return reject(v1::COMPILE_ERROR, v1::GATE_COMPILE, e.what());
    } catch (const std::exception& e) {
      return reject(v1::COMPILE_ERROR, v1::GATE_COMPILE, e.what());
    }
    const LaunchConfig l = kernel.launch(s);
    k.resources.set_dynamic_smem_bytes(static_cast<int32_t>(l.smem_bytes));
    k.resources.set_threads_per_block(static_cast<int32_t>(l.threads));
    if (kernels.empty()) *eval.mutable_resources() = k.resources;
    if (auto why = resource_violation(k.resources, device_.smem_per_block_optin(), l.min_registers)) {
      *eval.mutable_resources() = k.resources;
      return reject(v1::RESOURCE_REJECT, v1::GATE_COMPILE, *why);
    }
    kernels.push_back(std::move(k));
  }
  add_gate(eval, v1::GATE_COMPILE, v1::VERDICT_PASSED, std::to_string(eval.resources().registers()) + " registers",
           clock.lap_ms());
  add_gate(eval, v1::GATE_TENSOR_CORES, v1::VERDICT_SKIPPED, "source kernel: not required");
  run_launch_gates(kernels, shapes, kernel.launch, run_sanitizer || options_.sanitize, candidate, eval);
  complete_gates(eval);
  eval.set_wall_ms(clock.total_ms());
  spdlog::info("event=measured {}source={} status={} message=\"{}\"", log_ids(), candidate,
               v1::EvalStatus_Name(eval.status()), eval.message());
  return eval;
}

void CudaEvaluator::run_launch_gates(const std::vector<CompiledKernel>& kernels,
                                     const std::vector<Problem>& shapes,
                                     const LaunchFor& launch_for, bool run_sanitizer,
                                     const std::string& candidate, v1::Evaluation& eval) {
  std::lock_guard<std::mutex> lock(eval_mutex_);
  cuda::EvalRequest req;
  req.device = options_.gpu;
  req.seed = seed_of(candidate);
  req.run_correct = true;
  req.run_timed = true;
  req.repeated_launches = gates::kRepeatedLaunches;
  req.warmup_launches = gates::kWarmupLaunches;
  req.timed_launches = gates::kTimedLaunches;
  req.launches_per_sample = gates::kLaunchesPerTimingSample;
  req.rotation_bytes = gates::kRotationBytes;
  if (!shapes.empty()) req.reference_cubin = references_.at(std::string(runtime_for(shapes[0]).family())).cubin_path;
  for (size_t i = 0; i < shapes.size(); ++i)
    req.shapes.push_back(job_for(shapes[i], kernels[i], launch_for(shapes[i])));

  std::unique_ptr<WorkDir> dir;
  try {
    dir = std::make_unique<WorkDir>();
  } catch (const std::exception& e) {
    eval.set_status(v1::CRASH);
    eval.set_message(e.what());
    return;
  }
  cuda::ChildLaunch how;
  how.exe = child_exe_;
  how.timeout_ms = watchdog_ms_for(options_.timeout_ms, shapes);
  how.work_dir = dir->path;
  how.tag = "gates";
  const cuda::ChildOutcome outcome = server_ ? server_->evaluate(req, how) : cuda::run_evaluation_child(req, how);
  const v1::Evaluation& child = outcome.evaluation;
  spdlog::debug("event=child_exited {}genome_hash={} exit_code={} wall_ms={:.0f} log=\"{}\"", log_ids(), candidate,
                outcome.exit_code, outcome.wall_ms, outcome.log);

  eval.set_status(child.status());
  eval.set_message(child.message());
  for (const auto& g : child.gates()) set_gate(eval, g.kind(), g.outcome(), g.detail(), g.elapsed_ms());
  *eval.mutable_shapes() = child.shapes();
  eval.set_fitness_us(child.fitness_us());
  if (!outcome.result_written || child.status() == v1::TIMEOUT) {
    // The child died before it could say which gate it was in; the correctness gate comes first.
    set_gate(eval, v1::GATE_CORRECT, v1::VERDICT_FAILED, child.message());
  }
  if (child.status() != v1::OK) return;

  if (!run_sanitizer) {
    set_gate(eval, v1::GATE_SANITIZER, v1::VERDICT_NOT_RUN, "not requested");
    return;
  }
  cuda::EvalRequest sreq = req;
  sreq.run_timed = false;
  sreq.repeated_launches = 2;  // the tools are slow; a second launch still shows state left behind
  sreq.shapes = sanitizer_jobs(kernels, shapes, launch_for);
  // The same kernels (a cubin is named by its content), launched the same way on the same
  // inputs, passed once already: a run of several buckets of one head dim, or a later run, meets
  // the same binaries again, and the tools would only say the same.
  const std::string launches = cuda::to_json(sreq);
  if (const auto passed = sanitizer_passes_.find(launches); passed != sanitizer_passes_.end()) {
    set_gate(eval, v1::GATE_SANITIZER, v1::VERDICT_PASSED,
             passed->second + " (these kernels, launches and inputs passed it earlier in this worker)", 0);
    return;
  }
  const GateClock clock;
  const cuda::SanitizerVerdict v =
      cuda::run_sanitizer_gate(sanitizer_, child_exe_, sreq, dir->path, gates::kSanitizerWatchdogMs);
  set_gate(eval, v1::GATE_SANITIZER, v.gate.outcome(), v.gate.detail(), clock.total_ms());
  if (v.gate.outcome() == v1::VERDICT_PASSED) {
    if (sanitizer_passes_.size() >= kSanitizerPassesKept) sanitizer_passes_.clear();  // a bound, not an LRU
    sanitizer_passes_.emplace(launches, v.gate.detail());
  }
  if (v.failed) {
    eval.set_status(v1::SANITIZER_ERROR);
    eval.set_message(v.message);
    eval.set_fitness_us(0);
  }
}

std::unique_ptr<Evaluator> make_cuda_evaluator(const EvaluatorOptions& options) {
  v1::DeviceInfo device = cuda::probe_device(options.gpu);
  return std::make_unique<CudaEvaluator>(options, std::move(device));
}

}  // namespace evo

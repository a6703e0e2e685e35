#include "child_main.h"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "cuda_error.h"
#include "eval_request.h"
#include "evaluation_server.h"
#include "evo/evo.pb.h"
#include "family.h"
#include "family_runtime.h"
#include "gate_clock.h"
#include "pre_launch_gates.h"
#include "shape_gates.h"

namespace evo {
namespace {

using cuda::CudaFailure;
using cuda::EvalRequest;
using cuda::LoadedKernel;

constexpr int kExitBadRequest = 2;
constexpr int kExitCudaFailure = 3;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read evaluation request '" + path + "'");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool write_result(const v1::Evaluation& e, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  return out && e.SerializeToOstream(&out) && out.flush();
}

// A run's shapes may need different cubins (and kernels of one): load each once.
class KernelSet {
 public:
  const LoadedKernel& get(const cuda::ShapeJob& job) {
    auto& slot = loaded_[job.cubin_path + "\n" + job.kernel];
    if (!slot) slot = std::make_unique<LoadedKernel>(job.cubin_path, job.kernel);
    slot->prepare(cuda::dims_of(job));
    return *slot;
  }

 private:
  std::map<std::string, std::unique_ptr<LoadedKernel>> loaded_;
};

// The float32 reference kernels, each loaded when first needed and kept for the process's life:
// a serving child (run_eval_child_server) loads each once for all its evaluations.
class ReferenceKernels {
 public:
  const LoadedKernel& get(const std::string& cubin, const std::string& name) {
    auto& slot = loaded_[cubin + "\n" + name];
    if (!slot) slot = std::make_unique<LoadedKernel>(cubin, name);
    return *slot;
  }

 private:
  std::map<std::string, std::unique_ptr<LoadedKernel>> loaded_;
};

// Runs the gates; CUDA failures propagate as CudaFailure with `stage` saying where.
void run_gates(const EvalRequest& req, ReferenceKernels& references, v1::Evaluation& e, std::string& stage) {
  stage = "device setup";
  EVO_CUDA_CHECK(cudaSetDevice(req.device));
  int l2 = 0;
  EVO_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, req.device));
  KernelSet kernels;
  auto reference_for = [&](const std::string& name) -> const LoadedKernel& {
    return references.get(req.reference_cubin, name);
  };

  for (const auto& job : req.shapes) set_result_problem(job.shape, e.add_shapes());

  if (req.run_correct) {
    GateClock clock;
    for (size_t i = 0; i < req.shapes.size(); ++i) {
      const auto& job = req.shapes[i];
      const std::string reference_name(runtime_for(job.shape).reference_kernel(job.shape));
      stage = "loading the reference kernel " + reference_name;
      const LoadedKernel& reference = reference_for(reference_name);
      stage = "correctness check of " + job.shape.text();
      const auto r = cuda::check_correctness(kernels.get(job), reference, job, req.seed,
                                             req.repeated_launches);
      auto* out = e.mutable_shapes(static_cast<int>(i));
      out->set_rel_l2_error(r.worst.rel_l2_error);
      out->set_max_abs_error(r.worst.max_abs_error);
      out->set_nonfinite(r.worst.nonfinite);
      out->set_unwritten(r.worst.unwritten);
      if (r.failure) {
        e.set_status(v1::INCORRECT);
        e.set_message("incorrect: " + *r.failure);
        set_gate(e, v1::GATE_CORRECT, v1::VERDICT_FAILED, *r.failure, clock.total_ms());
        set_gate(e, v1::GATE_TIMED, v1::VERDICT_NOT_RUN, "");
        return;
      }
    }
    set_gate(e, v1::GATE_CORRECT, v1::VERDICT_PASSED,
             std::to_string(req.shapes.size()) + " shapes, each checked twice around " +
                 std::to_string(req.repeated_launches) + " back-to-back launches",
             clock.total_ms());
  } else {
    set_gate(e, v1::GATE_CORRECT, v1::VERDICT_NOT_RUN, "");
  }

  if (req.run_timed) {
    GateClock clock;
    std::vector<double> medians;
    std::string plans;  // per shape, how the samples were taken (plan_timing may trim them)
    for (size_t i = 0; i < req.shapes.size(); ++i) {
      const auto& job = req.shapes[i];
      stage = "timing of " + job.shape.text();
      const auto t = cuda::time_shape(kernels.get(job), job, req.seed, req.warmup_launches,
                                      req.timed_launches, req.launches_per_sample,
                                      req.rotation_bytes, l2);
      auto* out = e.mutable_shapes(static_cast<int>(i));
      out->set_median_us(t.median_us);
      out->set_p10_us(t.p10_us);
      out->set_p90_us(t.p90_us);
      out->set_resident_us(t.resident_median_us);
      out->set_repeats(t.samples * t.launches_per_sample);
      out->set_tflops(t.median_us > 0 ? job.flops / (t.median_us * 1e-6) / 1e12 : 0);
      medians.push_back(t.median_us);
      plans += (plans.empty() ? "" : ", ") + job.shape.text() + " " +
               std::to_string(t.samples) + "x" + std::to_string(t.launches_per_sample);
    }
    e.set_fitness_us(cuda::geometric_mean(medians));
    set_gate(e, v1::GATE_TIMED, v1::VERDICT_PASSED,
             "graph replays x back-to-back launches per shape: " + plans + ", after " +
                 std::to_string(req.warmup_launches) + " warm-up",
             clock.total_ms());
  } else {
    set_gate(e, v1::GATE_TIMED, v1::VERDICT_NOT_RUN, "");
  }
  e.set_status(v1::OK);
}

// Answers one request file: runs its gates and writes its result. Returns the exit code
// run_eval_child documents, and sets *status to the result's.
int answer_request(const std::string& request_path, ReferenceKernels& references, v1::EvalStatus* status) {
  EvalRequest req;
  try {
    req = cuda::request_from_json(read_file(request_path));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "evaluation child: %s\n", e.what());
    return kExitBadRequest;
  }

  v1::Evaluation e;
  std::string stage;
  int code = 0;
  try {
    run_gates(req, references, e, stage);
  } catch (const CudaFailure& f) {
    // An illegal address or launch failure poisons the context (sticky); nothing more can run in
    // this process, which must end (a serving child too).
    e.set_status(v1::CRASH);
    e.set_message(std::string("crash: ") + cudaGetErrorName(f.error()) + " (" +
                  cudaGetErrorString(f.error()) + ") during " + stage);
    const bool in_timing = stage.rfind("timing", 0) == 0;
    set_gate(e, in_timing ? v1::GATE_TIMED : v1::GATE_CORRECT, v1::VERDICT_FAILED, f.what());
    if (!in_timing) set_gate(e, v1::GATE_TIMED, v1::VERDICT_NOT_RUN, "");
    code = kExitCudaFailure;
  } catch (const std::exception& ex) {
    e.set_status(v1::CRASH);
    e.set_message(std::string("crash: ") + ex.what() + " during " + stage);
    code = kExitCudaFailure;
  }
  *status = e.status();
  std::fprintf(stderr, "evaluation child: %s\n", e.message().empty() ? "ok" : e.message().c_str());
  if (!write_result(e, req.result_path)) {
    std::fprintf(stderr, "evaluation child: cannot write result '%s'\n", req.result_path.c_str());
    return kExitBadRequest;
  }
  return code;
}

}  // namespace

int run_eval_child(int argc, char** argv) {
  if (argc < 2 || std::string(argv[argc - 1]) == "__child") {
    std::fprintf(stderr, "evaluation child: usage: evo-worker __child <request.json>\n");
    return kExitBadRequest;
  }
  ReferenceKernels references;
  v1::EvalStatus status = v1::CRASH;
  return answer_request(argv[argc - 1], references, &status);
}

int run_eval_child_server() {
  ReferenceKernels references;
  std::string request_path;
  while (std::getline(std::cin, request_path)) {
    v1::EvalStatus status = v1::CRASH;
    const int code = answer_request(request_path, references, &status);
    const std::string answer = "done " + std::to_string(code) + "\n";
    if (::write(cuda::kServerAnswerFd, answer.data(), answer.size()) != static_cast<ssize_t>(answer.size()))
      return kExitBadRequest;
    // Only a process whose last candidate passed stays: after a CUDA failure its context is
    // poisoned, and a kernel that computed wrong values may have written where it should not.
    if (code != 0 || status != v1::OK) return code;
  }
  return 0;  // the parent closed the requests' pipe
}

}  // namespace evo

#include "model_evaluator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "errors.h"
#include "gate_clock.h"
#include "kernel_compiler.h"
#include "family.h"
#include "log_ids.h"
#include "pre_launch_gates.h"
#include "template_registry.h"

namespace evo {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Resident blocks per SM: the tightest of registers (allocated per warp in units of 256),
// shared memory (plus the runtime's per-block reserve), threads and the block limit.
int blocks_per_sm(const DeviceModel& dev, int registers, int64_t smem_bytes, int threads) {
  const int warps = std::max(1, threads / 32);
  const int regs_per_warp = static_cast<int>(ceil_div(std::max(registers, 1) * 32, 256) * 256);
  const int by_regs = dev.regs_per_sm / (regs_per_warp * warps);
  const int64_t by_smem = dev.smem_per_sm / (smem_bytes + dev.smem_reserved_per_block);
  const int by_threads = dev.max_threads_per_sm / std::max(threads, 1);
  return static_cast<int>(
      std::min<int64_t>({by_regs, by_smem, by_threads, dev.max_blocks_per_sm}));
}

}  // namespace

KernelEstimate estimate_kernel(const DeviceModel& dev, const SearchSpace& space, const Genome& g,
                               const Problem& problem, const v1::ResourceReport& resources) {
  const KernelTemplate* t = find_template(g.template_id());
  if (t == nullptr) throw InputError("no model estimate for unknown template '" + g.template_id() + "'");
  return estimate_kernel(dev, space, g, problem, resources, t->family->model_wave_seconds);
}

KernelEstimate estimate_kernel(const DeviceModel& dev, const SearchSpace& space, const Genome& g,
                               const Problem& problem, const v1::ResourceReport& resources,
                               const std::function<double(const ModelInput&)>& wave_seconds) {
  const auto vars = space.variables(g, problem, dev.smem_per_block_optin, sm_arch_number(dev.arch));
  const LaunchConfig launch = space.launch(g, problem);
  KernelEstimate est;
  est.blocks_per_sm =
      std::max(1, blocks_per_sm(dev, resources.registers(),
                                resources.static_smem_bytes() + launch.smem_bytes,
                                static_cast<int>(launch.threads)));
  const int64_t grid = launch.grid_x * launch.grid_y * launch.grid_z;
  const int64_t slots = int64_t{est.blocks_per_sm} * dev.sm_count;
  est.waves = ceil_div(grid, slots);
  // Blocks that share an SM in the busiest wave.
  const int concurrent = static_cast<int>(std::min<int64_t>(est.blocks_per_sm, ceil_div(grid, dev.sm_count)));
  const double wave_s = wave_seconds(ModelInput{dev, problem, vars, est.waves, concurrent});
  est.us = dev.launch_overhead_us + est.waves * wave_s * 1e6;
  return est;
}

namespace {

class ModelEvaluator : public Evaluator {
 public:
  ModelEvaluator(const DeviceModel& dev, const EvaluatorOptions& options)
      : dev_(dev), compiler_(options.cache_dir, dev.arch, options.compile_threads) {
    info_.set_gpu_name(dev.gpu_name);
    info_.set_arch(dev.arch);
    info_.set_sm_count(dev.sm_count);
    info_.set_sm_clock_mhz(dev.sm_clock_mhz);
    info_.set_mem_clock_mhz(dev.mem_clock_mhz);
    info_.set_nvrtc_version(KernelCompiler::nvrtc_version());
    info_.set_smem_per_block_optin(dev.smem_per_block_optin);
    info_.set_backend("model");
    info_.set_timing("estimated by the model");
    info_.set_device_class(dev.arch + "/model/estimated");
    info_.set_l2_bytes(dev.l2_bytes);
    info_.set_global_mem_bytes(dev.global_mem_bytes);
  }

  const v1::DeviceInfo& device() const override { return info_; }

  void prefetch(const Genome& g, const std::vector<Problem>& shapes) override {
    try {
      const SearchSpace& space = SearchSpace::for_template(g.template_id());
      for (const auto& s : shapes)
        if (!space.violated_constraint(g, s, dev_.smem_per_block_optin, sm_arch_number(dev_.arch)))
          compiler_.compile_candidate_async(g, s);
    } catch (const std::exception& e) {
      spdlog::debug("event=prefetch_skipped {}genome_hash={} reason=\"{}\"", log_ids(), g.hash(), e.what());
    }
  }

  v1::Evaluation evaluate(const Genome& g, const std::vector<Problem>& shapes,
                          bool run_sanitizer) override {
    const GateClock clock;
    v1::Evaluation eval;
    eval.set_estimated(true);
    *eval.mutable_device() = info_;
    const auto kernels = run_pre_launch_gates(compiler_, g, shapes, dev_.smem_per_block_optin, eval);
    if (!kernels) {
      eval.set_wall_ms(clock.total_ms());
      return eval;
    }
    for (v1::Gate gate : {v1::GATE_CORRECT, v1::GATE_TIMED, v1::GATE_SANITIZER})
      add_gate(eval, gate, v1::VERDICT_SKIPPED, "model evaluator");

    const SearchSpace& space = SearchSpace::for_template(g.template_id());
    double log_sum = 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
      const Problem& s = shapes[i];
      const KernelEstimate est = estimate_kernel(dev_, space, g, s, (*kernels)[i].resources);
      auto* r = eval.add_shapes();
      set_result_problem(s, r);
      r->set_median_us(est.us);
      r->set_p10_us(est.us);
      r->set_p90_us(est.us);
      r->set_tflops(s.flops() / (est.us * 1e-6) / 1e12);
      log_sum += std::log(est.us);
      spdlog::debug("event=shape_estimated {}genome_hash={} shape={} us={:.2f} blocks_per_sm={} waves={}",
                    log_ids(), g.hash(), s.text(), est.us, est.blocks_per_sm, est.waves);
    }
    eval.set_fitness_us(std::exp(log_sum / shapes.size()));
    eval.set_status(v1::OK);
    eval.set_wall_ms(clock.total_ms());
    spdlog::info("event=estimated {}genome_hash={} fitness_us={:.2f} genome={}", log_ids(), g.hash(),
                 eval.fitness_us(), g.text());
    return eval;
  }

 private:
  DeviceModel dev_;
  KernelCompiler compiler_;
  v1::DeviceInfo info_;
};

}  // namespace

std::unique_ptr<Evaluator> make_model_evaluator(const EvaluatorOptions& options) {
  const std::string arch = options.arch.empty() ? "sm_90a" : options.arch;
  const DeviceModel* dev = find_device_model(arch);
  if (!dev)
    throw InputError("no device model for arch '" + arch + "' (modeled: " + modeled_archs() + ")");
  return std::make_unique<ModelEvaluator>(*dev, options);
}

}  // namespace evo

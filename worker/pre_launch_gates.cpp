#include "pre_launch_gates.h"

#include <spdlog/spdlog.h>

#include <map>

#include "errors.h"
#include "gate_clock.h"
#include "resource_gate.h"
#include "sass_check.h"
#include "search_space.h"
#include "log_ids.h"
#include "wire_labels.h"

namespace evo {

void add_gate(v1::Evaluation& eval, v1::Gate gate, v1::Verdict verdict, const std::string& detail,
              double elapsed_ms) {
  auto* v = eval.add_gates();
  set_gate_forms(*v, gate, verdict);
  v->set_detail(detail);
  v->set_elapsed_ms(elapsed_ms);
}

void set_gate(v1::Evaluation& eval, v1::Gate gate, v1::Verdict verdict, const std::string& detail,
              std::optional<double> elapsed_ms) {
  for (auto& g : *eval.mutable_gates())
    if (g.kind() == gate) {
      set_gate_forms(g, gate, verdict);
      g.set_detail(detail);
      if (elapsed_ms) g.set_elapsed_ms(*elapsed_ms);
      return;
    }
  add_gate(eval, gate, verdict, detail, elapsed_ms.value_or(0));
}

namespace {

std::optional<std::vector<CompiledKernel>> reject(v1::Evaluation& eval, v1::EvalStatus status,
                                                  v1::Gate gate, const std::string& message,
                                                  const Genome& g, GateClock& clock) {
  eval.set_status(status);
  eval.set_message(message);
  add_gate(eval, gate, v1::VERDICT_FAILED, message, clock.lap_ms());
  spdlog::info("event=gate_rejected {}genome_hash={} gate={} reason=\"{}\"", log_ids(), g.hash(), label(gate),
               message);
  return std::nullopt;
}

}  // namespace

std::optional<std::vector<CompiledKernel>> run_pre_launch_gates(
    KernelCompiler& compiler, const Genome& g, const std::vector<Problem>& shapes,
    int64_t smem_limit, v1::Evaluation& eval) {
  GateClock clock;
  const SearchSpace* space = nullptr;
  try {
    space = &SearchSpace::for_template(g.template_id());
  } catch (const std::exception& e) {
    return reject(eval, v1::INVALID, v1::GATE_VALID, e.what(), g, clock);
  }
  if (shapes.empty()) return reject(eval, v1::INVALID, v1::GATE_VALID, "no problem shape given", g, clock);

  // Gate 1: every shape, before any compile.
  for (const auto& shape : shapes) {
    std::optional<std::string> violated;
    try {
      violated = space->violated_constraint(g, shape, smem_limit, sm_arch_number(compiler.arch()));
    } catch (const std::exception& e) {
      return reject(eval, v1::INVALID, v1::GATE_VALID, e.what(), g, clock);
    }
    if (violated)
      return reject(eval, v1::INVALID, v1::GATE_VALID, "violates " + *violated + " at " + shape.text(), g, clock);
  }
  add_gate(eval, v1::GATE_VALID, v1::VERDICT_PASSED,
           "all constraints hold for " + std::to_string(shapes.size()) + " shape(s)", clock.lap_ms());

  // Gate 2: start every distinct kernel's compile at once, so that they run in parallel.
  std::map<std::string, std::shared_future<CompiledKernel>> pending;
  for (const auto& shape : shapes) {
    const std::string name = space->kernel_name(g, shape);
    if (!pending.count(name)) pending.emplace(name, compiler.compile_candidate_async(g, shape));
  }
  std::vector<CompiledKernel> kernels;
  double compile_ms = 0;
  bool all_hits = true;
  for (const auto& shape : shapes) {
    CompiledKernel k;
    try {
      k = pending.at(space->kernel_name(g, shape)).get();
    } catch (const CompileError& e) {
      eval.mutable_resources()->set_ptxas_log(e.log());
      if (const auto why = register_shortage(e.log(), space->launch(g, shape).threads))
        return reject(eval, v1::RESOURCE_REJECT, v1::GATE_COMPILE, *why, g, clock);
      return reject(eval, v1::COMPILE_ERROR, v1::GATE_COMPILE, e.what(), g, clock);
    } catch (const std::exception& e) {
      return reject(eval, v1::COMPILE_ERROR, v1::GATE_COMPILE, e.what(), g, clock);
    }
    const LaunchConfig launch = space->launch(g, shape);
    k.resources.set_dynamic_smem_bytes(static_cast<int32_t>(launch.smem_bytes));
    k.resources.set_threads_per_block(static_cast<int32_t>(launch.threads));
    if (kernels.empty()) {
      *eval.mutable_resources() = k.resources;
      eval.set_compile_options(k.options);
    }
    compile_ms += k.compile_ms;
    all_hits = all_hits && k.cache_hit;
    if (auto why = resource_violation(k.resources, smem_limit, launch.min_registers)) {
      *eval.mutable_resources() = k.resources;
      eval.set_compile_ms(compile_ms);
      eval.set_cache_hit(all_hits);
      return reject(eval, v1::RESOURCE_REJECT, v1::GATE_COMPILE, *why, g, clock);
    }
    kernels.push_back(std::move(k));
  }
  eval.set_compile_ms(compile_ms);
  eval.set_cache_hit(all_hits);
  const auto& r = eval.resources();
  add_gate(eval, v1::GATE_COMPILE, v1::VERDICT_PASSED,
           std::to_string(r.registers()) + " registers, " + std::to_string(r.stack_frame_bytes()) +
               " bytes stack, " + std::to_string(r.spill_store_bytes()) + " bytes spilled, " +
               std::to_string(r.static_smem_bytes() + r.dynamic_smem_bytes()) + " bytes smem" +
               (all_hits ? " (cached)" : ""),
           clock.lap_ms());  // waited for: a prefetched compile may have started long before

  // Gate 3: the SASS of each distinct kernel, with the instruction its problem needs, if any.
  std::map<std::string, SassVerdict> judged;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const CompiledKernel& k = kernels[i];
    if (judged.count(k.lowered_name)) continue;
    SassVerdict v = k.tensor_cores;  // read on the compile pool (KernelCompiler)
    if (v.verdict == v1::VERDICT_FAILED)
      return reject(eval, v1::RESOURCE_REJECT, v1::GATE_TENSOR_CORES,
                    v.detail + " (" + k.name_expression + ")", g, clock);
    if (v.verdict == v1::VERDICT_PASSED) {
      const std::string missing =
          missing_instruction(v.ops, space->family().tensor_core_instruction(shapes[i]));
      if (!missing.empty())
        return reject(eval, v1::RESOURCE_REJECT, v1::GATE_TENSOR_CORES,
                      missing + " at " + shapes[i].text() + " (" + k.name_expression + ")", g, clock);
    }
    judged.emplace(k.lowered_name, std::move(v));
  }
  const SassVerdict& first = judged.begin()->second;
  add_gate(eval, v1::GATE_TENSOR_CORES, first.verdict, first.detail, clock.lap_ms());
  return kernels;
}

}  // namespace evo

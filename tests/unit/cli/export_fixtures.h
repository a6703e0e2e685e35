#pragma once
// Shared inputs for the exporter tests: the template's default genome from its own space (so the
// tests follow the space as it changes) and a plausible evaluation.
#include <nlohmann/json.hpp>

#include "attention/problem.h"
#include "device_limits.h"
#include "evo/evo.pb.h"
#include "genome.h"
#include "search_space.h"
#include "template_registry.h"
#include "wire_labels.h"

namespace evo::testing {

inline Genome default_genome(const std::string& template_id = "fa_s512_v3") {
  return SearchSpace::for_template(template_id).default_genome();
}

inline Problem shape_1x8x512x64(bool causal = false, DType dtype = DType::kF16) {
  attention::Shape s;
  s.causal = causal;
  s.dtype = dtype;
  return attention::to_problem(s);
}

inline v1::Evaluation measured_evaluation(bool estimated) {
  v1::Evaluation e;
  e.set_status(v1::OK);
  e.set_estimated(estimated);
  e.set_fitness_us(7.25);
  e.set_compile_options("--gpu-architecture=sm_90a -O3 --ptxas-options=-v");
  auto* r = e.mutable_resources();
  r->set_registers(96);
  r->set_dynamic_smem_bytes(40960);
  r->set_threads_per_block(128);
  auto* g = e.add_gates();
  set_gate_forms(*g, v1::GATE_SANITIZER, v1::VERDICT_PASSED);
  g->set_detail("0 errors");
  g->set_elapsed_ms(4120.4);
  e.set_wall_ms(9876);
  auto* s = e.add_shapes();
  s->mutable_shape()->set_batch(1);
  s->mutable_shape()->set_heads(8);
  s->mutable_shape()->set_seq_q(512);
  s->mutable_shape()->set_seq_k(512);
  s->mutable_shape()->set_head_dim(64);
  s->set_median_us(7.25);
  s->set_p10_us(7.1);
  s->set_p90_us(7.6);
  s->set_resident_us(6.15);
  s->set_tflops(74.1);
  s->set_rel_l2_error(3.1e-4);
  auto* d = e.mutable_device();
  d->set_gpu_name("NVIDIA H100 80GB HBM3");
  d->set_arch("sm_90a");
  d->set_nvrtc_version("13.0");
  d->set_timing("graph replays of 20+ back-to-back programmatic launches per event pair");
  d->set_smem_per_block_optin(kDefaultSmemLimit);
  return e;
}

}  // namespace evo::testing

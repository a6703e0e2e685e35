#include "sim_worker.h"

#include <chrono>
#include <functional>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "family.h"
#include "template_registry.h"
#include "wire_labels.h"

namespace evo::load {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

bool terminal(v1::RunState s) { return s == v1::DONE || s == v1::CANCELLED || s == v1::FAILED; }

}  // namespace

SimWorker::SimWorker(int index, RunGroup& group, const SimConfig& config)
    : index_(index), group_(group), config_(config) {
  // One channel per simulated worker, as separate worker processes would have: a distinct channel
  // argument keeps gRPC from sharing one connection among them.
  grpc::ChannelArguments args;
  args.SetInt("evo.load.sim_worker", index);
  stub_ = v1::Coordinator::NewStub(
      grpc::CreateCustomChannel(config.address, grpc::InsecureChannelCredentials(), args));
}

bool SimWorker::register_for(int epoch) {
  v1::RegisterWorkerRequest req;
  req.set_name("sim-" + std::to_string(index_));
  std::string cls;
  {
    std::lock_guard<std::mutex> lock(group_.mutex);
    cls = group_.device_class();
  }
  auto* d = req.mutable_device();
  d->set_gpu_name("simulated");
  d->set_arch("sm_90a");
  d->set_sm_count(132);
  d->set_backend("model");
  d->set_cuda_version("12.8");
  d->set_nvrtc_version("12.8");
  d->set_smem_per_block_optin(232448);
  d->set_device_class(cls);
  for (auto& f : template_fingerprints()) d->add_template_fingerprints(std::move(f));  // as evod's
  v1::RegisterWorkerResponse resp;
  grpc::ClientContext ctx;
  if (!stub_->RegisterWorker(&ctx, req, &resp).ok()) {
    ++stats_.errors;
    return false;
  }
  worker_id_ = resp.worker_id();
  credential_ = resp.credential();
  registered_epoch_ = epoch;
  device_class_ = cls;
  return true;
}

void SimWorker::advance_group(int seen_epoch) {
  std::lock_guard<std::mutex> lock(group_.mutex);
  if (group_.epoch != seen_epoch) return;  // another member moved the group on already
  if (group_.epoch >= 0) {
    v1::RunRef ref;
    ref.set_run_id(group_.run_id);
    v1::RunStatus st;
    grpc::ClientContext ctx;
    if (!stub_->GetRun(&ctx, ref, &st).ok()) {
      ++stats_.errors;
      return;
    }
    if (!terminal(st.run().state())) return;  // the generation is still being finished by others
  }
  ++group_.epoch;
  v1::SubmitRunRequest req;
  req.set_seed("fa_s512_v3");
  req.set_strategy("random");
  req.set_population(config_.population);
  req.set_generations(config_.generations);
  req.set_top_k(3);
  req.set_rng_seed(1 + static_cast<uint64_t>(group_.index) * 100000 + static_cast<uint64_t>(group_.epoch));
  req.set_device_class(group_.device_class());
  v1::Run run;
  grpc::ClientContext ctx;
  if (!stub_->SubmitRun(&ctx, req, &run).ok()) {
    ++stats_.errors;
    --group_.epoch;
    return;
  }
  group_.run_id = run.run_id();
  group_.run_reports = 0;
  ++stats_.runs_submitted;
}

v1::Evaluation SimWorker::invent_evaluation(const v1::Lease& lease) const {
  // Deterministic per genome, so a re-leased candidate would get the same answer.
  size_t h = std::hash<std::string>()(lease.genome());
  v1::Evaluation e;
  e.set_estimated(true);
  e.set_compile_options("--gpu-architecture=sm_90a -O3 --ptxas-options=-v");
  e.set_compile_ms(400 + static_cast<double>(h % 900));
  auto* d = e.mutable_device();
  d->set_gpu_name("simulated");
  d->set_arch("sm_90a");
  d->set_backend("model");
  d->set_cuda_version("12.8");
  d->set_nvrtc_version("12.8");
  d->set_device_class(device_class_);
  auto* r = e.mutable_resources();
  r->set_registers(static_cast<int>(32 + h % 96));
  r->set_dynamic_smem_bytes(static_cast<int>(8192 * (1 + h % 12)));
  r->set_threads_per_block(static_cast<int>(32 * (1 + h % 8)));
  r->set_ptxas_log("ptxas info    : Used 96 registers, 0 bytes stack frame, 0 bytes spill stores");
  if (h % 13 == 0) {
    e.set_status(v1::RESOURCE_REJECT);
    e.set_message("shared memory 245760 bytes over the device limit 232448");
    return e;
  }
  e.set_status(v1::OK);
  double us = 15.0 + static_cast<double>(h % 10000) / 100.0;
  e.set_fitness_us(us);
  for (v1::Gate gate : {v1::GATE_VALID, v1::GATE_COMPILE, v1::GATE_TENSOR_CORES, v1::GATE_CORRECT, v1::GATE_TIMED})
    set_gate_forms(*e.add_gates(), gate, v1::VERDICT_PASSED);
  for (const Problem& problem : problems_of(lease.problems(), lease.shapes())) {
    auto* s = e.add_shapes();
    set_result_problem(problem, s);
    s->set_median_us(us);
    s->set_p10_us(us * 0.98);
    s->set_p90_us(us * 1.03);
    s->set_tflops(problem.flops() / (us * 1e6));
    s->set_repeats(100);
  }
  return e;
}

void SimWorker::run(const std::atomic<bool>& stop) {
  int empty_streak = 0;
  while (!stop) {
    int epoch;
    {
      std::lock_guard<std::mutex> lock(group_.mutex);
      epoch = group_.epoch;
    }
    if (epoch < 0) {
      advance_group(epoch);
      continue;
    }
    if (epoch != registered_epoch_ && !register_for(epoch)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    v1::LeaseRequest lreq;
    lreq.set_worker_id(worker_id_);
    lreq.set_credential(credential_);
    lreq.set_max_candidates(1);
    v1::LeaseResponse leases;
    auto t0 = Clock::now();
    grpc::Status s;
    {
      grpc::ClientContext ctx;
      s = stub_->LeaseCandidates(&ctx, lreq, &leases);
    }
    stats_.lease_ms.push_back(ms_since(t0));
    if (!s.ok()) {
      ++stats_.errors;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (leases.leases().empty()) {
      ++stats_.empty_leases;
      if (++empty_streak >= 2) advance_group(epoch);
      std::this_thread::sleep_for(std::chrono::milliseconds(std::max(10, leases.retry_after_ms())));
      continue;
    }
    empty_streak = 0;
    for (const auto& lease : leases.leases()) {
      v1::ReportRequest rreq;
      rreq.set_worker_id(worker_id_);
      rreq.set_credential(credential_);
      rreq.set_lease_id(lease.lease_id());
      *rreq.mutable_evaluation() = invent_evaluation(lease);
      v1::ReportResponse resp;
      const int64_t before = group_.run_reports.load();
      auto r0 = Clock::now();
      grpc::ClientContext ctx;
      grpc::Status rs = stub_->ReportResult(&ctx, rreq, &resp);
      stats_.report_ms.push_back(ms_since(r0));
      stats_.report_at.emplace_back(before, stats_.report_ms.back());
      if (rs.ok()) {
        ++stats_.reports;
        ++group_.run_reports;
      } else {
        ++stats_.errors;
      }
    }
  }
}

}  // namespace evo::load

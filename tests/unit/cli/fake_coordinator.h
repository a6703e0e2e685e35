#pragma once
// An in-process Coordinator that answers evoctl's calls from fixed data, on a loopback port, so
// that the CLI tests see real gRPC status codes and streams without evod.
#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "evo/evo.grpc.pb.h"
#include "genome_proto.h"

namespace evo::testing {

class FakeCoordinator final : public v1::Coordinator::Service {
 public:
  bool estimated = false;
  // What Leaderboard names as the seed genome; empty, as an evod from before the field did.
  std::string seed_genome = "fa_s512_v3:BLOCK_M=32,BLOCK_N=64,WARPS=4,STAGES=2,SCHEDULE=cp_async,SWIZZLE=1";
  v1::SubmitRunRequest last_submit;
  std::vector<v1::SubmitRunRequest> submits;  // every SubmitRun, in order; the nth makes run "r<n>"
  size_t refuse_submit = 0;                   // > 0: the submit of that number is refused
  v1::ExportRequest last_export;
  v1::ListCandidatesRequest last_candidates;
  bool watch_ends_early = false;  // the stream closes before the run is final
  bool watch_loses_worker = false;  // the run's only worker goes away mid-watch, and comes back
  bool no_elites = false;
  bool typed_genomes = false;  // Leaderboard names genomes by message alone, with no text beside
  bool export_predates_buckets = false;  // ExportBest answers as an evod before buckets and arch
  bool cancel_finds_it_done = false;  // CancelRun answers with a run that had already ended         // Leaderboard answers with the run and no elite (nothing done yet)
  std::string required_token;     // non-empty: ListRuns wants "authorization: Bearer <token>"
  // GetRun answers for these runs too, each with its device class (export --python groups by it).
  std::map<std::string, std::string> device_classes;
  std::vector<v1::ExportRequest> exports;  // every ExportBest request, in order

  grpc::Status SubmitRun(grpc::ServerContext*, const v1::SubmitRunRequest* req, v1::Run* run) override {
    if (req->seed() != "fa_s512_v3") return {grpc::StatusCode::INVALID_ARGUMENT, "unknown seed '" + req->seed() + "'"};
    last_submit = *req;
    submits.push_back(*req);
    if (submits.size() == refuse_submit) return {grpc::StatusCode::INVALID_ARGUMENT, "shape refused"};
    *run = make_run(v1::QUEUED);
    run->set_run_id("r" + std::to_string(submits.size()));
    return grpc::Status::OK;
  }
  grpc::Status GetRun(grpc::ServerContext*, const v1::RunRef* ref, v1::RunStatus* s) override {
    if (const auto it = device_classes.find(ref->run_id()); it != device_classes.end()) {
      *s = make_status(2, 48, v1::DONE);
      s->mutable_run()->set_run_id(it->first);
      s->mutable_run()->set_device_class(it->second);
      return grpc::Status::OK;
    }
    if (ref->run_id() != "r1") return {grpc::StatusCode::NOT_FOUND, "unknown run '" + ref->run_id() + "'"};
    *s = make_status(2, 40, v1::RUNNING);
    return grpc::Status::OK;
  }
  grpc::Status WatchRun(grpc::ServerContext*, const v1::RunRef* ref,
                        grpc::ServerWriter<v1::RunStatus>* w) override {
    if (ref->run_id() != "r1") return {grpc::StatusCode::NOT_FOUND, "unknown run '" + ref->run_id() + "'"};
    w->Write(make_status(0, 0, v1::RUNNING));
    w->Write(make_status(0, 0, v1::RUNNING));  // same progress: no new plain line
    if (watch_loses_worker) {
      for (int live : {0, 0, 1}) {
        auto st = make_status(0, 0, v1::RUNNING);
        st.set_live_workers(live);
        w->Write(st);
      }
    }
    w->Write(make_status(1, 16, v1::RUNNING));
    if (!watch_ends_early) w->Write(make_status(2, 48, v1::DONE));
    return grpc::Status::OK;
  }
  grpc::Status ListRuns(grpc::ServerContext* ctx, const v1::ListRunsRequest*, v1::ListRunsResponse* r) override {
    if (!required_token.empty()) {
      const auto& md = ctx->client_metadata();
      const auto it = md.find("authorization");
      if (it == md.end() || std::string(it->second.data(), it->second.size()) != "Bearer " + required_token)
        return {grpc::StatusCode::UNAUTHENTICATED, "missing or wrong token"};
    }
    *r->add_runs() = make_status(2, 48, v1::DONE);
    return grpc::Status::OK;
  }
  grpc::Status ListCandidates(grpc::ServerContext*, const v1::ListCandidatesRequest* req,
                              v1::ListCandidatesResponse* r) override {
    if (req->run_id() != "r1") return {grpc::StatusCode::NOT_FOUND, "unknown run '" + req->run_id() + "'"};
    last_candidates = *req;
    *r->mutable_run() = make_run(v1::RUNNING);
    r->set_seed_genome(seed_genome);
    r->set_matched(req->failed_only() ? 1 : 3);
    // The three as evods of three releases send them: enums and labels, enums only (a release
    // after the transition), labels only (an evod before the enums).
    if (!req->failed_only()) {
      auto* ok = r->add_candidates();
      ok->set_candidate_id("r1-c0000");
      ok->set_genome(seed_genome);
      ok->set_phase(v1::CANDIDATE_STATE_DONE);
      ok->set_state("done");
      ok->set_fitness_us(10.0);
      ok->set_elite_eligible(true);
      ok->set_done_unix_ms(1'700'000'000'000);
      ok->mutable_evaluation()->set_status(v1::OK);
    }
    auto* spill = r->add_candidates();
    spill->set_candidate_id("r1-c0001");
    spill->set_genome("fa_s512_v3:BLOCK_M=128,BLOCK_N=64,WARPS=4,STAGES=2,SCHEDULE=cp_async,SWIZZLE=1");
    spill->set_phase(v1::CANDIDATE_STATE_DONE);
    spill->set_failed(true);
    spill->set_done_unix_ms(1'700'000'004'000);
    auto* e = spill->mutable_evaluation();
    e->set_status(v1::RESOURCE_REJECT);
    e->set_message("register spills 16 bytes stored / 20 bytes loaded > limit 0 bytes, and a long tail to be cut");
    auto* g = e->add_gates();
    g->set_kind(v1::GATE_COMPILE);
    g->set_outcome(v1::VERDICT_FAILED);
    if (!req->failed_only()) {
      auto* queued = r->add_candidates();
      queued->set_candidate_id("r1-c0002");
      queued->set_genome(seed_genome);
      queued->set_state("queued");
    }
    return grpc::Status::OK;
  }
  grpc::Status ListWorkers(grpc::ServerContext*, const v1::ListWorkersRequest* req,
                           v1::ListWorkersResponse* r) override {
    r->set_now_unix_ms(1'000'000);
    auto* live = r->add_workers();
    live->set_worker_id("w-1");
    live->set_name("gpu-host:gpu0");
    live->set_device_class("sm_90a/NVIDIA H200");
    live->set_backend("cuda");
    live->set_last_seen_unix_ms(1'000'000 - 4'000);
    live->set_live(true);
    live->set_active_leases(2);
    live->set_enrolment("gpu-host");
    if (req->include_gone()) {
      auto* gone = r->add_workers();
      gone->set_worker_id("w-0");
      gone->set_name("gpu-host:gpu0");
      gone->set_device_class("sm_90a/NVIDIA H200");
      gone->set_backend("cuda");
      gone->set_last_seen_unix_ms(1'000'000 - 3 * 3600 * 1000);
    }
    return grpc::Status::OK;
  }
  grpc::Status Leaderboard(grpc::ServerContext*, const v1::LeaderboardRequest* req,
                           v1::LeaderboardResponse* r) override {
    if (!req->run_id().empty() && req->run_id() != "r1")
      return {grpc::StatusCode::NOT_FOUND, "unknown run '" + req->run_id() + "'"};
    *r->mutable_run() = make_run(v1::DONE);
    r->set_seed_us(10.0);
    r->set_seed_genome(seed_genome);
    if (typed_genomes) {
      *r->mutable_typed_seed_genome() = genome_proto_of_text(seed_genome);
      r->clear_seed_genome();
    }
    for (int i = 1; i <= (no_elites ? 0 : 2); ++i) {
      auto* e = r->add_elites();
      e->set_rank(i);
      e->set_genome("fa_s512_v3:BLOCK_M=" + std::to_string(16 * i) + ",BLOCK_N=64,WARPS=4,STAGES=2,SCHEDULE=cp_async,SWIZZLE=1");
      e->set_fitness_us(5.0 * i);
      e->set_spread_pct(1.5);
      e->set_tflops(100.0 / i);
      e->set_speedup_vs_seed(10.0 / (5.0 * i));
      e->set_estimated(estimated);
      e->set_candidate_id("r1-c" + std::to_string(i));
      e->set_generation(i);
      if (i == 2) e->set_parents("crossover(r1-c7, r1-c9)");
      if (typed_genomes) {
        *e->mutable_typed_genome() = genome_proto_of_text(e->genome());
        e->clear_genome();
      }
      e->mutable_evaluation()->mutable_resources()->set_registers(90 + i);
      e->mutable_evaluation()->mutable_resources()->set_dynamic_smem_bytes(40960);
      auto* g = e->mutable_evaluation()->add_gates();
      if (i == 1) {  // enums only, as a release after the transition sends them; labels only, as one before
        g->set_kind(v1::GATE_SANITIZER);
        g->set_outcome(v1::VERDICT_PASSED);
      } else {
        g->set_gate("sanitizer");
        g->set_verdict("passed");
      }
      if (i == 1)  // the first elite was timed with the resident figure, the second before it
        for (double us : {4.0, 9.0}) e->mutable_evaluation()->add_shapes()->set_resident_us(us);
    }
    return grpc::Status::OK;
  }
  grpc::Status CancelRun(grpc::ServerContext*, const v1::RunRef* ref, v1::Run* run) override {
    if (ref->run_id() != "r1") return {grpc::StatusCode::NOT_FOUND, "unknown run '" + ref->run_id() + "'"};
    *run = make_run(v1::CANCELLED);
    if (ref->run_id() == "r1" && cancel_finds_it_done) *run = make_run(v1::DONE);
    return grpc::Status::OK;
  }
  grpc::Status ExportBest(grpc::ServerContext*, const v1::ExportRequest* req, v1::ExportResponse* r) override {
    last_export = *req;
    exports.push_back(*req);
    if (req->run_ids_size() > 0) {  // a dispatch table: runs r1 and r2, one bucket each
      for (const auto& id : req->run_ids())
        if (id != "r1" && id != "r2") return {grpc::StatusCode::NOT_FOUND, "unknown run '" + id + "'"};
      r->set_source("// dispatch table source\n");
      // evod names the file the request names in the report's build line (table.cu: libtable.so).
      const std::string name = req->source_name().empty() ? "best.cu" : req->source_name();
      r->set_report("# table report\nBuild: `nvcc -O3 -shared -Xcompiler -fPIC -arch=sm_100a -o lib" +
                    name.substr(0, name.size() - 3) + ".so " + name + "`\n");
      r->set_arch("sm_100a");  // the measuring device's, not the sm_90a evoctl once assumed
      r->set_genome("fa_s512_v3:BLOCK_M=16;fa_s512_v3:BLOCK_M=64");
      auto* a = r->add_buckets();
      a->set_run_id("r1");
      a->set_genome("fa_s512_v3:BLOCK_M=16");
      a->add_shapes("1x8x512x64");
      a->add_shapes("1x8x512x64:causal");
      auto* b = r->add_buckets();
      b->set_run_id("r2");
      b->set_genome("fa_s512_v3:BLOCK_M=64");
      b->set_estimated(true);
      b->add_shapes("4x16x2048x64");
      b->add_shapes("1x8x512x1024x64");
      return grpc::Status::OK;
    }
    if (req->run_id() != "r1") return {grpc::StatusCode::NOT_FOUND, "unknown run '" + req->run_id() + "'"};
    r->set_source("// kernel source\n");
    r->set_report(estimated ? "# report\n" : "# report\nA winner the model evaluator chose reads ESTIMATED.\n");
    r->set_genome("fa_s512_v3:BLOCK_M=32");
    if (export_predates_buckets) return grpc::Status::OK;
    r->set_arch("sm_89");
    auto* b = r->add_buckets();
    b->set_run_id("r1");
    b->set_genome("fa_s512_v3:BLOCK_M=32");
    b->add_shapes("1x8x512x64");
    b->set_estimated(estimated);
    return grpc::Status::OK;
  }

  static v1::Run make_run(v1::RunState state) {
    v1::Run run;
    run.set_run_id("r1");
    run.set_seed("fa_s512_v3");
    run.set_generations(3);
    run.set_population(16);
    run.set_strategy("evolve");
    run.set_state(state);
    auto* s = run.add_shapes();
    s->set_batch(1);
    s->set_heads(8);
    s->set_seq_q(512);
    s->set_seq_k(512);
    s->set_head_dim(64);
    return run;
  }
  v1::RunStatus make_status(int generation, int done, v1::RunState state) const {
    v1::RunStatus s;
    *s.mutable_run() = make_run(state);
    s.set_generation(generation);
    s.set_evaluations_done(done);
    s.set_evaluations_total(48);
    s.set_best_us(done > 0 ? 5.0 : 0.0);
    s.set_best_genome(done > 0 ? "fa_s512_v3:BLOCK_M=16" : "");
    s.set_elapsed_ms(1000 * done);
    s.set_eta_ms(1000 * (48 - done));
    s.set_estimated(estimated);
    return s;
  }
};

// Runs a FakeCoordinator on 127.0.0.1:<free port> for the lifetime of the object.
class FakeCoordinatorServer {
 public:
  FakeCoordinatorServer() {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(&service);
    server_ = b.BuildAndStart();
  }
  ~FakeCoordinatorServer() { server_->Shutdown(); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  FakeCoordinator service;

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace evo::testing

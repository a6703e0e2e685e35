#include "format.h"

#include <gtest/gtest.h>

namespace evo::cli {
namespace {

TEST(Format, Durations) {
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(7'900), "0:07");
  EXPECT_EQ(format_duration(750'000), "12:30");
  EXPECT_EQ(format_duration(3'723'000), "1:02:03");
  EXPECT_EQ(format_duration(-1), "--:--");
}

TEST(Format, ProgressBarFillsWithEvaluations) {
  v1::RunStatus s;
  s.mutable_run()->set_generations(4);
  s.mutable_run()->set_state(v1::RUNNING);
  s.set_generation(1);
  s.set_evaluations_done(12);
  s.set_evaluations_total(48);
  const std::string line = progress_line(s, true);
  EXPECT_EQ(line.substr(0, 26), "[######..................]");
  EXPECT_NE(line.find("gen 2/4  evals 12/48  best -"), std::string::npos) << line;
  EXPECT_NE(line.find("ETA --:--"), std::string::npos) << line;  // no estimate yet
  s.mutable_run()->set_target_us(5.126);
  s.set_best_us(5.5);
  EXPECT_NE(progress_line(s, true).find("  best 5.50 µs (target 5.13)  elapsed"), std::string::npos)
      << progress_line(s, true);
  s.set_generation(3);  // the last generation's index
  s.mutable_run()->set_state(v1::DONE);
  EXPECT_NE(progress_line(s, false).find("gen 4/4"), std::string::npos);
  // A run that ends early shows where it stopped, not its planned total.
  s.set_generation(0);
  s.mutable_run()->set_state(v1::CANCELLED);
  EXPECT_NE(progress_line(s, false).find("gen 1/4"), std::string::npos) << progress_line(s, false);
}

TEST(Format, StatusSummaryListsTheStartGenomes) {
  v1::RunStatus s;
  s.mutable_run()->set_run_id("r1");
  s.mutable_run()->set_generations(2);
  EXPECT_EQ(status_summary(s).find("  start "), std::string::npos);
  s.mutable_run()->add_start_genomes("fa_s512_v3:BLOCK_M=64,BLOCK_N=128");
  s.mutable_run()->add_start_genomes("fa_s512_v3:BLOCK_M=128,WARPS=8");
  const std::string out = status_summary(s);
  EXPECT_NE(out.find("\n  start fa_s512_v3:BLOCK_M=64,BLOCK_N=128\n  start fa_s512_v3:BLOCK_M=128,WARPS=8\n"),
            std::string::npos)
      << out;
}

TEST(Format, StatusSummaryNamesTheBudgetsAndWhichEndedTheRun) {
  v1::RunStatus s;
  s.mutable_run()->set_run_id("r1");
  EXPECT_EQ(status_summary(s).find("budgets"), std::string::npos) << "no budgets, no line";
  s.mutable_run()->set_budget_ms(5'400'000);
  s.mutable_run()->set_max_evals(200);
  s.mutable_run()->set_patience(3);
  s.mutable_run()->set_state(v1::DONE);
  s.mutable_run()->set_stop_reason(v1::STOP_REASON_BUDGET_SPENT);
  s.mutable_run()->set_message("budget of 1h30m spent");
  const std::string out = status_summary(s);
  EXPECT_EQ(out.rfind("run r1: DONE (budget of 1h30m spent)\n", 0), 0u) << out;
  EXPECT_NE(out.find("\n  budgets: 1h30m of wall time, 200 evaluations, patience 3\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("throughput"), std::string::npos) << "no figures from an evod that sends none";
  s.mutable_run()->set_target_us(5.2);
  EXPECT_NE(status_summary(s).find("\n  budgets: 1h30m of wall time, 200 evaluations, patience 3, target 5.20 µs\n"),
            std::string::npos)
      << status_summary(s);
  s.set_evaluations_per_minute(11.04);
  s.set_gpu_share(0.627);
  EXPECT_NE(status_summary(s).find("\n  throughput: 11.0 evaluations a minute, the GPU measuring 63% of the wall "
                                   "time (correctness, sanitizer, timing)\n"),
            std::string::npos)
      << status_summary(s);
}

TEST(Format, StatusSummarySaysWhatAQueuedRunWaitsFor) {
  v1::RunStatus s;
  s.mutable_run()->set_run_id("r1");
  s.mutable_run()->set_state(v1::RUNNING);
  EXPECT_EQ(status_summary(s).find("waiting for a worker"), std::string::npos);
  s.mutable_run()->set_state(v1::QUEUED);
  EXPECT_NE(status_summary(s).find("\n  waiting for a worker (of any class"), std::string::npos) << status_summary(s);
  s.mutable_run()->set_device_class("sm_80/cuda");
  EXPECT_NE(status_summary(s).find("\n  waiting for a worker of device class sm_80/cuda (no other class takes it)\n"),
            std::string::npos)
      << status_summary(s);
}

TEST(Format, StatusSummarySaysWhenNoWorkerCanServeTheRun) {
  v1::RunStatus s;
  s.mutable_run()->set_run_id("r1");
  s.mutable_run()->set_state(v1::QUEUED);
  s.set_live_workers(0);
  EXPECT_NE(status_summary(s).find("\n  waiting for a worker (of any class: the first to lease fixes the run's); "
                                   "evod has heard from none"),
            std::string::npos)
      << status_summary(s);
  EXPECT_NE(progress_line(s, false).find("  NO WORKER"), std::string::npos) << progress_line(s, false);
  s.set_live_workers(2);
  EXPECT_NE(status_summary(s).find("; 2 live workers could take it, none has yet\n"), std::string::npos)
      << status_summary(s);
  EXPECT_EQ(progress_line(s, false).find("NO WORKER"), std::string::npos);
  // A running run whose workers are gone is stalled, not done.
  s.mutable_run()->set_state(v1::RUNNING);
  s.mutable_run()->set_device_class("sm_90a/cuda");
  EXPECT_EQ(status_summary(s).find("waiting"), std::string::npos) << status_summary(s);
  s.set_live_workers(0);
  EXPECT_NE(status_summary(s).find("\n  stalled: it needs a worker of device class sm_90a/cuda"), std::string::npos)
      << status_summary(s);
  EXPECT_TRUE(waits_without_worker(s));
  // An ended run waits for nothing, and an evod that does not count its workers says nothing.
  s.mutable_run()->set_state(v1::DONE);
  EXPECT_FALSE(waits_without_worker(s));
  EXPECT_EQ(status_summary(s).find("stalled"), std::string::npos);
  s.mutable_run()->set_state(v1::RUNNING);
  s.clear_live_workers();
  EXPECT_FALSE(waits_without_worker(s));
  EXPECT_EQ(waiting_text(s), "");
}

TEST(Format, StatusSummarySaysWhatTheFitnessMeasures) {
  v1::RunStatus s;
  s.mutable_run()->set_run_id("r1");
  EXPECT_NE(status_summary(s).find("\n  fitness: per call with inputs cycled past L2\n"), std::string::npos)
      << "a run from before the choice ranks by rotated inputs";
  s.mutable_run()->set_fitness_inputs("resident");  // by label, as an evod before the enums sends it
  EXPECT_NE(status_summary(s).find("\n  fitness: per call on one L2-resident input set\n"), std::string::npos);
  s.mutable_run()->clear_fitness_inputs();
  s.mutable_run()->set_fitness_from(v1::FITNESS_INPUTS_RESIDENT);  // by enum alone
  EXPECT_NE(status_summary(s).find("\n  fitness: per call on one L2-resident input set\n"), std::string::npos);
  s.mutable_run()->set_fitness_inputs("rotated");  // the enum comes first
  EXPECT_NE(status_summary(s).find("\n  fitness: per call on one L2-resident input set\n"), std::string::npos);
}

TEST(Format, RunsTableMarksARunThatNoWorkerCanServe) {
  v1::ListRunsResponse r;
  auto* waiting = r.add_runs();
  waiting->mutable_run()->set_run_id("r1");
  waiting->mutable_run()->set_state(v1::QUEUED);
  waiting->set_live_workers(0);
  auto* served = r.add_runs();
  served->mutable_run()->set_run_id("r2");
  served->mutable_run()->set_state(v1::RUNNING);
  served->set_live_workers(1);
  const std::string table = runs_table(r);
  EXPECT_NE(table.find("QUEUED (no worker)"), std::string::npos) << table;
  EXPECT_EQ(table.find("RUNNING (no worker)"), std::string::npos) << table;
}

TEST(Format, CandidatesTableSaysWhenItShowsOnlyTheLatest) {
  v1::ListCandidatesResponse r;
  r.mutable_run()->set_run_id("r1");
  r.set_matched(0);
  EXPECT_EQ(candidates_table(r).find("candidate "), std::string::npos) << "no table without candidates";
  r.set_matched(120);
  auto* c = r.add_candidates();
  c->set_candidate_id("r1-c0119");
  c->set_state("done");
  c->mutable_evaluation()->set_status(v1::INCORRECT);
  c->mutable_evaluation()->set_message("rel L2 error 0.31 > 0.002 at 1x8x512x64\nand a second line");
  c->mutable_evaluation()->set_estimated(false);
  const std::string table = candidates_table(r);
  EXPECT_NE(table.find("1 of 120 candidates (the latest; --limit shows more)\n"), std::string::npos) << table;
  EXPECT_NE(table.find("INCORRECT  -   -     rel L2 error 0.31 > 0.002 at 1x8x512x64...  "), std::string::npos)
      << "the first line only, marked as cut:\n"
      << table;
  EXPECT_EQ(table.find("ESTIMATED"), std::string::npos);
  c->mutable_evaluation()->set_estimated(true);
  EXPECT_NE(candidates_table(r).find("!!! ESTIMATED"), std::string::npos);
}

TEST(Format, WorkersTableSaysWhenThereIsNone) {
  v1::ListWorkersResponse r;
  EXPECT_EQ(workers_table(r, false), "no live worker (evoctl workers --all lists the gone ones too)\n");
  EXPECT_EQ(workers_table(r, true), "no worker has registered with this evod\n");
  r.set_now_unix_ms(10 * 86400 * 1000LL);
  auto* w = r.add_workers();
  w->set_worker_id("w-9");
  w->set_last_seen_unix_ms(86400 * 1000LL);
  EXPECT_NE(workers_table(r, true).find("gone   9 d ago"), std::string::npos) << workers_table(r, true);
  w->set_last_seen_unix_ms(r.now_unix_ms() - 30 * 60 * 1000);
  EXPECT_NE(workers_table(r, true).find("gone   30 min ago"), std::string::npos) << workers_table(r, true);
  EXPECT_EQ(workers_table(r, true).find("quarantined"), std::string::npos);
  // A quarantined worker says so in its row, and why below the table.
  w->set_agreements(1);
  w->set_disagreements(3);
  w->set_quarantined("3 of its results disagreed with its peers' (1 agreed)");
  const std::string table = workers_table(r, true);
  EXPECT_NE(table.find("QUARANTINED, gone"), std::string::npos) << table;
  EXPECT_NE(table.find("1/3"), std::string::npos) << table;
  EXPECT_NE(table.find("w-9 is quarantined (no leases, reports refused): 3 of its results disagreed"),
            std::string::npos)
      << table;
}

TEST(Format, GrpcCodeNames) {
  EXPECT_EQ(grpc_code_name(3), "INVALID_ARGUMENT");
  EXPECT_EQ(grpc_code_name(9), "FAILED_PRECONDITION");
  EXPECT_EQ(grpc_code_name(16), "UNAUTHENTICATED");
  EXPECT_EQ(grpc_code_name(99), "CODE_99");
}

}  // namespace
}  // namespace evo::cli

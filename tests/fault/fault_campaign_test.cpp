// The SIGKILL campaign: 100 kills of evo-worker and 20 of evod at seeded random moments, spread over
// four rounds (each a fresh database with several runs, four model-backend workers and a short
// lease TTL), then an audit of the SQLite file itself. A round's runs must finish; if one does
// not, evod is restarted once on the same file (a run must at least be resumable).
//
// The whole campaign takes minutes (each evod restart gives leases the workers' reconnect grace),
// so it is labelled slow; the test command runs one round of it with two evod kills.
// EVO_FAULT_SEED overrides the campaign's seed (the default is fixed, so CI is repeatable).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "campaign_audit.h"
#include "process_harness.h"

namespace evo::fault {
namespace {

using it::Cluster;
using it::Process;

constexpr int kRounds = 4;
constexpr int kWorkerKillsPerRound = 25;  // 100 in all
constexpr int kEvodKillsPerRound = 5;     // 20 in all
constexpr int kWorkers = 4;
constexpr int kLeaseTtlMs = 1500;
// Run k of every round has the same RNG seed: a round's genomes are mostly the previous round's,
// so NVRTC compiles each variant once (EVO_CACHE_DIR); within a round the seeds differ, so evod's
// result cache does not answer for the workers and the kills land on leased work.
constexpr uint64_t kFirstRunSeed = 101;

uint64_t campaign_seed() {
  const char* env = std::getenv("EVO_FAULT_SEED");
  return env ? std::strtoull(env, nullptr, 10) : 20261126;
}

struct Kills {
  int workers = 0;
  int evod = 0;
};

int64_t count(const std::string& db, const std::string& sql) {
  SqliteConnection c(db);
  c.exec("PRAGMA busy_timeout = 5000");
  auto s = c.prepare(sql);
  return s.step() ? s.column_int(0) : 0;
}

const std::string kActiveRuns = "SELECT COUNT(*) FROM runs WHERE state IN (" + std::to_string(v1::QUEUED) + ", " +
                                std::to_string(v1::RUNNING) + ")";

// The size of each run a round submits.
struct RunSize {
  int generations, population;
};
constexpr RunSize kCampaignRuns{3, 8};
// The test command's round: smaller runs (their NVRTC compiles are most of its time), the same kills.
constexpr RunSize kSampleRuns{2, 6};

class Round {
 public:
  Round(int index, std::mt19937_64& rng, RunSize runs) : index_(index), rng_(rng), runs_(runs) {}

  Kills run(int worker_kills, int evod_kills) {
    cluster_.start_evod(kLeaseTtlMs);
    for (int i = 0; i < kWorkers; ++i) start_worker();
    submit_next();
    submit_next();
    Kills done;
    while (done.workers < worker_kills || done.evod < evod_kills) {
      sleep_ms(uniform(100, 900));
      // Keep work in flight: a kill with nothing leased proves little.
      if (count(cluster_.db(), kActiveRuns) == 0) submit_next();
      int left_w = worker_kills - done.workers, left_e = evod_kills - done.evod;
      bool kill_evod = uniform(0, left_w + left_e - 1) < left_e;
      if (kill_evod) {
        cluster_.evod().kill(SIGKILL);
        cluster_.evod().wait();
        ++done.evod;
        sleep_ms(uniform(0, 1200));  // sometimes long enough for leases to lapse meanwhile
        cluster_.start_evod(kLeaseTtlMs);
      } else {
        size_t victim = pick_victim();
        live_[victim].process->kill(SIGKILL);
        live_[victim].process->wait();
        live_.erase(live_.begin() + static_cast<long>(victim));
        ++done.workers;
        start_worker();
      }
    }
    return done;
  }

  // Waits for every run to finish; restarts evod once on the same file if they stall.
  bool finish(int timeout_s) {
    auto all_done = [&] {
      return count(cluster_.db(), "SELECT COUNT(*) FROM runs WHERE state != " + std::to_string(v1::DONE)) == 0;
    };
    if (it::eventually(timeout_s, all_done)) return true;
    std::fprintf(stderr, "fault-campaign round=%d: runs stalled; restarting evod to resume\n", index_);
    cluster_.evod().kill(SIGKILL);
    cluster_.evod().wait();
    cluster_.start_evod(kLeaseTtlMs);
    return it::eventually(timeout_s, all_done);
  }

  void stop() {
    for (auto& w : live_) {
      w.process->kill(SIGTERM);
      w.process->wait();
    }
    cluster_.evod().kill(SIGTERM);
    cluster_.evod().wait();
  }

  const std::string& db() const { return cluster_.db(); }
  std::string evod_log() { return cluster_.evod().log(); }

 private:
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  static void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

  void start_worker() {
    std::string name = "r" + std::to_string(index_) + "-w" + std::to_string(next_worker_++);
    live_.push_back({name, &cluster_.start_worker(name)});
  }

  // A random worker among those holding a lease right now (a kill of an idle worker proves
  // little), or any worker when none holds one.
  size_t pick_victim() {
    std::vector<size_t> holders;
    SqliteConnection db(cluster_.db());
    db.exec("PRAGMA busy_timeout = 5000");
    for (size_t i = 0; i < live_.size(); ++i) {
      auto s = db.prepare(
          "SELECT COUNT(*) FROM leases l JOIN workers w ON w.id = l.worker_id WHERE l.outcome = 'active' AND "
          "w.name = ?");
      s.bind(1, live_[i].name);
      if (s.step() && s.column_int(0) > 0) holders.push_back(i);
    }
    if (holders.empty()) return static_cast<size_t>(uniform(0, static_cast<int>(live_.size()) - 1));
    return holders[static_cast<size_t>(uniform(0, static_cast<int>(holders.size()) - 1))];
  }

  void submit_next() {
    size_t i = submitted_++;
    // Alternate the evolutionary loop and the random baseline; both small.
    auto req = it::run_request(runs_.generations, runs_.population, 2, kFirstRunSeed + i);
    if (i % 2) req.set_strategy("random");
    v1::Run run;
    grpc::Status status;
    // A fresh connection to a just-restarted evod may still be settling: retry as evoctl's user would.
    for (int attempt = 0; attempt < 20; ++attempt) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      status = cluster_.client().SubmitRun(&ctx, req, &run);
      if (status.error_code() != grpc::StatusCode::UNAVAILABLE) break;
      sleep_ms(250);
    }
    EXPECT_TRUE(status.ok()) << status.error_message() << "\n" << cluster_.evod().log();
  }

  int index_;
  std::mt19937_64& rng_;
  RunSize runs_;
  Cluster cluster_;
  struct LiveWorker {
    std::string name;
    Process* process;
  };
  std::vector<LiveWorker> live_;
  int next_worker_ = 0;
  size_t submitted_ = 0;
};

void print(const char* label, const Kills& k, const Audit& a) {
  std::printf(
      "fault-campaign %s: worker_kills=%d evod_kills=%d runs=%lld unfinished_runs=%lld candidates=%lld "
      "results=%lld duplicates=%lld without_result=%lld leases=%lld re_leases=%lld early_re_leases=%lld "
      "abandoned=%lld cache_copies=%lld integrity=%s foreign_key_violations=%lld\n",
      label, k.workers, k.evod, (long long)a.runs, (long long)a.runs_unfinished, (long long)a.candidates,
      (long long)a.results, (long long)a.duplicates, (long long)a.without_result, (long long)a.leases,
      (long long)a.re_leases, (long long)a.early_re_leases, (long long)a.abandoned, (long long)a.cache_copies,
      a.integrity.c_str(), (long long)a.foreign_key_violations);
  std::fflush(stdout);
}

void campaign(int rounds, int worker_kills_per_round, int evod_kills_per_round, RunSize runs) {
  const uint64_t seed = campaign_seed();
  std::printf("fault-campaign seed=%llu rounds=%d workers=%d lease_ttl_ms=%d\n", (unsigned long long)seed, rounds,
              kWorkers, kLeaseTtlMs);
  std::mt19937_64 rng(seed);
  Kills total_kills;
  Audit total;
  for (int r = 0; r < rounds; ++r) {
    Round round(r, rng, runs);
    Kills k = round.run(worker_kills_per_round, evod_kills_per_round);
    bool finished = round.finish(240);
    round.stop();
    Audit a = audit_database(round.db());
    print(("round " + std::to_string(r)).c_str(), k, a);
    EXPECT_TRUE(finished) << "round " << r << " did not finish even after an evod restart\n" << round.evod_log();
    total_kills.workers += k.workers;
    total_kills.evod += k.evod;
    total += a;
  }
  print("total", total_kills, total);

  EXPECT_EQ(total_kills.workers, rounds * worker_kills_per_round);
  EXPECT_EQ(total_kills.evod, rounds * evod_kills_per_round);
  EXPECT_EQ(total.runs_unfinished, 0);
  EXPECT_EQ(total.candidates_unfinished, 0);
  EXPECT_GT(total.candidates, 0);
  // Exactly one accepted result per candidate.
  EXPECT_EQ(total.results, total.candidates);
  EXPECT_EQ(total.duplicates, 0);
  EXPECT_EQ(total.without_result, 0);
  // A candidate is leased again only after its lease expired, and the expiry is on record.
  EXPECT_GT(total.re_leases, 0) << "no lease ever expired: the kills did not hit leased work";
  EXPECT_EQ(total.early_re_leases, 0);
  EXPECT_EQ(total.active_leases_left, 0);
  EXPECT_EQ(total.result_lease_mismatch, 0);
  EXPECT_EQ(total.attempts_mismatch, 0);
  EXPECT_EQ(total.integrity, "ok");
  EXPECT_EQ(total.foreign_key_violations, 0);
}

TEST(FaultCampaign, HundredWorkerAndTwentyEvodKillsLoseNothingAndCountEachResultOnce) {
  campaign(kRounds, kWorkerKillsPerRound, kEvodKillsPerRound, kCampaignRuns);
}

// The test command's sample: one round of smaller runs, with fewer evod kills (each costs the
// reconnect grace).
TEST(FaultCampaign, OneRoundOfTwentyFiveWorkerAndTwoEvodKillsLosesNothing) {
  campaign(1, kWorkerKillsPerRound, 2, kSampleRuns);
}

}  // namespace
}  // namespace evo::fault

// A database the build before the SCHEDULE gene wrote (schema 4, genome texts naming CP_ASYNC,
// PV_ASYNC, TMA, STAGE_RELEASE, PINGPONG and QK_AHEAD) opens in this build: its genome texts and
// hashes are rewritten once, and its runs, leaderboard and export read the new texts. A genome no
// schedule matches keeps its row, leaves the leaderboard, and fails the run that was still going.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "coordinator.h"
#include "export_runs.h"
#include "rpc_fixture.h"
#include "search_space.h"
#include "store.h"
#include "store_genome_rewrite.h"
#include "store_sqlite.h"
#include "template_registry.h"
#include "test_db.h"

namespace evo {
namespace {

constexpr const char* kClass = "sm_90a/Fake GPU";
// Genome texts as the old build wrote them (every gene, in the old order).
const std::string kOldDefault =
    "fa_s512_v3:BLOCK_M=32,BLOCK_N=64,WARPS=4,STAGES=2,CP_ASYNC=1,SWIZZLE=1,SPLIT_KV=1,WGMMA=0,PV_ASYNC=0,TMA=0,"
    "STAGE_RELEASE=0,PINGPONG=0,TMA_BOX_ROWS=64,QK_AHEAD=0,LAZY_RESCALE=0,CAUSAL_FOLD=0";
const std::string kOldPingpong =
    "fa_s512_v3:BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=3,CP_ASYNC=1,SWIZZLE=1,SPLIT_KV=1,WGMMA=1,PV_ASYNC=1,TMA=1,"
    "STAGE_RELEASE=1,PINGPONG=1,TMA_BOX_ROWS=64,QK_AHEAD=0,LAZY_RESCALE=0,CAUSAL_FOLD=0";
// TMA without cp.async: no schedule matches (the old space refused it, but the row exists).
const std::string kOldBad =
    "fa_s512_v3:BLOCK_M=64,BLOCK_N=64,WARPS=4,STAGES=2,CP_ASYNC=0,SWIZZLE=1,SPLIT_KV=1,WGMMA=0,PV_ASYNC=0,TMA=1,"
    "STAGE_RELEASE=0,PINGPONG=0,TMA_BOX_ROWS=64,QK_AHEAD=0,LAZY_RESCALE=0,CAUSAL_FOLD=0";
const std::string kNewDefault =
    "fa_s512_v3:BLOCK_M=32,BLOCK_N=64,WARPS=4,STAGES=2,SCHEDULE=cp_async,SWIZZLE=1,SPLIT_KV=1,WGMMA=0,"
    "TMA_BOX_ROWS=64,LAZY_RESCALE=0,CAUSAL_FOLD=0,PACK_GQA=0,LONGEST_FIRST=0";
const std::string kNewPingpong =
    "fa_s512_v3:BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=3,SCHEDULE=pingpong,SWIZZLE=1,SPLIT_KV=1,WGMMA=1,"
    "TMA_BOX_ROWS=64,LAZY_RESCALE=0,CAUSAL_FOLD=0,PACK_GQA=0,LONGEST_FIRST=0";

std::string schema_v4_sql() {
  std::ifstream in(EVO_SERVER_TEST_DATA_DIR "/store_schema_v4.sql");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void add_run(SqliteConnection& db, const std::string& id, v1::RunState state, const std::string& start_genomes) {
  db.prepare("INSERT INTO runs (id, seed, shapes, generations, population, top_k, strategy, rng_seed, device_class, "
             "state, created_ms, message, current_generation, smem_limit, start_genomes, fitness_inputs) "
             "VALUES (?, 'fa_s512_v3', '1x8x512x64', 1, 3, 2, 'random', 1, ?, ?, 0, '', 0, 232448, ?, 'rotated')")
      .bind(1, id).bind(2, kClass).bind(3, static_cast<int64_t>(state)).bind(4, start_genomes).run();
}

// A candidate measured at `us` (done, elite-eligible, with its evaluation and cache entry), or
// still queued where us is 0.
void add_candidate(SqliteConnection& db, const std::string& run, int seq, const std::string& genome,
                   const std::string& op, const std::string& parents, double us) {
  const std::string id = run + "-c" + std::to_string(seq);
  db.prepare("INSERT INTO candidates (id, run_id, generation, seq, genome, genome_hash, op, parents, state) "
             "VALUES (?, ?, 0, ?, ?, ?, ?, ?, ?)")
      .bind(1, id).bind(2, run).bind(3, seq).bind(4, genome).bind(5, fnv1a_hex(genome)).bind(6, op)
      .bind(7, parents).bind(8, us > 0 ? "done" : "queued").run();
  if (us <= 0) return;
  v1::Evaluation e;
  e.set_status(v1::OK);
  e.set_fitness_us(us);
  *e.mutable_device() = test::test_device();
  auto* shape = e.add_shapes();
  shape->mutable_shape()->set_batch(1);
  shape->mutable_shape()->set_heads(8);
  shape->mutable_shape()->set_seq_q(512);
  shape->mutable_shape()->set_seq_k(512);
  shape->mutable_shape()->set_head_dim(64);
  shape->set_median_us(us);
  db.prepare("INSERT INTO evaluations (candidate_id, worker_id, blob, status, fitness_us, estimated, device_class, "
             "is_confirmation, created_ms) VALUES (?, 'w', ?, 1, ?, 0, ?, 0, 0)")
      .bind(1, id).bind_blob(2, e.SerializeAsString()).bind(3, us).bind(4, kClass).run();
  const int64_t eval_id = db.last_insert_rowid();
  db.prepare("UPDATE candidates SET final_evaluation_id = ?, first_evaluation_id = ?, final_status = 1, "
             "fitness_us = ?, elite_eligible = 1 WHERE id = ?")
      .bind(1, eval_id).bind(2, eval_id).bind(3, us).bind(4, id).run();
  db.prepare("INSERT OR REPLACE INTO result_cache VALUES (?, '1x8x512x64', ?, 'nvrtc 12.8', ?, ?, 0, 1)")
      .bind(1, fnv1a_hex(genome)).bind(2, kClass).bind(3, eval_id).bind(4, us).run();
}

// Run 1 ended with three measured candidates, one of them a genome no schedule matches (and the
// fastest); run 2 was still going with that genome queued.
void write_old_database(const std::string& path) {
  SqliteConnection db(path);
  db.exec(schema_v4_sql().c_str());
  add_run(db, "run-0001", v1::DONE, kOldPingpong);
  add_candidate(db, "run-0001", 0, kOldDefault, "seed", "", 10.0);
  add_candidate(db, "run-0001", 1, kOldPingpong, "start", "", 5.0);
  add_candidate(db, "run-0001", 2, kOldBad, "mutate", kOldDefault, 4.0);
  add_run(db, "run-0002", v1::RUNNING, "");
  add_candidate(db, "run-0002", 0, kOldDefault, "seed", "", 10.0);
  add_candidate(db, "run-0002", 1, kOldBad, "random", "", 0);
}

// The rewrite of version 5 by itself: the result cache follows the hashes.
TEST(StoreGenomeMigration, TheRewriteMovesCacheEntriesToTheNewHashes) {
  test::TempDir dir;
  write_old_database(dir.file("evo.db"));
  SqliteConnection db(dir.file("evo.db"));
  rewrite_genome_texts(db);
  auto cached = [&](const std::string& text) {
    auto s = db.prepare("SELECT COUNT(*) FROM result_cache WHERE genome_hash = ?");
    s.bind(1, fnv1a_hex(text));
    return s.step() ? s.column_int(0) : 0;
  };
  EXPECT_EQ(cached(kNewDefault), 1);
  EXPECT_EQ(cached(kNewPingpong), 1);
  EXPECT_EQ(cached(kOldDefault), 0);
}

TEST(StoreGenomeMigration, OldDatabaseOpensWithTodaysGenomeTexts) {
  test::TempDir dir;
  write_old_database(dir.file("evo.db"));
  Store store(dir.file("evo.db"));
  EXPECT_EQ(store.schema_version(), Store::kSchemaVersion);
  ASSERT_EQ(SearchSpace::for_template("fa_s512_v3").default_genome().text(), kNewDefault);

  store.transaction([&] {
    const auto candidates = store.candidates_of_run("run-0001");
    ASSERT_EQ(candidates.size(), 3u);
    EXPECT_EQ(candidates[0].genome, kNewDefault);
    EXPECT_EQ(candidates[0].genome_hash, fnv1a_hex(kNewDefault));
    EXPECT_EQ(candidates[1].genome, kNewPingpong);
    EXPECT_EQ(candidates[1].genome_hash, fnv1a_hex(kNewPingpong));
    EXPECT_EQ(candidates[2].parents, kNewDefault);
    EXPECT_EQ(store.get_run("run-0001")->start_genomes, std::vector<std::string>{kNewPingpong});
    // Version 6 drops the result cache (its entries were taken on one worker's word); the
    // rewrite's own test below shows that the cache follows the hashes.
    for (const std::string& text : {kNewDefault, kNewPingpong, kOldDefault})
      EXPECT_FALSE(store.cache_get(fnv1a_hex(text), "1x8x512x64", kClass, "nvrtc 12.8")) << text;
  });

  Coordinator coord(store, CoordinatorOptions{});
  const auto runs = coord.list_runs();
  ASSERT_EQ(runs.runs_size(), 2);
  v1::LeaderboardRequest lr;
  lr.set_run_id("run-0001");
  const auto board = coord.leaderboard(lr);
  EXPECT_EQ(board.seed_genome(), kNewDefault);
  EXPECT_DOUBLE_EQ(board.seed_us(), 10.0);
  ASSERT_EQ(board.elites_size(), 2);
  EXPECT_EQ(board.elites(0).genome(), kNewPingpong);
  EXPECT_DOUBLE_EQ(board.elites(0).speedup_vs_seed(), 2.0);
  EXPECT_EQ(board.elites(1).genome(), kNewDefault);

  const v1::ExportResponse exported = export_runs(coord, {"run-0001"});
  EXPECT_EQ(exported.genome(), kNewPingpong);
  EXPECT_NE(exported.source().find(kNewPingpong), std::string::npos);
}

TEST(StoreGenomeMigration, AGenomeNoScheduleMatchesKeepsItsRowAndLeavesTheLeaderboard) {
  test::TempDir dir;
  write_old_database(dir.file("evo.db"));
  Store store(dir.file("evo.db"));
  store.transaction([&] {
    // Kept as it was, but no longer an elite.
    const auto done = store.candidates_of_run("run-0001")[2];
    EXPECT_EQ(done.genome, kOldBad);
    EXPECT_EQ(done.genome_hash, fnv1a_hex(kOldBad));
    EXPECT_FALSE(done.elite_eligible);
    EXPECT_EQ(store.get_run("run-0001")->state, v1::DONE);
    // The queued one is closed as INVALID, and its run, which could not go on, fails naming it.
    const auto queued = store.candidates_of_run("run-0002")[1];
    EXPECT_EQ(queued.genome, kOldBad);
    EXPECT_EQ(queued.state, v1::CANDIDATE_STATE_DONE);
    EXPECT_EQ(queued.final_status, v1::INVALID);
    const auto run = store.get_run("run-0002");
    EXPECT_EQ(run->state, v1::FAILED);
    EXPECT_NE(run->message.find("run-0002-c1's genome '" + kOldBad + "' no longer parses: no SCHEDULE matches"),
              std::string::npos)
        << run->message;
    EXPECT_EQ(store.candidates_of_run("run-0002")[0].genome, kNewDefault);
  });
}

// The rewrite is one step of the migration: a second open changes nothing.
TEST(StoreGenomeMigration, ReopeningChangesNothing) {
  test::TempDir dir;
  write_old_database(dir.file("evo.db"));
  std::string first;
  {
    Store store(dir.file("evo.db"));
    first = store.dump();
  }
  Store again(dir.file("evo.db"));
  EXPECT_EQ(again.dump(), first);
  EXPECT_NE(first.find("SCHEDULE=pingpong"), std::string::npos);
}

}  // namespace
}  // namespace evo

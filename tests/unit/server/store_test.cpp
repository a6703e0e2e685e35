#include <gtest/gtest.h>

#include "store.h"
#include "test_db.h"

namespace evo {
namespace {

TEST(Store, MigratesAnEmptyDatabaseToTheCurrentSchema) {
  test::TempDir dir;
  {
    Store store(dir.file("evo.db"));
    EXPECT_EQ(store.schema_version(), Store::kSchemaVersion);
    EXPECT_NE(store.dump().find("SELECT * FROM runs"), std::string::npos);
  }
  // Opening again migrates nothing and keeps one version row per migration.
  Store again(dir.file("evo.db"));
  EXPECT_EQ(again.schema_version(), Store::kSchemaVersion);
  std::string dump = again.dump();
  std::string versions = dump.substr(0, dump.find("SELECT * FROM runs"));
  EXPECT_EQ(versions, "SELECT * FROM schema_version ORDER BY version\n1\n");
}

TEST(Store, UsesWriteAheadLogging) {
  test::TempDir dir;
  Store store(dir.file("evo.db"));
  EXPECT_EQ(store.journal_mode(), "wal");
}

TEST(Store, MissingDirectoryIsOneClearError) {
  test::TempDir dir;
  try {
    Store store(dir.file("no/such/dir/evo.db"));
    FAIL() << "opened a database in a missing directory";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
}

TEST(Store, NotADatabaseIsRefused) {
  test::TempDir dir;
  std::string path = dir.file("text.db");
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs("this is not a sqlite database, but long enough to have a header page......\n", f);
  std::fclose(f);
  EXPECT_THROW(Store store(path), StoreError);
}

TEST(Store, FailedTransactionRollsBackEverything) {
  test::TempDir dir;
  Store store(dir.file("evo.db"));
  std::string before = store.dump();
  RunRecord run;
  run.id = "run-0001";
  run.seed = "fa_s512_v3";
  run.shapes = {"1x8x512x64"};
  run.generations = run.population = run.top_k = 1;
  run.strategy = "evolve";
  run.smem_limit = 1;
  EXPECT_THROW(store.transaction([&] {
    store.insert_run(run);
    throw std::runtime_error("boom");
  }),
               std::runtime_error);
  EXPECT_EQ(store.dump(), before);
}

TEST(Store, ResultCacheKeyIsGenomeClassAndToolkit) {
  test::TempDir dir;
  Store store(dir.file("evo.db"));
  store.transaction([&] {
    RunRecord run;
    run.id = "run-0001";
    run.seed = "fa_s512_v3";
    run.shapes = {"1x8x512x64"};
    run.generations = run.population = run.top_k = 1;
    run.strategy = "evolve";
    run.smem_limit = 1;
    store.insert_run(run);
    CandidateRecord c;
    c.id = "run-0001-c0000";
    c.run_id = run.id;
    c.genome = "g";
    c.genome_hash = "h";
    c.op = "seed";
    store.insert_candidate(c);
    EvaluationRecord e;
    e.candidate_id = c.id;
    e.worker_id = "w";
    e.evaluation.set_status(v1::OK);
    e.evaluation.set_fitness_us(10);
    int64_t id = store.insert_evaluation(e);
    store.cache_put({"h", "sm_90a/H100", "nvrtc 12.8 / cuda 12.8", id, 10.0, 1.5, true});
  });
  store.transaction([&] {
    auto hit = store.cache_get("h", "sm_90a/H100", "nvrtc 12.8 / cuda 12.8");
    ASSERT_TRUE(hit);
    EXPECT_DOUBLE_EQ(*hit->fitness_us, 10.0);
    EXPECT_TRUE(hit->confirmed);
    EXPECT_FALSE(store.cache_get("h", "sm_89/L40S", "nvrtc 12.8 / cuda 12.8"));
    EXPECT_FALSE(store.cache_get("h", "sm_90a/H100", "nvrtc 13.0 / cuda 13.0"));
  });
}

}  // namespace
}  // namespace evo

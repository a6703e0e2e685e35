#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "store.h"
#include "store_sqlite.h"
#include "template_registry.h"
#include "test_db.h"

namespace evo {
namespace {

// Version 13 taken back: the schema of version 12.
constexpr const char* kBeforeVersion13 =
    "DELETE FROM schema_version WHERE version >= 13;"
    "ALTER TABLE runs DROP COLUMN target_us;";

// Versions 11 and on taken back: the schema of version 10 (12 changed no table).
constexpr const char* kBeforeVersion11 =
    "DELETE FROM schema_version WHERE version >= 11;"
    "ALTER TABLE runs DROP COLUMN target_us;"
    "ALTER TABLE candidates DROP COLUMN awaits_ranking;";

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
  EXPECT_EQ(versions, "SELECT * FROM schema_version ORDER BY version\n1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n");
}

// A database of today's schema taken back by the SQL `undo`, holding one run of `shapes` started
// from `genome` and that genome's candidate, queued.
void write_queued_start(const std::string& path, const std::string& undo, const std::string& shapes,
                        const std::string& genome) {
  { Store fresh(path); }
  SqliteConnection db(path);
  db.exec(undo.c_str());
  db.prepare("INSERT INTO runs (id, seed, shapes, generations, population, top_k, strategy, rng_seed, device_class,"
             " state, created_ms, message, smem_limit, start_genomes) VALUES ('run-0001', 'fa_s512_v3',"
             " ?, 1, 1, 1, 'evolve', 1, '', 3, 0, '', 232448, ?);")
      .bind(1, shapes).bind(2, genome).run();
  db.prepare("INSERT INTO candidates (id, run_id, generation, seq, genome, genome_hash, op, parents, state)"
             " VALUES ('run-0001-c0', 'run-0001', 0, 0, ?, ?, 'start', '', 'queued')")
      .bind(1, genome).bind(2, fnv1a_hex(genome)).run();
}

// Opening write_queued_start's file migrates it: the candidate's genome, its hash and the run's
// start genome read `after`.
void expect_start_rewritten(const std::string& path, const std::string& after) {
  Store migrated(path);
  EXPECT_EQ(migrated.schema_version(), Store::kSchemaVersion);
  migrated.transaction([&] {
    const auto candidates = migrated.candidates_of_run("run-0001");
    ASSERT_EQ(candidates.size(), 1u);
    EXPECT_EQ(candidates[0].genome, after);
    EXPECT_EQ(candidates[0].genome_hash, fnv1a_hex(after));
    EXPECT_EQ(migrated.get_run("run-0001")->start_genomes, std::vector<std::string>{after});
  });
}

// A version-9 candidate's genome text, written before PACK_GQA: opening the file rewrites it (and
// its hash, and the cache entry's) to today's canonical text, which names the gene at 0 (and
// LONGEST_FIRST, the gene version 12 names, at 0 too).
TEST(Store, MigrationToVersionTenNamesPackGqaInEveryStoredGenome) {
  const std::string before =
      "fa_s512_v3:BLOCK_M=64,BLOCK_N=128,WARPS=4,STAGES=2,SCHEDULE=tma,SWIZZLE=1,SPLIT_KV=1,WGMMA=1,"
      "TMA_BOX_ROWS=64,LAZY_RESCALE=0,CAUSAL_FOLD=0";
  test::TempDir dir;
  write_queued_start(dir.file("evo.db"), std::string(kBeforeVersion11) + "DELETE FROM schema_version WHERE version >= 10;",
                     "1x8x512x64", before);
  expect_start_rewritten(dir.file("evo.db"), before + ",PACK_GQA=0,LONGEST_FIRST=0");
}

// A version-11 candidate's genome text, written before LONGEST_FIRST: opening the file rewrites it
// and its hash (and the run's start genome) to today's canonical text, which names the gene at 0,
// the block order every earlier genome had.
TEST(Store, MigrationToVersionTwelveNamesLongestFirstInEveryStoredGenome) {
  const std::string before =
      "fa_s512_v3:BLOCK_M=128,BLOCK_N=128,WARPS=8,STAGES=3,SCHEDULE=pingpong,SWIZZLE=1,SPLIT_KV=1,WGMMA=1,"
      "TMA_BOX_ROWS=256,LAZY_RESCALE=1,CAUSAL_FOLD=0,PACK_GQA=0";
  test::TempDir dir;
  write_queued_start(dir.file("evo.db"), std::string(kBeforeVersion13) + "DELETE FROM schema_version WHERE version >= 12;",
                     "2x16x4096x128:causal", before);
  expect_start_rewritten(dir.file("evo.db"), before + ",LONGEST_FIRST=0");
}

// A version-12 run, ended or still queued, migrates with no target: it runs on (or stays ended)
// as before.
TEST(Store, MigrationToVersionThirteenGivesOlderRunsNoTarget) {
  test::TempDir dir;
  write_queued_start(dir.file("evo.db"), kBeforeVersion13, "1x8x512x64", "fa_s512_v3:BLOCK_M=64");
  Store migrated(dir.file("evo.db"));
  EXPECT_EQ(migrated.schema_version(), Store::kSchemaVersion);
  migrated.transaction([&] {
    const auto run = migrated.get_run("run-0001");
    ASSERT_TRUE(run);
    EXPECT_EQ(run->state, v1::DONE);
    EXPECT_EQ(run->target_us, 0);
    EXPECT_EQ(migrated.candidates_of_run("run-0001").size(), 1u);
  });
}

// A version-10 would-be elite queued for its confirmation keeps it: it does not wait for a
// ranking that its generation already had.
TEST(Store, MigrationToVersionElevenLeavesQueuedConfirmationsLeasable) {
  test::TempDir dir;
  { Store fresh(dir.file("evo.db")); }
  {
    SqliteConnection db(dir.file("evo.db"));
    db.exec(kBeforeVersion11);
    db.exec("INSERT INTO runs (id, seed, shapes, generations, population, top_k, strategy, rng_seed, device_class,"
            " state, created_ms, message, smem_limit) VALUES ('run-0001', 'fa_s512_v3', '1x8x512x64', 1, 2, 1,"
            " 'evolve', 1, '', 2, 0, '', 1);");
    // A genome text of version 11 (version 12's rewrite fails a candidate whose text does not parse).
    db.exec("INSERT INTO candidates (id, run_id, generation, seq, genome, genome_hash, op, parents, state, "
            "confirmation) VALUES ('run-0001-c0', 'run-0001', 0, 0, 'fa_s512_v3:BLOCK_M=64', 'h', 'start', '', "
            "'queued', 1)");
  }
  Store migrated(dir.file("evo.db"));
  EXPECT_EQ(migrated.schema_version(), Store::kSchemaVersion);
  migrated.transaction([&] {
    const auto queued = migrated.queued_candidates("run-0001", 10);
    ASSERT_EQ(queued.size(), 1u);
    EXPECT_TRUE(queued[0].confirmation);
    EXPECT_FALSE(queued[0].awaits_ranking);
  });
}

// Version 9 taken back: the schema of version 8.
constexpr const char* kBeforeVersion9 =
    "DELETE FROM schema_version WHERE version >= 9;"
    "DROP INDEX workers_by_enrolment;"
    "ALTER TABLE workers DROP COLUMN enrolment;"
    "DROP TABLE enrolments;";

// Version 8 taken back: the schema of version 7.
constexpr const char* kBeforeVersion8 =
    "DELETE FROM schema_version WHERE version >= 8;"
    "ALTER TABLE runs DROP COLUMN budget_ms;"
    "ALTER TABLE runs DROP COLUMN max_evals;"
    "ALTER TABLE runs DROP COLUMN patience;"
    "ALTER TABLE runs DROP COLUMN started_ms;"
    "ALTER TABLE runs DROP COLUMN stop_reason;"
    "ALTER TABLE runs DROP COLUMN ended_ms;"
    "ALTER TABLE runs DROP COLUMN gpu_ms;";

// Version 7 taken back: the schema of version 6.
constexpr const char* kBeforeVersion7 =
    "DELETE FROM schema_version WHERE version >= 7;"
    "ALTER TABLE workers DROP COLUMN credential_hash;"
    "ALTER TABLE workers DROP COLUMN quarantined;"
    "ALTER TABLE workers DROP COLUMN agreements;"
    "ALTER TABLE workers DROP COLUMN disagreements;"
    "ALTER TABLE candidates DROP COLUMN second_evaluation_id;"
    "ALTER TABLE candidates DROP COLUMN second_worker;"
    "ALTER TABLE candidates DROP COLUMN self_confirmed;";

// Version 6 taken back: what it added (its leases table, rebuilt for a new outcome, is left: the
// migration rebuilds it again), so that opening the file migrates to 6 again.
constexpr const char* kBeforeVersion6 =
    "DELETE FROM schema_version WHERE version >= 6; DROP TABLE liveness; DROP INDEX runs_by_request_id; ALTER TABLE runs DROP COLUMN request_id;"
    "DROP INDEX candidates_by_generation; DROP INDEX candidates_elites; DROP INDEX leases_by_worker;";

// A database as an older build left it: the current schema, taken back by `sql` (its version
// rows deleted, its new columns dropped, rows inserted as that build wrote them).
void write_older_database(const test::TempDir& dir, const char* sql) {
  { Store fresh(dir.file("evo.db")); }
  SqliteConnection db(dir.file("evo.db"));
  db.exec(kBeforeVersion11);
  db.exec(kBeforeVersion9);
  db.exec(kBeforeVersion8);
  db.exec(kBeforeVersion7);
  db.exec(kBeforeVersion6);
  db.exec(sql);
}

// A version-7 run, done or still running, migrates with no budget and no stop reason: it runs on
// (or stays ended) as before.
TEST(Store, MigrationToVersionEightGivesOlderRunsNoBudget) {
  test::TempDir dir;
  { Store fresh(dir.file("evo.db")); }
  {
    SqliteConnection db(dir.file("evo.db"));
    db.exec(kBeforeVersion11);
  db.exec(kBeforeVersion9);
    db.exec(kBeforeVersion8);
    db.exec("INSERT INTO runs (id, seed, shapes, generations, population, top_k, strategy, rng_seed, device_class,"
            " state, created_ms, message, smem_limit) VALUES ('run-0001', 'fa_s512_v3', '1x8x512x64', 1, 1, 1,"
            " 'evolve', 1, '', 3, 0, '', 1);");
  }
  Store migrated(dir.file("evo.db"));
  EXPECT_EQ(migrated.schema_version(), Store::kSchemaVersion);
  migrated.transaction([&] {
    const auto run = migrated.get_run("run-0001");
    ASSERT_TRUE(run);
    EXPECT_EQ(run->state, v1::DONE);
    EXPECT_EQ(run->budget_ms, 0);
    EXPECT_EQ(run->max_evals, 0);
    EXPECT_EQ(run->patience, 0);
    EXPECT_EQ(run->started_ms, 0);
    EXPECT_EQ(run->stop_reason, v1::STOP_REASON_UNSPECIFIED);
    EXPECT_EQ(run->ended_ms, 0);
    EXPECT_EQ(run->gpu_ms, 0);
  });
}

// A version-8 worker registered without an enrolment: it migrates as a party of its own, trusted
// as before, and the database has no enrolment until the operator makes one.
TEST(Store, MigrationToVersionNineLeavesOlderWorkersUnenrolled) {
  test::TempDir dir;
  { Store fresh(dir.file("evo.db")); }
  {
    SqliteConnection db(dir.file("evo.db"));
    db.exec(kBeforeVersion11);
  db.exec(kBeforeVersion9);
    db.exec("INSERT INTO workers (id, name, device_class, device, registered_ms, last_seen_ms, credential_hash)"
            " VALUES ('w-1', 'gpu0', 'sm_90a/H100', x'', 1, 2, 'abc');");
  }
  Store migrated(dir.file("evo.db"));
  EXPECT_EQ(migrated.schema_version(), Store::kSchemaVersion);
  migrated.transaction([&] {
    const auto w = migrated.get_worker("w-1");
    ASSERT_TRUE(w);
    EXPECT_EQ(w->enrolment, "");
    EXPECT_EQ(w->credential_hash, "abc");
    EXPECT_TRUE(w->quarantined.empty());
    EXPECT_TRUE(migrated.enrolments().empty());
    EXPECT_EQ(migrated.count_live_workers("sm_90a/H100", 0, {"w-1"}), 0) << "its party is its id";
    EXPECT_EQ(migrated.count_live_workers("sm_90a/H100", 0, {"enrolment:w-1"}), 1);
  });
}

// Version 6 cached a time on one worker's word (or its "estimated" flag), and its workers had no
// credential: migrating drops the cache, keeps the workers (which must register again to get a
// credential) and gives the candidates no second measurement.
TEST(Store, MigrationToVersionSevenDropsTheCacheAndKeepsWorkersWithoutACredential) {
  test::TempDir dir;
  write_older_database(dir, "INSERT INTO workers VALUES ('w-1', 'gpu0', 'sm_90a/H100', x'', 1, 2);"
                            "INSERT INTO runs (id, seed, shapes, generations, population, top_k, strategy, rng_seed,"
                            " device_class, state, created_ms, message, smem_limit) VALUES ('run-0001', 'fa_s512_v3',"
                            " '1x8x512x64', 1, 1, 1, 'evolve', 1, '', 1, 0, '', 1);"
                            "INSERT INTO candidates (id, run_id, generation, seq, genome, genome_hash, op, parents,"
                            " state) VALUES ('run-0001-c0000', 'run-0001', 0, 0, 'g', 'h', 'seed', '', 'done');"
                            "INSERT INTO evaluations (candidate_id, worker_id, blob, status, estimated, device_class,"
                            " is_confirmation, created_ms) VALUES ('run-0001-c0000', 'w-1', x'', 1, 1, 'c', 0, 1);"
                            "INSERT INTO result_cache VALUES ('h', '1x8x512x64', 'sm_90a/H100', 't', 1, 1e-9, 0, 1);");
  Store migrated(dir.file("evo.db"));
  EXPECT_EQ(migrated.schema_version(), Store::kSchemaVersion);
  migrated.transaction([&] {
    EXPECT_FALSE(migrated.cache_get("h", "1x8x512x64", "sm_90a/H100", "t"));
    const auto w = migrated.get_worker("w-1");
    ASSERT_TRUE(w);
    EXPECT_TRUE(w->credential_hash.empty());
    EXPECT_TRUE(w->quarantined.empty());
    const auto c = migrated.get_candidate("run-0001-c0000");
    ASSERT_TRUE(c);
    EXPECT_FALSE(c->second_evaluation_id);
    EXPECT_FALSE(c->self_confirmed);
  });
}

// Version 1 cached times without saying which shapes they timed; migrating drops those entries
// (they cannot be trusted for any run) and keeps everything else.
TEST(Store, MigrationToVersionTwoDropsCacheEntriesWithoutAProblem) {
  test::TempDir dir;
  write_older_database(dir, "DELETE FROM schema_version WHERE version >= 2;"
                            "ALTER TABLE runs DROP COLUMN start_genomes;"
                            "ALTER TABLE runs DROP COLUMN fitness_inputs;"
                            "DROP TABLE result_cache;"
                            "CREATE TABLE result_cache (genome_hash TEXT NOT NULL, device_class TEXT NOT NULL,"
                            " toolkit TEXT NOT NULL, evaluation_id INTEGER NOT NULL, fitness_us REAL,"
                            " spread_pct REAL NOT NULL, confirmed INTEGER NOT NULL,"
                            " PRIMARY KEY (genome_hash, device_class, toolkit));"
                            "INSERT INTO result_cache VALUES ('h', 'sm_90a/H100', 't', 1, 10.0, 0, 1);"
                            "INSERT INTO runs (id, seed, shapes, generations, population, top_k, strategy, rng_seed,"
                            " device_class, state, created_ms, message, smem_limit) VALUES ('run-0001', 'fa_s512_v3',"
                            " '1x8x512x64', 1, 1, 1, 'evolve', 1, '', 1, 0, '', 1);");
  Store migrated(dir.file("evo.db"));
  EXPECT_EQ(migrated.schema_version(), Store::kSchemaVersion);
  migrated.transaction([&] {
    EXPECT_FALSE(migrated.cache_get("h", "1x8x512x64", "sm_90a/H100", "t"));
    EXPECT_TRUE(migrated.get_run("run-0001"));
  });
}

RunRecord sample_run(const std::string& id) {
  RunRecord run;
  run.id = id;
  run.seed = "fa_s512_v3";
  run.shapes = {"1x8x512x64", "1x8x1024x64:causal"};
  run.generations = run.population = run.top_k = 1;
  run.strategy = v1::SEARCH_STRATEGY_EVOLVE;
  run.smem_limit = 1;
  return run;
}

TEST(Store, StartGenomesRoundTrip) {
  test::TempDir dir;
  const std::vector<std::string> starts = {"fa_s512_v3:BLOCK_M=64,BLOCK_N=128,WARPS=4",
                                           "fa_s512_v3:BLOCK_M=128,BLOCK_N=64,WARPS=8"};
  {
    Store store(dir.file("evo.db"));
    store.transaction([&] {
      RunRecord with = sample_run("run-0001");
      with.start_genomes = starts;
      store.insert_run(with);
      store.insert_run(sample_run("run-0002"));
    });
  }
  Store reopened(dir.file("evo.db"));
  reopened.transaction([&] {
    EXPECT_EQ(reopened.get_run("run-0001")->start_genomes, starts);
    EXPECT_TRUE(reopened.get_run("run-0002")->start_genomes.empty());
    auto runs = reopened.list_runs();
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_EQ(runs[0].start_genomes, starts);
    EXPECT_EQ(runs[0].shapes, sample_run("").shapes);
  });
}

// A version-2 database (no start_genomes or fitness_inputs column) migrates in place: its runs
// stay, with no start genomes and ranked by inputs cycled past L2, the only time there was; new
// runs store theirs.
TEST(Store, MigrationFromVersionTwoKeepsRunsAndAddsStartGenomesAndFitnessInputs) {
  test::TempDir dir;
  write_older_database(dir, "DELETE FROM schema_version WHERE version >= 3;"
                            "ALTER TABLE runs DROP COLUMN start_genomes;"
                            "ALTER TABLE runs DROP COLUMN fitness_inputs;"
                            "INSERT INTO runs (id, seed, shapes, generations, population, top_k, strategy, rng_seed,"
                            " device_class, state, created_ms, message, smem_limit) VALUES ('run-0001', 'fa_s512_v3',"
                            " '1x8x512x64', 2, 4, 1, 'random', 9, 'sm_90a/H100', 2, 5, '', 232448);");
  Store migrated(dir.file("evo.db"));
  EXPECT_EQ(migrated.schema_version(), Store::kSchemaVersion);
  migrated.transaction([&] {
    auto old = migrated.get_run("run-0001");
    ASSERT_TRUE(old);
    EXPECT_TRUE(old->start_genomes.empty());
    EXPECT_EQ(old->fitness_inputs, v1::FITNESS_INPUTS_ROTATED);
    EXPECT_EQ(old->strategy, v1::SEARCH_STRATEGY_RANDOM);
    EXPECT_EQ(old->rng_seed, 9u);
    EXPECT_EQ(old->device_class, "sm_90a/H100");
    EXPECT_EQ(old->smem_limit, 232448);
    RunRecord fresh = sample_run("run-0002");
    fresh.start_genomes = {"fa_s512_v3:BLOCK_M=64"};
    fresh.fitness_inputs = v1::FITNESS_INPUTS_RESIDENT;
    migrated.insert_run(fresh);
    EXPECT_EQ(migrated.get_run("run-0002")->start_genomes, fresh.start_genomes);
    EXPECT_EQ(migrated.get_run("run-0002")->fitness_inputs, v1::FITNESS_INPUTS_RESIDENT);
  });
}

// An evaluation stored by a build from before the gate enums: its gates carry labels only (the
// blob is what that build serialized), and they read back with their enums.
TEST(Store, AnEvaluationStoredBeforeTheGateEnumsReadsWithThem) {
  test::TempDir dir;
  Store store(dir.file("evo.db"));
  store.transaction([&] {
    store.insert_run(sample_run("run-0001"));
    CandidateRecord c;
    c.id = "run-0001-c0000";
    c.run_id = "run-0001";
    c.genome = "g";
    c.genome_hash = "h";
    c.op = "seed";
    store.insert_candidate(c);
    EvaluationRecord e;
    e.candidate_id = c.id;
    e.evaluation.set_status(v1::RESOURCE_REJECT);
    const std::pair<const char*, const char*> labels[] = {
        {"valid", "passed"}, {"compile", "failed"}, {"sanitizer", "not_run"}};
    for (const auto& [gate, verdict] : labels) {
      auto* g = e.evaluation.add_gates();
      g->set_gate(gate);
      g->set_verdict(verdict);
    }
    const auto read = store.get_evaluation(store.insert_evaluation(e));
    ASSERT_TRUE(read);
    const auto& gates = read->evaluation.gates();
    ASSERT_EQ(gates.size(), 3);
    EXPECT_EQ(gates[0].kind(), v1::GATE_VALID);
    EXPECT_EQ(gates[0].outcome(), v1::VERDICT_PASSED);
    EXPECT_EQ(gates[1].kind(), v1::GATE_COMPILE);
    EXPECT_EQ(gates[1].outcome(), v1::VERDICT_FAILED);
    EXPECT_EQ(gates[2].kind(), v1::GATE_SANITIZER);
    EXPECT_EQ(gates[2].outcome(), v1::VERDICT_NOT_RUN);
    EXPECT_EQ(gates[1].gate(), "compile") << "the labels stay, for older peers";
  });
}

// The store keeps strategies, fitness inputs, candidate states and result sources as labels in text
// columns; one that no build of evo wrote is an error that names the row, not a guess.
TEST(Store, ATextColumnThatNamesNoValueIsAnError) {
  test::TempDir dir;
  write_older_database(dir, "INSERT INTO runs (id, seed, shapes, generations, population, top_k, strategy, rng_seed,"
                            " device_class, state, created_ms, message, smem_limit) VALUES ('run-0001', 'fa_s512_v3',"
                            " '1x8x512x64', 2, 4, 1, 'annealing', 9, '', 2, 5, '', 232448);");
  Store store(dir.file("evo.db"));
  store.transaction([&] {
    try {
      store.get_run("run-0001");
      FAIL() << "expected a StoreError";
    } catch (const StoreError& e) {
      EXPECT_STREQ(e.what(), "strategy of run-0001 is 'annealing', not one of evolve, random, exhaustive, surrogate");
    }
  });
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

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

StoreFault fault_of_opening(const std::string& path, const StoreOptions& options, std::string* message) {
  try {
    Store store(path, options);
  } catch (const StoreError& e) {
    *message = e.what();
    return e.fault();
  }
  *message = "opened";
  return StoreFault::kOther;
}

// A run in a closed database: everything in the file itself, no WAL left.
void write_one_run(const std::string& path) {
  Store store(path);
  store.transaction([&] {
    RunRecord run;
    run.id = "run-0001";
    run.seed = "fa_s512_v3";
    run.shapes = {"1x8x512x64"};
    run.generations = run.population = run.top_k = 1;
    run.smem_limit = 1;
    store.insert_run(run);
  });
}

TEST(Store, CorruptFileIsRefusedAtOpenAndLeftAsItWas) {
  test::TempDir dir;
  const std::string path = dir.file("evo.db");
  write_one_run(path);
  test::damage_table(path, "runs");
  const std::string before = file_bytes(path);
  std::string message;
  EXPECT_EQ(fault_of_opening(path, {}, &message), StoreFault::kCorrupt) << message;
  EXPECT_NE(message.find("is corrupt (PRAGMA quick_check: "), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_EQ(file_bytes(path), before);
}

TEST(Store, EmptyFileIsRefusedUnlessInit) {
  test::TempDir dir;
  const std::string path = dir.file("evo.db");
  std::ofstream(path).close();
  std::string message;
  EXPECT_EQ(fault_of_opening(path, {}, &message), StoreFault::kOther) << message;
  EXPECT_NE(message.find("is an empty file (0 bytes)"), std::string::npos) << message;
  EXPECT_NE(message.find("--init"), std::string::npos) << message;
  EXPECT_EQ(file_bytes(path), "");
  StoreOptions init;
  init.init = true;
  Store store(path, init);
  EXPECT_EQ(store.schema_version(), Store::kSchemaVersion);
}

// Removing the WAL (or -shm) under an open connection: SQLite would keep committing into the
// orphaned file and lose it all when the process ends. The Store stops writing at once, keeps
// refusing, and what was committed before is in the database file.
void expect_journal_removal_stops_writes(const char* suffix, const char* what) {
  test::TempDir dir;
  const std::string path = dir.file("evo.db");
  auto store = std::make_unique<Store>(path);
  store->transaction([&] { store->insert_run(sample_run("run-0001")); });
  ASSERT_TRUE(std::filesystem::remove(path + suffix));
  for (const char* id : {"run-0002", "run-0003"}) {
    try {
      store->transaction([&] { store->insert_run(sample_run(id)); });
      ADD_FAILURE() << "a write was accepted after the " << what << " was removed";
    } catch (const StoreError& e) {
      EXPECT_EQ(e.fault(), StoreFault::kUnavailable);
      EXPECT_NE(std::string(e.what()).find(std::string(what) + " '" + path + suffix + "' was removed or replaced"),
                std::string::npos)
          << e.what();
    }
  }
  store.reset();
  Store reopened(path);
  reopened.transaction([&] {
    EXPECT_TRUE(reopened.get_run("run-0001")) << "a transaction committed before the removal was lost";
    EXPECT_FALSE(reopened.get_run("run-0002"));
  });
}

TEST(Store, RemovedWalStopsEveryWriteAndKeepsWhatWasCommitted) {
  expect_journal_removal_stops_writes("-wal", "WAL file");
}

TEST(Store, RemovedSharedMemoryFileStopsEveryWrite) {
  expect_journal_removal_stops_writes("-shm", "shared-memory file");
}

TEST(Store, ReplacedWalStopsWrites) {
  test::TempDir dir;
  const std::string path = dir.file("evo.db");
  Store store(path);
  std::ofstream(dir.file("other")) << "x";
  std::filesystem::rename(dir.file("other"), path + "-wal");
  EXPECT_THROW(store.transaction([&] { store.insert_run(sample_run("run-0001")); }), StoreError);
}

// A page found damaged while running: the message says writes are refused, and they are.
TEST(Store, CorruptionFoundWhileRunningStopsEveryLaterWrite) {
  test::TempDir dir;
  const std::string path = dir.file("evo.db");
  write_one_run(path);
  Store store(path);
  test::damage_table(path, "runs");
  // Another connection's commit makes this one drop its page cache and read page 2 again.
  SqliteConnection(path).exec("PRAGMA user_version = 7");
  try {
    store.transaction([&] { store.get_run("run-0001"); });
    FAIL() << "read a damaged page";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.fault(), StoreFault::kCorrupt) << e.what();
  }
  try {
    // The workers table is sound: without the stop this write would go through.
    store.transaction([&] {
      WorkerRecord w;
      w.id = "w-1";
      w.name = "w";
      store.upsert_worker(w);
    });
    FAIL() << "a write was accepted after the database was found corrupt";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.fault(), StoreFault::kCorrupt) << e.what();
  }
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
  run.strategy = v1::SEARCH_STRATEGY_EVOLVE;
  run.smem_limit = 1;
  EXPECT_THROW(store.transaction([&] {
    store.insert_run(run);
    throw std::runtime_error("boom");
  }),
               std::runtime_error);
  EXPECT_EQ(store.dump(), before);
}

TEST(Store, ResultCacheKeyIsGenomeProblemClassAndToolkit) {
  test::TempDir dir;
  Store store(dir.file("evo.db"));
  store.transaction([&] {
    RunRecord run;
    run.id = "run-0001";
    run.seed = "fa_s512_v3";
    run.shapes = {"1x8x512x64"};
    run.generations = run.population = run.top_k = 1;
    run.strategy = v1::SEARCH_STRATEGY_EVOLVE;
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
    store.cache_put({"h", "1x8x512x64", "sm_90a/H100", "nvrtc 12.8 / cuda 12.8", id, 10.0, 1.5, true});
  });
  store.transaction([&] {
    auto hit = store.cache_get("h", "1x8x512x64", "sm_90a/H100", "nvrtc 12.8 / cuda 12.8");
    ASSERT_TRUE(hit);
    EXPECT_DOUBLE_EQ(*hit->fitness_us, 10.0);
    EXPECT_TRUE(hit->confirmed);
    EXPECT_FALSE(store.cache_get("h", "1x8x512x64", "sm_89/L40S", "nvrtc 12.8 / cuda 12.8"));
    EXPECT_FALSE(store.cache_get("h", "1x8x512x64", "sm_90a/H100", "nvrtc 13.0 / cuda 13.0"));
    // The same genome timed on another problem is not a hit: its time says nothing here.
    EXPECT_FALSE(store.cache_get("h", "16x16x512x64", "sm_90a/H100", "nvrtc 12.8 / cuda 12.8"));
    EXPECT_FALSE(store.cache_get("h", "1x8x512x64,1x8x512x64:causal", "sm_90a/H100", "nvrtc 12.8 / cuda 12.8"));
  });
}

// A worker's fair share counts the open work (queued and leased) of the active runs its class may
// lease, its own class's and those no worker has fixed yet, in one query.
TEST(Store, OpenCandidatesForAClassCountActiveRunsOfThatClassOrNone) {
  test::TempDir dir;
  Store store(dir.file("evo.db"));
  store.transaction([&] {
    // run id, device class, queued, leased, done
    const std::vector<std::tuple<std::string, std::string, int, int, int>> runs = {
        {"run-0001", "sm_90a/H200", 3, 1, 2}, {"run-0002", "", 2, 0, 0}, {"run-0003", "sm_89/L40S", 5, 1, 0},
        {"run-0004", "sm_90a/H200", 4, 0, 0}};
    for (const auto& [id, device_class, queued, leased, done] : runs) {
      store.insert_run(sample_run(id));
      if (!device_class.empty()) store.set_run_device_class(id, device_class);
      for (int i = 0; i < queued + leased + done; ++i) {
        CandidateRecord c;
        c.id = id + "-c" + std::to_string(i);
        c.run_id = id;
        c.genome = c.genome_hash = c.id;
        c.seq = i;
        c.op = "seed";
        store.insert_candidate(c);
        if (i >= queued) store.set_candidate_leased(c.id, "l-" + c.id, "w", 0);
        if (i >= queued + leased) store.finish_candidate(c.id, 0, v1::OK, 1.0, 0, true, v1::RESULT_SOURCE_MEASURED);
      }
    }
    store.end_run("run-0004", v1::CANCELLED, v1::STOP_REASON_CANCELLED, "", 0);  // ended: its queue counts no more
  });
  store.transaction([&] {
    EXPECT_EQ(store.count_open_candidates_for_class("sm_90a/H200"), 3 + 1 + 2);
    EXPECT_EQ(store.count_open_candidates_for_class("sm_89/L40S"), 5 + 1 + 2);
    EXPECT_EQ(store.count_open_candidates_for_class("sm_80/A100"), 2);
  });
}

// A worker that times another way (isolated launches, a model's estimate) keys its results apart.
TEST(Store, ToolkitKeyNamesHowTheWorkerTimes) {
  v1::DeviceInfo d;
  d.set_nvrtc_version("13.0");
  d.set_cuda_version("13.0");
  EXPECT_EQ(measurement_key_of(d), "nvrtc 13.0 / cuda 13.0");
  d.set_timing("graph replays of 20+ back-to-back programmatic launches per event pair");
  EXPECT_EQ(measurement_key_of(d), "nvrtc 13.0 / cuda 13.0 / timing: graph replays of 20+ back-to-back "
                           "programmatic launches per event pair");
}

}  // namespace
}  // namespace evo

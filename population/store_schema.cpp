#include "store_schema.h"

#include <string>

#include "store.h"
#include "store_genome_rewrite.h"

namespace evo {
namespace {

const Migration kMigrations[] = {
    // 0 -> 1
    {R"sql(
CREATE TABLE runs (
  id TEXT PRIMARY KEY,
  seed TEXT NOT NULL,
  shapes TEXT NOT NULL,
  generations INTEGER NOT NULL CHECK (generations > 0),
  population INTEGER NOT NULL CHECK (population > 0),
  top_k INTEGER NOT NULL CHECK (top_k > 0),
  strategy TEXT NOT NULL,
  rng_seed INTEGER NOT NULL,
  device_class TEXT NOT NULL DEFAULT '',
  state INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  message TEXT NOT NULL DEFAULT '',
  current_generation INTEGER NOT NULL DEFAULT 0,
  smem_limit INTEGER NOT NULL
);
CREATE TABLE workers (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  device_class TEXT NOT NULL,
  device BLOB NOT NULL,
  registered_ms INTEGER NOT NULL,
  last_seen_ms INTEGER NOT NULL
);
CREATE TABLE candidates (
  id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL REFERENCES runs(id),
  generation INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  genome TEXT NOT NULL,
  genome_hash TEXT NOT NULL,
  op TEXT NOT NULL,
  parents TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('queued', 'leased', 'done')),
  confirmation INTEGER NOT NULL DEFAULT 0,
  lease_id TEXT NOT NULL DEFAULT '',
  lease_worker TEXT NOT NULL DEFAULT '',
  lease_deadline_ms INTEGER NOT NULL DEFAULT 0,
  attempts INTEGER NOT NULL DEFAULT 0,
  first_evaluation_id INTEGER,
  first_worker TEXT NOT NULL DEFAULT '',
  final_evaluation_id INTEGER,
  final_status INTEGER NOT NULL DEFAULT 0,
  fitness_us REAL,
  spread_pct REAL NOT NULL DEFAULT 0,
  elite_eligible INTEGER NOT NULL DEFAULT 0,
  result_source TEXT NOT NULL DEFAULT '',
  UNIQUE (run_id, seq),
  UNIQUE (run_id, genome)
);
CREATE INDEX candidates_by_state ON candidates(run_id, state, seq);
CREATE TABLE leases (
  id TEXT PRIMARY KEY,
  candidate_id TEXT NOT NULL REFERENCES candidates(id),
  worker_id TEXT NOT NULL REFERENCES workers(id),
  issued_ms INTEGER NOT NULL,
  deadline_ms INTEGER NOT NULL,
  confirmation INTEGER NOT NULL,
  outcome TEXT NOT NULL CHECK (outcome IN ('active', 'expired', 'reported'))
);
CREATE INDEX leases_active ON leases(outcome, deadline_ms);
CREATE TABLE evaluations (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  candidate_id TEXT NOT NULL REFERENCES candidates(id),
  lease_id TEXT UNIQUE,
  worker_id TEXT NOT NULL,
  blob BLOB NOT NULL,
  status INTEGER NOT NULL,
  fitness_us REAL,
  estimated INTEGER NOT NULL,
  device_class TEXT NOT NULL,
  is_confirmation INTEGER NOT NULL,
  created_ms INTEGER NOT NULL
);
CREATE INDEX evaluations_by_status ON evaluations(status);
CREATE INDEX evaluations_by_candidate ON evaluations(candidate_id);
CREATE TABLE result_cache (
  genome_hash TEXT NOT NULL,
  device_class TEXT NOT NULL,
  toolkit TEXT NOT NULL,
  evaluation_id INTEGER NOT NULL REFERENCES evaluations(id),
  fitness_us REAL,
  spread_pct REAL NOT NULL,
  confirmed INTEGER NOT NULL,
  PRIMARY KEY (genome_hash, device_class, toolkit)
);
)sql"},
    // 1 -> 2: a time belongs to a problem as much as to a genome. Entries of version 1 did not
    // say which shapes they timed, so they cannot be trusted for any run and are dropped.
    {R"sql(
DROP TABLE result_cache;
CREATE TABLE result_cache (
  genome_hash TEXT NOT NULL,
  problem TEXT NOT NULL,
  device_class TEXT NOT NULL,
  toolkit TEXT NOT NULL,
  evaluation_id INTEGER NOT NULL REFERENCES evaluations(id),
  fitness_us REAL,
  spread_pct REAL NOT NULL,
  confirmed INTEGER NOT NULL,
  PRIMARY KEY (genome_hash, problem, device_class, toolkit)
);
)sql"},
    // 2 -> 3: warm-start genomes of a run, canonical texts ';'-separated (a genome text holds
    // commas). Runs of version 2 had none.
    {R"sql(
ALTER TABLE runs ADD COLUMN start_genomes TEXT NOT NULL DEFAULT '';
)sql"},
    // 3 -> 4: which per-call time ranks a run's candidates. Runs of version 3 ranked by inputs
    // cycled past L2, the only figure there was.
    {R"sql(
ALTER TABLE runs ADD COLUMN fitness_inputs TEXT NOT NULL DEFAULT 'rotated';
)sql"},
    // 4 -> 5: fa_s512_v3's six boolean schedule genes (CP_ASYNC, PV_ASYNC, TMA, STAGE_RELEASE,
    // PINGPONG, QK_AHEAD) became one SCHEDULE gene: every stored genome text and hash is rewritten
    // to today's canonical text (store_genome_rewrite.h).
    {"", rewrite_genome_texts},
    // 5 -> 6: evod's own liveness (the last tick of its lease sweeper: a restart or stall extends
    // open leases by the time evod was away); a submit's client request id (a retried submit
    // returns the run it made; runs of version 5 had none); indexes that keep a report's queries
    // from reading the whole run (elites, a generation's count, a worker's active leases); and a lease
    // outcome 'returned' (a grant its worker never received, given back uncharged), for which the
    // leases table is rebuilt (SQLite cannot change a CHECK in place; nothing references it).
    {R"sql(
CREATE TABLE leases_v6 (
  id TEXT PRIMARY KEY,
  candidate_id TEXT NOT NULL REFERENCES candidates(id),
  worker_id TEXT NOT NULL REFERENCES workers(id),
  issued_ms INTEGER NOT NULL,
  deadline_ms INTEGER NOT NULL,
  confirmation INTEGER NOT NULL,
  outcome TEXT NOT NULL CHECK (outcome IN ('active', 'expired', 'reported', 'returned'))
);
INSERT INTO leases_v6 SELECT id, candidate_id, worker_id, issued_ms, deadline_ms, confirmation, outcome FROM leases;
DROP TABLE leases;
ALTER TABLE leases_v6 RENAME TO leases;
CREATE INDEX leases_active ON leases(outcome, deadline_ms);
CREATE TABLE liveness (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  last_tick_ms INTEGER NOT NULL
);
ALTER TABLE runs ADD COLUMN request_id TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX runs_by_request_id ON runs(request_id) WHERE request_id <> '';
CREATE INDEX candidates_by_generation ON candidates(run_id, generation, state);
CREATE INDEX candidates_elites ON candidates(run_id, elite_eligible, fitness_us, genome) WHERE state = 'done';
CREATE INDEX leases_by_worker ON leases(worker_id, outcome);
)sql"},
    // 6 -> 7: trust from identity. A worker's credential (its hash) and what evod learned of it:
    // measurements its peers agreed or disagreed with, and why it was quarantined. A candidate's
    // second measurement, which a third may have to settle, and whether it was confirmed by the
    // worker that measured it first. The result cache takes only what two workers agreed on;
    // entries of version 6 were taken on one worker's word (or its "estimated" flag) and are
    // dropped, to be measured again.
    {R"sql(
ALTER TABLE workers ADD COLUMN credential_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE workers ADD COLUMN quarantined TEXT NOT NULL DEFAULT '';
ALTER TABLE workers ADD COLUMN agreements INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN disagreements INTEGER NOT NULL DEFAULT 0;
ALTER TABLE candidates ADD COLUMN second_evaluation_id INTEGER;
ALTER TABLE candidates ADD COLUMN second_worker TEXT NOT NULL DEFAULT '';
ALTER TABLE candidates ADD COLUMN self_confirmed INTEGER NOT NULL DEFAULT 0;
DELETE FROM result_cache;
)sql"},
    // 7 -> 8: budgets. A run may stop at a wall time from its first lease, a count of
    // evaluations or a number of generations without a better best time, and says why it
    // stopped (the StopReason's label; empty for runs that ended before) and when. Its GPU
    // gates' time, summed as reports arrive, gives its throughput (0 for what came before).
    {R"sql(
ALTER TABLE runs ADD COLUMN budget_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN max_evals INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN patience INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN started_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN stop_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN ended_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN gpu_ms REAL NOT NULL DEFAULT 0;
)sql"},
    // 8 -> 9: enrolments. The operator of evod's host enrols a worker (or a host's workers) under
    // a name and a key (kept hashed); a worker that registers with the key belongs to the
    // enrolment, whose refusal (a quarantine, or a revocation) holds for every registration under
    // it. Workers registered before have none: each is a party of its own, as it was.
    {R"sql(
CREATE TABLE enrolments (
  name TEXT PRIMARY KEY,
  key_hash TEXT NOT NULL UNIQUE,
  created_ms INTEGER NOT NULL,
  refused TEXT NOT NULL DEFAULT ''
);
ALTER TABLE workers ADD COLUMN enrolment TEXT NOT NULL DEFAULT '';
CREATE INDEX workers_by_enrolment ON workers(enrolment) WHERE enrolment <> '';
)sql"},
    // 9 -> 10: fa_s512_v3 gained the PACK_GQA gene (grouped-query heads packed into one block's
    // rows). Every stored genome text and hash is rewritten to today's canonical text, which names
    // it (PACK_GQA=0: what every earlier genome did).
    {"", rewrite_genome_texts},
    // 10 -> 11: deferred confirmation. A would-be elite's confirmation waits until its
    // generation's first measurements are in and ranked; only those still in the top k are
    // confirmed (the others end on their one measurement, as a candidate outside the elites does).
    {R"sql(
ALTER TABLE candidates ADD COLUMN awaits_ranking INTEGER NOT NULL DEFAULT 0;
)sql"},
    // 11 -> 12: fa_s512_v3 gained the LONGEST_FIRST gene (causal row tiles in longest-first order
    // across heads). Every stored genome text and hash is rewritten to today's canonical text,
    // which names it (LONGEST_FIRST=0: what every earlier genome did).
    {"", rewrite_genome_texts},
    // 12 -> 13: a target time. A run may end once an elite is confirmed at or under a fitness
    // its submit named (0: none, as every earlier run).
    {R"sql(
ALTER TABLE runs ADD COLUMN target_us REAL NOT NULL DEFAULT 0;
)sql"},
};
constexpr int kMigrationCount = sizeof(kMigrations) / sizeof(kMigrations[0]);
static_assert(kMigrationCount == Store::kSchemaVersion, "one migration per schema version");

}  // namespace

const Migration& schema_migration(int from_version) {
  if (from_version < 0 || from_version >= kMigrationCount)
    throw StoreError("no migration from schema version " + std::to_string(from_version));
  return kMigrations[from_version];
}

}  // namespace evo

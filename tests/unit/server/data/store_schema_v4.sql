-- The store's schema at version 4, the last before the SCHEDULE gene: its four migrations as
-- the old build ran them, one after another, and their schema_version rows.

-- 0 -> 1
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

-- 1 -> 2
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

-- 2 -> 3
ALTER TABLE runs ADD COLUMN start_genomes TEXT NOT NULL DEFAULT '';

-- 3 -> 4
ALTER TABLE runs ADD COLUMN fitness_inputs TEXT NOT NULL DEFAULT 'rotated';

CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version (version) VALUES (1), (2), (3), (4);

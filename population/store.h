#pragma once
// The SQLite store of evod: runs, candidates (with lineage and leases), evaluations, workers and
// the result cache. All of the coordinator's state lives here, so that a coordinator killed at any
// instant restarts from the file with nothing lost. WAL journal, busy_timeout, foreign keys on,
// numbered migrations in `schema_version`. Every state change is one transaction (transaction());
// every statement is prepared with bound parameters.
//
// The Store knows rows, not policy: which candidate to lease, when to breed, what enters the
// elites is the coordinator's business (server/).
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "evo/evo.pb.h"
#include "store_sqlite.h"

namespace evo {

struct RunRecord {
  std::string id;
  std::string seed;
  std::vector<std::string> shapes;  // canonical shape texts ("1x8x512x64", "...:causal")
  int generations = 0;
  int population = 0;
  int top_k = 0;
  v1::SearchStrategy strategy = v1::SEARCH_STRATEGY_EVOLVE;
  uint64_t rng_seed = 1;
  std::string device_class;         // empty until the first worker that leases fixes it
  int state = v1::QUEUED;           // v1::RunState
  int64_t created_ms = 0;
  std::string message;
  int current_generation = 0;
  int64_t smem_limit = 0;           // what the strategy checks genomes against
  std::vector<std::string> start_genomes;  // canonical genome texts generation 0 starts from
  // Which per-call time is the fitness: inputs cycled past L2, or one input set left in L2
  // (ShapeResult.resident_us).
  v1::FitnessInputs fitness_inputs = v1::FITNESS_INPUTS_ROTATED;
  // The submitting client's id for this submit (empty: none given): a retried submit with the
  // same id returns this run instead of making another.
  std::string request_id;
  // Budgets (0: none): wall time from the first lease, candidates evaluated, generations in a
  // row without a better best time. The run ends DONE at the first one spent.
  int64_t budget_ms = 0;
  int max_evals = 0;
  int patience = 0;
  double target_us = 0;    // ends once an elite is confirmed at or under it; 0: none
  int64_t started_ms = 0;  // its first lease; 0 while QUEUED
  int64_t ended_ms = 0;    // when it ended; 0 while it runs
  double gpu_ms = 0;       // its evaluations' GPU gates (correctness, sanitizer, timing), summed
  v1::StopReason stop_reason = v1::STOP_REASON_UNSPECIFIED;  // why it ended
};

struct CandidateRecord {
  std::string id;
  std::string run_id;
  int generation = 0;
  int seq = 0;                      // order of proposal within the run
  std::string genome;               // canonical text
  std::string genome_hash;
  std::string op;                   // lineage: the operator that made it
  std::string parents;              // lineage: parents' canonical texts, ';'-separated
  v1::CandidateState state = v1::CANDIDATE_STATE_QUEUED;  // its label is the state column
  bool confirmation = false;        // waiting for (or holding) its second, confirming measurement
  std::string lease_id;             // current lease, empty when none
  std::string lease_worker;
  int64_t lease_deadline_ms = 0;
  int attempts = 0;                 // leases that expired unreported
  std::optional<int64_t> first_evaluation_id;
  std::string first_worker;         // who measured it first (a confirmation prefers another)
  // The confirming measurement, kept while a third settles a disagreement between the two.
  std::optional<int64_t> second_evaluation_id;
  std::string second_worker;
  bool self_confirmed = false;      // confirmed by first_worker itself: no other worker was live
  // Its first measurement would enter the elites; whether it is confirmed waits for its
  // generation's first measurements to be ranked (queued, but not leased, meanwhile).
  bool awaits_ranking = false;
  // Final result, once state is kDone.
  std::optional<int64_t> final_evaluation_id;
  int final_status = v1::EVAL_STATUS_UNSPECIFIED;
  std::optional<double> fitness_us;  // nullopt: failed a gate
  double spread_pct = 0;
  bool elite_eligible = false;       // confirmed by a second measurement: may appear among the elites
  v1::ResultSource result_source = v1::RESULT_SOURCE_UNSPECIFIED;  // set once done
};

// kReturned: granted but never received by its worker (its next lease request did not name it),
// given back to the queue at once without counting as an attempt.
enum class LeaseOutcome { kActive, kExpired, kReported, kReturned };

struct LeaseRecord {
  std::string id;
  std::string candidate_id;
  std::string worker_id;
  int64_t issued_ms = 0;
  int64_t deadline_ms = 0;
  bool confirmation = false;
  LeaseOutcome outcome = LeaseOutcome::kActive;
};

struct EvaluationRecord {
  int64_t id = 0;
  std::string candidate_id;
  std::string lease_id;             // empty for a result copied from the cache
  std::string worker_id;
  bool is_confirmation = false;
  int64_t created_ms = 0;
  v1::Evaluation evaluation;
};

struct WorkerRecord {
  std::string id;
  std::string name;
  v1::DeviceInfo device;
  int64_t registered_ms = 0;
  int64_t last_seen_ms = 0;
  std::string credential_hash;      // hex SHA-256 of the credential evod issued it at registration
  std::string quarantined;          // why it is no longer trusted; empty while it is
  int agreements = 0;               // its measurements that a peer's agreed with
  int disagreements = 0;            // outvoted by two agreeing peers, or refused as implausible
  std::string enrolment;            // the enrolment it registered under; empty for none
};

// An enrolment: a worker (or a host's workers) the operator of evod's host admitted under a name
// (`evod enrol NAME`), with the hash of the key its registrations present.
struct EnrolmentRecord {
  std::string name;
  std::string key_hash;             // hex SHA-256 of the key
  int64_t created_ms = 0;           // when the key was made (a new key for the name replaces it)
  std::string refused;              // why its registrations are refused (quarantine, revocation); empty while admitted
};

struct CacheEntry {
  std::string genome_hash;
  std::string problem;              // the run's shapes, joined: a time is only valid for its problem
  std::string device_class;
  // How it was measured: compiler and runtime versions, timing method, template fingerprint
  // (coordinator's cache_measurement_key). The column keeps its first name, toolkit.
  std::string toolkit;
  int64_t evaluation_id = 0;
  std::optional<double> fitness_us;
  double spread_pct = 0;
  bool confirmed = false;           // the fitness is the mean of two workers' agreeing measurements
};

// How far a run has come: its candidates, those done, and those done without a fitness (a gate
// refused them).
struct CandidateCounts {
  int total = 0;
  int done = 0;
  int refused = 0;
};

struct StoreOptions {
  // 0: no limit. Otherwise the database may not grow past this many bytes: writes beyond it fail
  // with StoreFault::kFull, exactly as on a full disk, and what is stored stays as it was.
  int64_t max_bytes = 0;
  // An existing file of 0 bytes is refused (a truncated database would otherwise start over as a
  // new, empty one) unless this is set (evod --init). A missing file is always created.
  bool init = false;
};

class Store {
 public:
  static constexpr int kSchemaVersion = 13;

  // Opens or creates the database file, checks it (PRAGMA quick_check) and migrates it to
  // kSchemaVersion. Throws StoreError with one line for people when the directory does not exist,
  // the file is read-only, empty (without options.init), not a database or corrupt; a file it
  // refuses is left byte for byte as it was.
  explicit Store(const std::string& path, const StoreOptions& options = StoreOptions());

  int schema_version();
  std::string journal_mode();

  // Runs fn inside BEGIN IMMEDIATE ... COMMIT; any exception rolls everything back and is
  // rethrown. Transactions are serialized by a mutex and do not nest. A storage fault is logged once
  // when it starts and once when a write succeeds again, not once per call. Two faults stop every
  // later transaction until evod restarts (StoreFault::kUnavailable or kCorrupt, logged once): the
  // database, WAL or -shm file removed or replaced under the process (what the WAL still holds is
  // first copied into the database file when that is still in place), and a damaged page.
  void transaction(const std::function<void()>& fn);

  // A deterministic text dump of every table but evod's liveness clock, for tests that prove a bad
  // input changed nothing.
  std::string dump();

  // ---- runs
  std::string next_run_id();
  void insert_run(const RunRecord& run);
  std::optional<RunRecord> get_run(const std::string& id);
  std::optional<std::string> newest_run_id();
  // The run a submit with this client request id made; nullopt for none (or an empty id).
  std::optional<RunRecord> run_of_request(const std::string& request_id);
  std::vector<RunRecord> list_runs();
  // Runs that hand out work: queued or running.
  std::vector<RunRecord> active_runs();
  // QUEUED -> RUNNING at its first lease, which starts its wall-time budget.
  void set_run_started(const std::string& id, int64_t now_ms);
  // DONE, CANCELLED or FAILED, with why (the reason's label is stored) and the words for people.
  void end_run(const std::string& id, v1::RunState state, v1::StopReason why, const std::string& message,
               int64_t now_ms);
  // Adds an evaluation's GPU gates' time to its run's.
  void add_run_gpu_ms(const std::string& id, double ms);
  void set_run_device_class(const std::string& id, const std::string& device_class);
  void set_run_generation(const std::string& id, int generation);

  // ---- candidates
  void insert_candidate(const CandidateRecord& c);
  std::optional<CandidateRecord> get_candidate(const std::string& id);
  std::vector<CandidateRecord> candidates_of_run(const std::string& run_id);  // seq order
  // The first `limit` queued candidates, in seq order.
  std::vector<CandidateRecord> queued_candidates(const std::string& run_id, int limit);
  // The run's k best done, elite-eligible candidates with a fitness: fitness order, ties by
  // genome text (an index read, not a scan of the run).
  std::vector<CandidateRecord> elite_candidates(const std::string& run_id, int k);
  int count_candidates(const std::string& run_id, int generation, bool only_done);
  // The candidates queued or leased (the work out or waiting) of the active runs a worker of the
  // class may lease: those of that class and those not yet fixed to one. One query, however many
  // runs are active.
  int count_open_candidates_for_class(const std::string& device_class);
  CandidateCounts count_candidates_of_run(const std::string& run_id);
  void set_candidate_leased(const std::string& id, const std::string& lease_id,
                            const std::string& worker_id, int64_t deadline_ms);
  // Back to the queue after an unreported lease; attempts counts it when lease_expired.
  void requeue_candidate(const std::string& id, bool lease_expired);
  // First measurement of a would-be elite recorded; it waits for its generation's ranking.
  void await_ranking(const std::string& id, int64_t first_evaluation_id, const std::string& first_worker);
  // Candidates of the generation whose first measurement is not in yet (queued or leased for it).
  int count_first_measurements_pending(const std::string& run_id, int generation);
  std::vector<CandidateRecord> candidates_awaiting_ranking(const std::string& run_id, int generation);
  // Ranked into the top k: its confirmation may be leased.
  void release_for_confirmation(const std::string& id);
  // The run's confirmations under way: released to be confirmed (queued, leased or settling),
  // not those still awaiting their generation's ranking.
  std::vector<CandidateRecord> open_confirmations(const std::string& run_id);
  // The first two measurements disagreed: a third, by another worker, is queued next.
  void await_third_measurement(const std::string& id, int64_t second_evaluation_id,
                               const std::string& second_worker);
  void set_self_confirmed(const std::string& id);
  void finish_candidate(const std::string& id, int64_t final_evaluation_id, int final_status,
                        std::optional<double> fitness_us, double spread_pct, bool elite_eligible,
                        v1::ResultSource result_source);

  // ---- leases
  void insert_lease(const LeaseRecord& lease);
  std::optional<LeaseRecord> get_lease(const std::string& id);
  void set_lease_deadline(const std::string& id, int64_t deadline_ms);
  void set_lease_outcome(const std::string& id, LeaseOutcome outcome);
  std::vector<LeaseRecord> expired_leases(int64_t now_ms);
  // Moves every active lease's deadline on by by_ms, and to at least at_least_ms; returns how
  // many leases are active.
  int shift_active_leases(int64_t by_ms, int64_t at_least_ms);
  // The worker's active leases, by id.
  std::vector<LeaseRecord> active_leases_of(const std::string& worker_id);
  // ---- evod's own liveness: the last tick its lease sweeper recorded (nullopt: none yet).
  std::optional<int64_t> last_liveness_tick();
  void record_liveness_tick(int64_t now_ms);

  // ---- evaluations
  int64_t insert_evaluation(const EvaluationRecord& e);
  std::optional<EvaluationRecord> get_evaluation(int64_t id);
  std::optional<EvaluationRecord> evaluation_by_lease(const std::string& lease_id);

  // ---- workers
  void upsert_worker(const WorkerRecord& w);
  std::optional<WorkerRecord> get_worker(const std::string& id);
  void touch_worker(const std::string& id, int64_t now_ms);
  // One more measurement of the worker's that a peer agreed with (agreed) or outvoted.
  void count_worker_verdict(const std::string& id, bool agreed);
  void quarantine_worker(const std::string& id, const std::string& reason);
  // ---- enrolments
  // A new enrolment, or a new key for one (its refusal, if any, stays).
  void put_enrolment(const EnrolmentRecord& e);
  std::optional<EnrolmentRecord> enrolment_with_key(const std::string& key_hash);
  std::optional<EnrolmentRecord> get_enrolment(const std::string& name);
  std::vector<EnrolmentRecord> enrolments();
  // Every worker registered under the enrolment.
  std::vector<WorkerRecord> workers_of_enrolment(const std::string& name);
  // Refuses the enrolment (its later registrations) and quarantines its workers, for reason.
  void quarantine_enrolment(const std::string& name, const std::string& reason);
  // Admits it again, and lifts its workers' quarantines.
  void release_enrolment(const std::string& name);
  // Trusted (not quarantined) workers of a device class seen since since_ms, less those of the
  // parties named (a party: "enrolment:NAME" for an enrolled worker, else the worker id).
  int count_live_workers(const std::string& device_class, int64_t since_ms,
                         const std::vector<std::string>& except_parties);
  // Trusted workers of any class seen since since_ms (what a run whose class is not fixed yet can get).
  int count_live_workers_of_any_class(int64_t since_ms);
  // Every worker seen since since_ms, most recently seen first.
  std::vector<WorkerRecord> workers_seen_since(int64_t since_ms);
  // Active leases per worker id (workers without one are absent).
  std::map<std::string, int> active_lease_counts();

  // ---- result cache: a genome measured on a problem, device class and toolkit is not measured again.
  std::optional<CacheEntry> cache_get(const std::string& genome_hash, const std::string& problem,
                                      const std::string& device_class, const std::string& toolkit);
  void cache_put(const CacheEntry& entry);

 private:
  void open_checked(const StoreOptions& options);
  void migrate();
  void note_storage_fault(const StoreError& e);
  void note_storage_ok();
  // Throws the refusal when writes are stopped for good, or stops them now when a file moved.
  void check_writable();
  // Stops every later transaction with error (logged once).
  void stop_writes(const StoreError& error);

  std::string path_;
  std::mutex mutex_;  // one transaction at a time on the one connection
  std::unique_ptr<SqliteConnection> db_;
  bool storage_failing_ = false;         // guarded by mutex_
  int64_t clock_changes_ = 0;            // liveness rows written by the open transaction
  std::unique_ptr<StoreError> stopped_;  // guarded by mutex_: why writes are stopped for good
};

// How a worker measures, as the result cache keys it: NVRTC and CUDA runtime versions, and how it
// times (a time measured one way never answers for another).
std::string measurement_key_of(const v1::DeviceInfo& device);

// Milliseconds since the Unix epoch.
int64_t now_unix_ms();

}  // namespace evo

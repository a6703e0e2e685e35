#include "store.h"

#include <sys/stat.h>

#include <chrono>
#include <sstream>
#include <type_traits>

#include <spdlog/spdlog.h>

#include "store_schema.h"
#include "wire_labels.h"

namespace evo {

namespace {

std::string join(const std::vector<std::string>& parts, char sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, sep)) out.push_back(part);
  return out;
}

// A label the store keeps in a text column (wire_labels.h), as its enum. A label no build of evo
// wrote there is a StoreError naming the row, rather than a guess.
template <class E>
E stored_label(const std::string& text, const char* column, const std::string& row_id) {
  if (const auto value = parse_label<E>(text)) return *value;
  throw StoreError(std::string(column) + " of " + row_id + " is '" + text + "', not one of " + label_list<E>());
}

const char* outcome_text(LeaseOutcome o) {
  switch (o) {
    case LeaseOutcome::kActive: return "active";
    case LeaseOutcome::kExpired: return "expired";
    case LeaseOutcome::kReported: return "reported";
    case LeaseOutcome::kReturned: return "returned";
  }
  return "active";
}

LeaseOutcome parse_outcome(const std::string& s) {
  if (s == "expired") return LeaseOutcome::kExpired;
  if (s == "reported") return LeaseOutcome::kReported;
  if (s == "returned") return LeaseOutcome::kReturned;
  return LeaseOutcome::kActive;
}

// Every row a bound statement yields, each read by `read`.
template <class Read>
auto all_rows(SqliteStatement& s, Read read) {
  std::vector<std::decay_t<decltype(read(s))>> out;
  while (s.step()) out.push_back(read(s));
  return out;
}

// The one number a bound SELECT COUNT(*) yields.
int count_of(SqliteStatement& s) {
  s.step();
  return static_cast<int>(s.column_int(0));
}

constexpr const char* kWorkerColumns =
    "id, name, device, registered_ms, last_seen_ms, credential_hash, quarantined, agreements, disagreements, "
    "enrolment";

WorkerRecord read_worker(const SqliteStatement& s) {
  WorkerRecord w;
  w.id = s.column_text(0);
  w.name = s.column_text(1);
  w.device.ParseFromString(s.column_blob(2));
  w.registered_ms = s.column_int(3);
  w.last_seen_ms = s.column_int(4);
  w.credential_hash = s.column_text(5);
  w.quarantined = s.column_text(6);
  w.agreements = static_cast<int>(s.column_int(7));
  w.disagreements = static_cast<int>(s.column_int(8));
  w.enrolment = s.column_text(9);
  return w;
}

EnrolmentRecord read_enrolment(const SqliteStatement& s) {
  return {s.column_text(0), s.column_text(1), s.column_int(2), s.column_text(3)};
}

constexpr const char* kRunColumns =
    "id, seed, shapes, generations, population, top_k, strategy, rng_seed, device_class, state, "
    "created_ms, message, current_generation, smem_limit, start_genomes, fitness_inputs, request_id, "
    "budget_ms, max_evals, patience, started_ms, stop_reason, ended_ms, gpu_ms, target_us";

RunRecord read_run(const SqliteStatement& s) {
  RunRecord r;
  r.id = s.column_text(0);
  r.seed = s.column_text(1);
  r.shapes = split(s.column_text(2), ',');
  r.generations = static_cast<int>(s.column_int(3));
  r.population = static_cast<int>(s.column_int(4));
  r.top_k = static_cast<int>(s.column_int(5));
  r.strategy = stored_label<v1::SearchStrategy>(s.column_text(6), "strategy", r.id);
  r.rng_seed = static_cast<uint64_t>(s.column_int(7));
  r.device_class = s.column_text(8);
  r.state = static_cast<int>(s.column_int(9));
  r.created_ms = s.column_int(10);
  r.message = s.column_text(11);
  r.current_generation = static_cast<int>(s.column_int(12));
  r.smem_limit = s.column_int(13);
  r.start_genomes = split(s.column_text(14), ';');
  r.fitness_inputs = stored_label<v1::FitnessInputs>(s.column_text(15), "fitness_inputs", r.id);
  r.request_id = s.column_text(16);
  r.budget_ms = s.column_int(17);
  r.max_evals = static_cast<int>(s.column_int(18));
  r.patience = static_cast<int>(s.column_int(19));
  r.started_ms = s.column_int(20);
  // Empty for a run that ended before the column, or is still running.
  r.stop_reason = parse_label<v1::StopReason>(s.column_text(21)).value_or(v1::STOP_REASON_UNSPECIFIED);
  r.ended_ms = s.column_int(22);
  r.gpu_ms = s.column_double(23);
  r.target_us = s.column_double(24);
  return r;
}

constexpr const char* kCandidateColumns =
    "id, run_id, generation, seq, genome, genome_hash, op, parents, state, confirmation, lease_id, "
    "lease_worker, lease_deadline_ms, attempts, first_evaluation_id, first_worker, "
    "final_evaluation_id, final_status, fitness_us, spread_pct, elite_eligible, result_source, "
    "second_evaluation_id, second_worker, self_confirmed, awaits_ranking";

CandidateRecord read_candidate(const SqliteStatement& s) {
  CandidateRecord c;
  c.id = s.column_text(0);
  c.run_id = s.column_text(1);
  c.generation = static_cast<int>(s.column_int(2));
  c.seq = static_cast<int>(s.column_int(3));
  c.genome = s.column_text(4);
  c.genome_hash = s.column_text(5);
  c.op = s.column_text(6);
  c.parents = s.column_text(7);
  c.state = stored_label<v1::CandidateState>(s.column_text(8), "state", c.id);
  c.confirmation = s.column_int(9) != 0;
  c.lease_id = s.column_text(10);
  c.lease_worker = s.column_text(11);
  c.lease_deadline_ms = s.column_int(12);
  c.attempts = static_cast<int>(s.column_int(13));
  if (!s.column_is_null(14)) c.first_evaluation_id = s.column_int(14);
  c.first_worker = s.column_text(15);
  if (!s.column_is_null(16)) c.final_evaluation_id = s.column_int(16);
  c.final_status = static_cast<int>(s.column_int(17));
  c.fitness_us = s.column_optional_double(18);
  c.spread_pct = s.column_double(19);
  c.elite_eligible = s.column_int(20) != 0;
  const std::string source = s.column_text(21);  // empty until done
  if (!source.empty()) c.result_source = stored_label<v1::ResultSource>(source, "result_source", c.id);
  if (!s.column_is_null(22)) c.second_evaluation_id = s.column_int(22);
  c.second_worker = s.column_text(23);
  c.self_confirmed = s.column_int(24) != 0;
  c.awaits_ranking = s.column_int(25) != 0;
  return c;
}

constexpr const char* kLeaseColumns =
    "id, candidate_id, worker_id, issued_ms, deadline_ms, confirmation, outcome";

LeaseRecord read_lease(const SqliteStatement& s) {
  LeaseRecord l;
  l.id = s.column_text(0);
  l.candidate_id = s.column_text(1);
  l.worker_id = s.column_text(2);
  l.issued_ms = s.column_int(3);
  l.deadline_ms = s.column_int(4);
  l.confirmation = s.column_int(5) != 0;
  l.outcome = parse_outcome(s.column_text(6));
  return l;
}

EvaluationRecord read_evaluation(const SqliteStatement& s) {
  EvaluationRecord e;
  e.id = s.column_int(0);
  e.candidate_id = s.column_text(1);
  e.lease_id = s.column_text(2);
  e.worker_id = s.column_text(3);
  e.is_confirmation = s.column_int(4) != 0;
  e.created_ms = s.column_int(5);
  if (!e.evaluation.ParseFromString(s.column_blob(6)))
    throw StoreError("evaluation " + std::to_string(e.id) + " does not parse");
  fill_gate_forms(e.evaluation);  // a blob from before the gate enums carries their labels only
  return e;
}

bool directory_exists(const std::string& dir) {
  struct stat st {};
  return ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string measurement_key_of(const v1::DeviceInfo& device) {
  std::string t = "nvrtc " + device.nvrtc_version() + " / cuda " + device.cuda_version();
  if (!device.timing().empty()) t += " / timing: " + device.timing();
  return t;
}

Store::Store(const std::string& path, const StoreOptions& options) : path_(path) {
  auto slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  if (!directory_exists(dir))
    throw StoreError("database directory '" + dir + "' does not exist (for --db " + path + ")");
  struct stat st {};
  if (!options.init && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0)
    throw StoreError("database '" + path + "' is an empty file (0 bytes): a truncated database is not started "
                     "over silently; to make a new database in it, start evod with --init");
  db_ = std::make_unique<SqliteConnection>(path);
  // SQLite quietly falls back to reading when it may not write; evod cannot work that way.
  if (db_->read_only())
    throw StoreError("database '" + path + "' is read-only (file permissions or a read-only mount): evod must write it",
                     StoreFault::kReadOnly);
  try {
    open_checked(options);
  } catch (const StoreError& e) {
    // A file evod refuses stays as it was found: no checkpoint of its WAL into it on close.
    db_->leave_file_untouched_on_close();
    throw StoreError("cannot use database '" + path + "': " + e.what(), e.fault());
  }
}

void Store::open_checked(const StoreOptions& options) {
  db_->exec("PRAGMA busy_timeout = 5000");
  // Before anything writes: a file that is not a database fails here, a damaged one is named here.
  const auto started = std::chrono::steady_clock::now();
  std::vector<std::string> problems = db_->quick_check(3);
  if (!problems.empty()) {
    std::string joined;
    for (const auto& p : problems) joined += (joined.empty() ? "" : "; ") + p;
    throw StoreError("the file is corrupt (PRAGMA quick_check: " + joined +
                         "); evod will not write into it: restore it from a backup, or move it away to start anew",
                     StoreFault::kCorrupt);
  }
  spdlog::info("event=store_checked db={} quick_check=ok ms={}", path_,
               std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started)
                   .count());
  db_->exec("PRAGMA journal_mode = WAL");
  db_->exec("PRAGMA foreign_keys = ON");
  // WAL with synchronous=FULL: a committed transaction survives a power cut, not only a SIGKILL.
  db_->exec("PRAGMA synchronous = FULL");
  if (options.max_bytes > 0) db_->limit_size(options.max_bytes);
  migrate();
  // The WAL and -shm exist once the migration's transaction ran; from now on they must stay.
  db_->remember_journal_files();
}

void Store::migrate() {
  std::lock_guard<std::mutex> lock(mutex_);
  db_->exec("BEGIN IMMEDIATE");
  try {
    db_->exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)");
    int version = 0;
    {
      auto s = db_->prepare("SELECT MAX(version) FROM schema_version");
      if (s.step() && !s.column_is_null(0)) version = static_cast<int>(s.column_int(0));
    }
    if (version > kSchemaVersion)
      throw StoreError("schema version " + std::to_string(version) + " is newer than this evod (" +
                       std::to_string(kSchemaVersion) + ")");
    for (int v = version; v < kSchemaVersion; ++v) {
      const Migration& m = schema_migration(v);
      if (*m.sql) db_->exec(m.sql);
      if (m.rewrite) m.rewrite(*db_);
      db_->prepare("INSERT INTO schema_version (version) VALUES (?)").bind(1, v + 1).run();
      spdlog::info("event=store_migrated to_version={}", v + 1);
    }
    db_->exec("COMMIT");
  } catch (...) {
    db_->exec("ROLLBACK");
    throw;
  }
}

int Store::schema_version() {
  std::lock_guard<std::mutex> lock(mutex_);
  auto s = db_->prepare("SELECT MAX(version) FROM schema_version");
  return s.step() ? static_cast<int>(s.column_int(0)) : 0;
}

std::string Store::journal_mode() {
  std::lock_guard<std::mutex> lock(mutex_);
  auto s = db_->prepare("PRAGMA journal_mode");
  return s.step() ? s.column_text(0) : std::string();
}

void Store::note_storage_fault(const StoreError& e) {
  if (e.fault() == StoreFault::kCorrupt) return stop_writes(e);
  if (stopped_ || e.fault() == StoreFault::kOther || storage_failing_) return;
  storage_failing_ = true;
  spdlog::error("event=storage_failed fault={} db={} error=\"{}\" (each write that meets it fails; reads go on; "
                "logged once until a write succeeds)",
                to_string(e.fault()), path_, e.what());
}

void Store::note_storage_ok() {
  if (!storage_failing_) return;
  storage_failing_ = false;
  spdlog::info("event=storage_recovered db={}", path_);
}

void Store::stop_writes(const StoreError& error) {
  if (stopped_) return;
  stopped_ = std::make_unique<StoreError>(error);
  spdlog::error("event=storage_failed fault={} db={} error=\"{}\" (every write is refused until evod restarts; "
                "logged once)",
                to_string(error.fault()), path_, error.what());
}

void Store::check_writable() {
  if (stopped_) throw *stopped_;
  auto moved = db_->moved_file();
  if (!moved) return;
  // SQLite would keep writing into the orphaned file, and every write would be lost. What is
  // committed but still only in the WAL is copied into the database file while that is in place.
  const bool database_file = moved->rfind("database file", 0) == 0;
  std::string what_next = database_file ? " (restore it and restart evod)" : "";
  if (!database_file) {
    bool copied = false;
    try {
      copied = db_->checkpoint();
    } catch (const StoreError& e) {
      spdlog::debug("event=store_checkpoint_failed error=\"{}\"", e.what());
    }
    what_next = copied ? "; what was committed before is in the database file (checkpointed; restart evod)"
                   : "; copying what the WAL held into the database file did not finish (restart evod; check "
                     "the file with PRAGMA integrity_check)";
  }
  stop_writes(StoreError(
      *moved + " was removed or replaced while evod was running; nothing more is written" + what_next,
      StoreFault::kUnavailable));
  throw *stopped_;
}

void Store::transaction(const std::function<void()>& fn) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopped_) throw *stopped_;
  try {
    check_writable();
    const int64_t changes_before = db_->total_changes();
    clock_changes_ = 0;
    db_->exec("BEGIN IMMEDIATE");
    try {
      fn();
      db_->exec("COMMIT");
    } catch (...) {
      try {
        db_->exec("ROLLBACK");
      } catch (const StoreError& e) {
        // After an I/O error SQLite may have rolled back already; that is not a second problem.
        spdlog::debug("event=store_rollback_failed error=\"{}\"", e.what());
      }
      throw;
    }
    // Only a transaction that wrote proves the storage works again (reads succeed on a full disk),
    // and not by rewriting the liveness clock in place, which a full disk still allows.
    if (db_->total_changes() - changes_before > clock_changes_) note_storage_ok();
  } catch (const StoreError& e) {
    note_storage_fault(e);
    throw;
  }
}

std::string Store::dump() {
  std::lock_guard<std::mutex> lock(mutex_);
  // Table names are fixed here, never input; each is dumped in a stable order, every column. The
  // liveness row is left out: a running evod rewrites that clock every tick, so it is not data a
  // refused request could have changed.
  static const char* const kQueries[] = {
      "SELECT * FROM schema_version ORDER BY version",
      "SELECT * FROM runs ORDER BY id",
      "SELECT * FROM workers ORDER BY id",
      "SELECT * FROM candidates ORDER BY id",
      "SELECT * FROM leases ORDER BY id",
      "SELECT * FROM evaluations ORDER BY id",
      "SELECT * FROM result_cache ORDER BY genome_hash, problem, device_class, toolkit",
      "SELECT * FROM enrolments ORDER BY name",
  };
  std::string out;
  for (const char* q : kQueries) {
    out += q;
    out += '\n';
    auto s = db_->prepare(q);
    int columns = s.column_count();
    while (s.step()) {
      for (int c = 0; c < columns; ++c) {
        if (c) out += '|';
        out += s.column_is_null(c) ? std::string("NULL") : s.column_blob(c);
      }
      out += '\n';
    }
  }
  return out;
}

// ---------------------------------------------------------------- runs

std::string Store::next_run_id() {
  auto s = db_->prepare("SELECT COUNT(*) FROM runs");
  s.step();
  int64_t n = s.column_int(0) + 1;
  for (;; ++n) {
    char id[32];
    std::snprintf(id, sizeof id, "run-%04lld", static_cast<long long>(n));
    auto exists = db_->prepare("SELECT 1 FROM runs WHERE id = ?");
    exists.bind(1, std::string(id));
    if (!exists.step()) return id;
  }
}

void Store::insert_run(const RunRecord& r) {
  auto s = db_->prepare(
      "INSERT INTO runs (id, seed, shapes, generations, population, top_k, strategy, rng_seed, "
      "device_class, state, created_ms, message, current_generation, smem_limit, start_genomes, "
      "fitness_inputs, request_id, budget_ms, max_evals, patience, started_ms, stop_reason, target_us) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  s.bind(1, r.id).bind(2, r.seed).bind(3, join(r.shapes, ',')).bind(4, r.generations)
      .bind(5, r.population).bind(6, r.top_k).bind(7, label(r.strategy))
      .bind(8, static_cast<int64_t>(r.rng_seed)).bind(9, r.device_class).bind(10, r.state)
      .bind(11, r.created_ms).bind(12, r.message).bind(13, r.current_generation)
      .bind(14, r.smem_limit).bind(15, join(r.start_genomes, ';')).bind(16, label(r.fitness_inputs))
      .bind(17, r.request_id).bind(18, r.budget_ms).bind(19, r.max_evals).bind(20, r.patience)
      .bind(21, r.started_ms).bind(22, label(r.stop_reason)).bind(23, r.target_us);
  s.run();
}

std::optional<RunRecord> Store::get_run(const std::string& id) {
  auto s = db_->prepare(std::string("SELECT ") + kRunColumns + " FROM runs WHERE id = ?");
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return read_run(s);
}

std::optional<RunRecord> Store::run_of_request(const std::string& request_id) {
  if (request_id.empty()) return std::nullopt;
  auto s = db_->prepare(std::string("SELECT ") + kRunColumns + " FROM runs WHERE request_id = ?");
  s.bind(1, request_id);
  if (!s.step()) return std::nullopt;
  return read_run(s);
}

std::optional<std::string> Store::newest_run_id() {
  auto s = db_->prepare("SELECT id FROM runs ORDER BY created_ms DESC, id DESC LIMIT 1");
  if (!s.step()) return std::nullopt;
  return s.column_text(0);
}

std::vector<RunRecord> Store::list_runs() {
  auto s = db_->prepare(std::string("SELECT ") + kRunColumns + " FROM runs ORDER BY created_ms, id");
  return all_rows(s, read_run);
}

std::vector<RunRecord> Store::active_runs() {
  auto s = db_->prepare(std::string("SELECT ") + kRunColumns +
                        " FROM runs WHERE state IN (?, ?) ORDER BY created_ms, id");
  s.bind(1, static_cast<int>(v1::QUEUED)).bind(2, static_cast<int>(v1::RUNNING));
  return all_rows(s, read_run);
}

void Store::set_run_started(const std::string& id, int64_t now_ms) {
  db_->prepare("UPDATE runs SET state = ?, started_ms = ? WHERE id = ?")
      .bind(1, static_cast<int>(v1::RUNNING)).bind(2, now_ms).bind(3, id).run();
}

void Store::end_run(const std::string& id, v1::RunState state, v1::StopReason why, const std::string& message,
                    int64_t now_ms) {
  db_->prepare("UPDATE runs SET state = ?, stop_reason = ?, message = ?, ended_ms = ? WHERE id = ?")
      .bind(1, static_cast<int>(state)).bind(2, label(why)).bind(3, message).bind(4, now_ms).bind(5, id).run();
}

void Store::add_run_gpu_ms(const std::string& id, double ms) {
  db_->prepare("UPDATE runs SET gpu_ms = gpu_ms + ? WHERE id = ?").bind(1, ms).bind(2, id).run();
}

void Store::set_run_device_class(const std::string& id, const std::string& device_class) {
  db_->prepare("UPDATE runs SET device_class = ? WHERE id = ?").bind(1, device_class).bind(2, id).run();
}

void Store::set_run_generation(const std::string& id, int generation) {
  db_->prepare("UPDATE runs SET current_generation = ? WHERE id = ?").bind(1, generation).bind(2, id).run();
}

// ---------------------------------------------------------------- candidates

void Store::insert_candidate(const CandidateRecord& c) {
  auto s = db_->prepare(
      "INSERT INTO candidates (id, run_id, generation, seq, genome, genome_hash, op, parents, state) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'queued')");
  s.bind(1, c.id).bind(2, c.run_id).bind(3, c.generation).bind(4, c.seq).bind(5, c.genome)
      .bind(6, c.genome_hash).bind(7, c.op).bind(8, c.parents);
  s.run();
}

std::optional<CandidateRecord> Store::get_candidate(const std::string& id) {
  auto s = db_->prepare(std::string("SELECT ") + kCandidateColumns + " FROM candidates WHERE id = ?");
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return read_candidate(s);
}

std::vector<CandidateRecord> Store::candidates_of_run(const std::string& run_id) {
  auto s = db_->prepare(std::string("SELECT ") + kCandidateColumns +
                        " FROM candidates WHERE run_id = ? ORDER BY seq");
  s.bind(1, run_id);
  return all_rows(s, read_candidate);
}

std::vector<CandidateRecord> Store::queued_candidates(const std::string& run_id, int limit) {
  auto s = db_->prepare(std::string("SELECT ") + kCandidateColumns +
                        " FROM candidates WHERE run_id = ? AND state = 'queued' AND awaits_ranking = 0 ORDER BY seq LIMIT ?");
  s.bind(1, run_id).bind(2, limit);
  return all_rows(s, read_candidate);
}

std::vector<CandidateRecord> Store::elite_candidates(const std::string& run_id, int k) {
  auto s = db_->prepare(std::string("SELECT ") + kCandidateColumns +
                        " FROM candidates WHERE run_id = ? AND elite_eligible = 1 AND fitness_us IS NOT NULL "
                        "AND state = 'done' ORDER BY fitness_us, genome LIMIT ?");
  s.bind(1, run_id).bind(2, k);
  return all_rows(s, read_candidate);
}

int Store::count_candidates(const std::string& run_id, int generation, bool only_done) {
  auto s = db_->prepare(
      "SELECT COUNT(*) FROM candidates WHERE run_id = ? AND generation = ? AND (? = 0 OR state = 'done')");
  s.bind(1, run_id).bind(2, generation).bind(3, only_done);
  return count_of(s);
}

int Store::count_open_candidates_for_class(const std::string& device_class) {
  auto s = db_->prepare(
      "SELECT COUNT(*) FROM runs r JOIN candidates c ON c.run_id = r.id "
      "WHERE r.state IN (?, ?) AND (r.device_class = '' OR r.device_class = ?) AND c.state IN ('queued', 'leased')");
  s.bind(1, static_cast<int>(v1::QUEUED)).bind(2, static_cast<int>(v1::RUNNING)).bind(3, device_class);
  return count_of(s);
}

CandidateCounts Store::count_candidates_of_run(const std::string& run_id) {
  auto s = db_->prepare(
      "SELECT COUNT(*), COALESCE(SUM(state = 'done'), 0), COALESCE(SUM(state = 'done' AND fitness_us IS NULL), 0) "
      "FROM candidates WHERE run_id = ?");
  s.bind(1, run_id);
  s.step();
  return {static_cast<int>(s.column_int(0)), static_cast<int>(s.column_int(1)), static_cast<int>(s.column_int(2))};
}

void Store::set_candidate_leased(const std::string& id, const std::string& lease_id,
                                 const std::string& worker_id, int64_t deadline_ms) {
  db_->prepare(
         "UPDATE candidates SET state = 'leased', lease_id = ?, lease_worker = ?, lease_deadline_ms = ? "
         "WHERE id = ?")
      .bind(1, lease_id).bind(2, worker_id).bind(3, deadline_ms).bind(4, id).run();
}

void Store::requeue_candidate(const std::string& id, bool lease_expired) {
  db_->prepare(
         "UPDATE candidates SET state = 'queued', lease_id = '', lease_worker = '', lease_deadline_ms = 0, "
         "attempts = attempts + ? WHERE id = ?")
      .bind(1, lease_expired ? 1 : 0).bind(2, id).run();
}

void Store::await_ranking(const std::string& id, int64_t first_evaluation_id, const std::string& first_worker) {
  db_->prepare(
         "UPDATE candidates SET state = 'queued', confirmation = 1, awaits_ranking = 1, lease_id = '', "
         "lease_worker = '', lease_deadline_ms = 0, first_evaluation_id = ?, first_worker = ? WHERE id = ?")
      .bind(1, first_evaluation_id).bind(2, first_worker).bind(3, id).run();
}

int Store::count_first_measurements_pending(const std::string& run_id, int generation) {
  auto s = db_->prepare(
      "SELECT COUNT(*) FROM candidates WHERE run_id = ? AND generation = ? AND state != 'done' AND confirmation = 0");
  s.bind(1, run_id).bind(2, generation);
  return count_of(s);
}

std::vector<CandidateRecord> Store::candidates_awaiting_ranking(const std::string& run_id, int generation) {
  auto s = db_->prepare(std::string("SELECT ") + kCandidateColumns +
                        " FROM candidates WHERE run_id = ? AND generation = ? AND awaits_ranking = 1 ORDER BY seq");
  s.bind(1, run_id).bind(2, generation);
  return all_rows(s, read_candidate);
}

void Store::release_for_confirmation(const std::string& id) {
  db_->prepare("UPDATE candidates SET awaits_ranking = 0 WHERE id = ?").bind(1, id).run();
}

std::vector<CandidateRecord> Store::open_confirmations(const std::string& run_id) {
  auto s = db_->prepare(std::string("SELECT ") + kCandidateColumns +
                        " FROM candidates WHERE run_id = ? AND state != 'done' AND confirmation = 1 AND "
                        "awaits_ranking = 0 ORDER BY seq");
  s.bind(1, run_id);
  return all_rows(s, read_candidate);
}

void Store::await_third_measurement(const std::string& id, int64_t second_evaluation_id,
                                    const std::string& second_worker) {
  db_->prepare(
         "UPDATE candidates SET state = 'queued', confirmation = 1, lease_id = '', lease_worker = '', "
         "lease_deadline_ms = 0, second_evaluation_id = ?, second_worker = ? WHERE id = ?")
      .bind(1, second_evaluation_id).bind(2, second_worker).bind(3, id).run();
}

void Store::set_self_confirmed(const std::string& id) {
  db_->prepare("UPDATE candidates SET self_confirmed = 1 WHERE id = ?").bind(1, id).run();
}

void Store::finish_candidate(const std::string& id, int64_t final_evaluation_id, int final_status,
                             std::optional<double> fitness_us, double spread_pct, bool elite_eligible,
                             v1::ResultSource result_source) {
  db_->prepare(
         "UPDATE candidates SET state = 'done', awaits_ranking = 0, lease_id = '', lease_worker = '', "
         "lease_deadline_ms = 0, final_evaluation_id = ?, final_status = ?, fitness_us = ?, spread_pct = ?, elite_eligible = ?, "
         "result_source = ? WHERE id = ?")
      .bind(1, final_evaluation_id).bind(2, final_status).bind(3, fitness_us).bind(4, spread_pct)
      .bind(5, elite_eligible).bind(6, label(result_source)).bind(7, id).run();
}

// ---------------------------------------------------------------- leases

void Store::insert_lease(const LeaseRecord& l) {
  db_->prepare(
         "INSERT INTO leases (id, candidate_id, worker_id, issued_ms, deadline_ms, confirmation, outcome) "
         "VALUES (?, ?, ?, ?, ?, ?, ?)")
      .bind(1, l.id).bind(2, l.candidate_id).bind(3, l.worker_id).bind(4, l.issued_ms)
      .bind(5, l.deadline_ms).bind(6, l.confirmation).bind(7, outcome_text(l.outcome)).run();
}

std::optional<LeaseRecord> Store::get_lease(const std::string& id) {
  auto s = db_->prepare(std::string("SELECT ") + kLeaseColumns + " FROM leases WHERE id = ?");
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return read_lease(s);
}

void Store::set_lease_deadline(const std::string& id, int64_t deadline_ms) {
  db_->prepare("UPDATE leases SET deadline_ms = ? WHERE id = ?").bind(1, deadline_ms).bind(2, id).run();
  db_->prepare("UPDATE candidates SET lease_deadline_ms = ? WHERE lease_id = ?")
      .bind(1, deadline_ms).bind(2, id).run();
}

void Store::set_lease_outcome(const std::string& id, LeaseOutcome outcome) {
  db_->prepare("UPDATE leases SET outcome = ? WHERE id = ?").bind(1, outcome_text(outcome)).bind(2, id).run();
}

std::vector<LeaseRecord> Store::expired_leases(int64_t now_ms) {
  auto s = db_->prepare(std::string("SELECT ") + kLeaseColumns +
                        " FROM leases WHERE outcome = 'active' AND deadline_ms < ? ORDER BY id");
  s.bind(1, now_ms);
  return all_rows(s, read_lease);
}

int Store::shift_active_leases(int64_t by_ms, int64_t at_least_ms) {
  db_->prepare("UPDATE leases SET deadline_ms = MAX(deadline_ms + ?, ?) WHERE outcome = 'active'")
      .bind(1, by_ms).bind(2, at_least_ms).run();
  db_->prepare(
         "UPDATE candidates SET lease_deadline_ms = (SELECT deadline_ms FROM leases WHERE leases.id = "
         "candidates.lease_id) WHERE state = 'leased' AND lease_id IN (SELECT id FROM leases WHERE outcome = 'active')")
      .run();
  auto s = db_->prepare("SELECT COUNT(*) FROM leases WHERE outcome = 'active'");
  return count_of(s);
}

std::vector<LeaseRecord> Store::active_leases_of(const std::string& worker_id) {
  auto s = db_->prepare(std::string("SELECT ") + kLeaseColumns +
                        " FROM leases WHERE worker_id = ? AND outcome = 'active' ORDER BY id");
  s.bind(1, worker_id);
  return all_rows(s, read_lease);
}

std::optional<int64_t> Store::last_liveness_tick() {
  auto s = db_->prepare("SELECT last_tick_ms FROM liveness WHERE id = 1");
  if (!s.step()) return std::nullopt;
  return s.column_int(0);
}

void Store::record_liveness_tick(int64_t now_ms) {
  db_->prepare("INSERT INTO liveness (id, last_tick_ms) VALUES (1, ?) "
               "ON CONFLICT(id) DO UPDATE SET last_tick_ms = excluded.last_tick_ms")
      .bind(1, now_ms).run();
  ++clock_changes_;
}

// ---------------------------------------------------------------- evaluations

int64_t Store::insert_evaluation(const EvaluationRecord& e) {
  std::string blob;
  e.evaluation.SerializeToString(&blob);
  auto s = db_->prepare(
      "INSERT INTO evaluations (candidate_id, lease_id, worker_id, blob, status, fitness_us, estimated, "
      "device_class, is_confirmation, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  s.bind(1, e.candidate_id);
  if (e.lease_id.empty())
    s.bind_null(2);
  else
    s.bind(2, e.lease_id);
  std::optional<double> fitness;
  if (e.evaluation.status() == v1::OK) fitness = e.evaluation.fitness_us();
  s.bind(3, e.worker_id).bind_blob(4, blob).bind(5, static_cast<int>(e.evaluation.status()))
      .bind(6, fitness).bind(7, e.evaluation.estimated()).bind(8, e.evaluation.device().device_class())
      .bind(9, e.is_confirmation).bind(10, e.created_ms);
  s.run();
  return db_->last_insert_rowid();
}

std::optional<EvaluationRecord> Store::get_evaluation(int64_t id) {
  auto s = db_->prepare(
      "SELECT id, candidate_id, COALESCE(lease_id, ''), worker_id, is_confirmation, created_ms, blob "
      "FROM evaluations WHERE id = ?");
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return read_evaluation(s);
}

std::optional<EvaluationRecord> Store::evaluation_by_lease(const std::string& lease_id) {
  auto s = db_->prepare(
      "SELECT id, candidate_id, COALESCE(lease_id, ''), worker_id, is_confirmation, created_ms, blob "
      "FROM evaluations WHERE lease_id = ?");
  s.bind(1, lease_id);
  if (!s.step()) return std::nullopt;
  return read_evaluation(s);
}

// ---------------------------------------------------------------- workers

void Store::upsert_worker(const WorkerRecord& w) {
  std::string blob;
  w.device.SerializeToString(&blob);
  db_->prepare(
         "INSERT INTO workers (id, name, device_class, device, registered_ms, last_seen_ms, credential_hash, "
         "enrolment, quarantined) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
         "name = excluded.name, device_class = excluded.device_class, device = excluded.device, "
         "last_seen_ms = excluded.last_seen_ms")
      .bind(1, w.id).bind(2, w.name).bind(3, w.device.device_class()).bind_blob(4, blob)
      .bind(5, w.registered_ms).bind(6, w.last_seen_ms).bind(7, w.credential_hash).bind(8, w.enrolment)
      .bind(9, w.quarantined).run();
}

std::optional<WorkerRecord> Store::get_worker(const std::string& id) {
  auto s = db_->prepare(std::string("SELECT ") + kWorkerColumns + " FROM workers WHERE id = ?");
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return read_worker(s);
}

std::vector<WorkerRecord> Store::workers_seen_since(int64_t since_ms) {
  auto s = db_->prepare(std::string("SELECT ") + kWorkerColumns +
                        " FROM workers WHERE last_seen_ms >= ? ORDER BY last_seen_ms DESC, id");
  s.bind(1, since_ms);
  return all_rows(s, read_worker);
}

void Store::count_worker_verdict(const std::string& id, bool agreed) {
  db_->prepare(agreed ? "UPDATE workers SET agreements = agreements + 1 WHERE id = ?"
                      : "UPDATE workers SET disagreements = disagreements + 1 WHERE id = ?")
      .bind(1, id).run();
}

void Store::quarantine_worker(const std::string& id, const std::string& reason) {
  db_->prepare("UPDATE workers SET quarantined = ? WHERE id = ?").bind(1, reason).bind(2, id).run();
}

std::vector<WorkerRecord> Store::workers_of_enrolment(const std::string& name) {
  auto s = db_->prepare(std::string("SELECT ") + kWorkerColumns + " FROM workers WHERE enrolment = ? ORDER BY id");
  s.bind(1, name);
  return all_rows(s, read_worker);
}

void Store::quarantine_enrolment(const std::string& name, const std::string& reason) {
  db_->prepare("UPDATE enrolments SET refused = ? WHERE name = ?").bind(1, reason).bind(2, name).run();
  db_->prepare("UPDATE workers SET quarantined = ? WHERE enrolment = ? AND quarantined = ''")
      .bind(1, reason).bind(2, name).run();
}

void Store::put_enrolment(const EnrolmentRecord& e) {
  db_->prepare("INSERT INTO enrolments (name, key_hash, created_ms, refused) VALUES (?, ?, ?, ?) "
               "ON CONFLICT(name) DO UPDATE SET key_hash = excluded.key_hash, created_ms = excluded.created_ms")
      .bind(1, e.name).bind(2, e.key_hash).bind(3, e.created_ms).bind(4, e.refused).run();
}

std::optional<EnrolmentRecord> Store::enrolment_with_key(const std::string& key_hash) {
  auto s = db_->prepare("SELECT name, key_hash, created_ms, refused FROM enrolments WHERE key_hash = ?");
  s.bind(1, key_hash);
  if (!s.step()) return std::nullopt;
  return read_enrolment(s);
}

std::optional<EnrolmentRecord> Store::get_enrolment(const std::string& name) {
  auto s = db_->prepare("SELECT name, key_hash, created_ms, refused FROM enrolments WHERE name = ?");
  s.bind(1, name);
  if (!s.step()) return std::nullopt;
  return read_enrolment(s);
}

std::vector<EnrolmentRecord> Store::enrolments() {
  auto s = db_->prepare("SELECT name, key_hash, created_ms, refused FROM enrolments ORDER BY name");
  return all_rows(s, read_enrolment);
}

void Store::release_enrolment(const std::string& name) {
  const auto e = get_enrolment(name);
  db_->prepare("UPDATE enrolments SET refused = '' WHERE name = ?").bind(1, name).run();
  // Its workers' own quarantines came from the enrolment's (or led to it): they go with it.
  if (e && !e->refused.empty())
    db_->prepare("UPDATE workers SET quarantined = '' WHERE enrolment = ?").bind(1, name).run();
}

void Store::touch_worker(const std::string& id, int64_t now_ms) {
  db_->prepare("UPDATE workers SET last_seen_ms = ? WHERE id = ?").bind(1, now_ms).bind(2, id).run();
}

int Store::count_live_workers(const std::string& device_class, int64_t since_ms,
                              const std::vector<std::string>& except_parties) {
  // A worker's party is its enrolment, or the worker itself when it has none. At most three
  // parties are ever excluded (the measurers of one candidate): one placeholder each.
  std::string sql =
      "SELECT COUNT(*) FROM workers WHERE device_class = ? AND last_seen_ms >= ? AND quarantined = ''";
  for (size_t i = 0; i < except_parties.size(); ++i)
    sql += " AND (CASE WHEN enrolment <> '' THEN 'enrolment:' || enrolment ELSE id END) != ?";
  auto s = db_->prepare(sql);
  s.bind(1, device_class).bind(2, since_ms);
  for (size_t i = 0; i < except_parties.size(); ++i) s.bind(static_cast<int>(i) + 3, except_parties[i]);
  return count_of(s);
}

std::map<std::string, int> Store::active_lease_counts() {
  auto s = db_->prepare("SELECT worker_id, COUNT(*) FROM leases WHERE outcome = 'active' GROUP BY worker_id");
  std::map<std::string, int> counts;
  while (s.step()) counts[s.column_text(0)] = static_cast<int>(s.column_int(1));
  return counts;
}

int Store::count_live_workers_of_any_class(int64_t since_ms) {
  auto s = db_->prepare("SELECT COUNT(*) FROM workers WHERE last_seen_ms >= ? AND quarantined = ''");
  s.bind(1, since_ms);
  return count_of(s);
}

// ---------------------------------------------------------------- result cache

std::optional<CacheEntry> Store::cache_get(const std::string& genome_hash, const std::string& problem,
                                           const std::string& device_class, const std::string& toolkit) {
  auto s = db_->prepare(
      "SELECT evaluation_id, fitness_us, spread_pct, confirmed FROM result_cache "
      "WHERE genome_hash = ? AND problem = ? AND device_class = ? AND toolkit = ?");
  s.bind(1, genome_hash).bind(2, problem).bind(3, device_class).bind(4, toolkit);
  if (!s.step()) return std::nullopt;
  CacheEntry e;
  e.genome_hash = genome_hash;
  e.problem = problem;
  e.device_class = device_class;
  e.toolkit = toolkit;
  e.evaluation_id = s.column_int(0);
  e.fitness_us = s.column_optional_double(1);
  e.spread_pct = s.column_double(2);
  e.confirmed = s.column_int(3) != 0;
  return e;
}

void Store::cache_put(const CacheEntry& e) {
  // A later, confirmed result replaces an earlier unconfirmed one for the same key.
  db_->prepare(
         "INSERT INTO result_cache (genome_hash, problem, device_class, toolkit, evaluation_id, fitness_us, "
         "spread_pct, confirmed) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
         "ON CONFLICT(genome_hash, problem, device_class, toolkit) DO UPDATE SET "
         "evaluation_id = excluded.evaluation_id, fitness_us = excluded.fitness_us, "
         "spread_pct = excluded.spread_pct, confirmed = excluded.confirmed")
      .bind(1, e.genome_hash).bind(2, e.problem).bind(3, e.device_class).bind(4, e.toolkit)
      .bind(5, e.evaluation_id).bind(6, e.fitness_us).bind(7, e.spread_pct).bind(8, e.confirmed).run();
}

}  // namespace evo

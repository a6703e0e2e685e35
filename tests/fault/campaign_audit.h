#pragma once
// What a fault campaign proves, read straight from the SQLite file after the processes are gone:
// every candidate done with exactly one accepted result, a second lease of a candidate only after
// the first one expired (and recorded as expired), no result without its lease, and a sound file.
#include <cstdint>
#include <string>

#include "evo/evo.pb.h"
#include "store_sqlite.h"

namespace evo::fault {

struct Audit {
  int64_t runs = 0;
  int64_t runs_unfinished = 0;      // runs not DONE
  int64_t candidates = 0;
  int64_t candidates_unfinished = 0;
  int64_t results = 0;              // accepted results: evaluations that are not confirmations
  int64_t duplicates = 0;           // candidates with more than one accepted result
  int64_t without_result = 0;       // done candidates whose final evaluation is missing or not theirs
  int64_t leases = 0;
  int64_t re_leases = 0;            // leases that expired unreported (their candidate was leased again)
  int64_t early_re_leases = 0;      // a lease issued before the candidate's previous lease expired (or was returned unreceived)
  int64_t active_leases_left = 0;   // leases still active on a done candidate
  int64_t result_lease_mismatch = 0;  // a result whose lease is not 'reported', or a 'reported' lease with no result
  int64_t attempts_mismatch = 0;    // candidates.attempts differs from the expired leases recorded
  int64_t abandoned = 0;            // candidates given up after too many expired leases (status CRASH, no lease)
  int64_t cache_copies = 0;         // results copied from the result cache (no lease)
  std::string integrity;            // PRAGMA integrity_check
  int64_t foreign_key_violations = 0;

  Audit& operator+=(const Audit& o) {
    runs += o.runs;
    runs_unfinished += o.runs_unfinished;
    candidates += o.candidates;
    candidates_unfinished += o.candidates_unfinished;
    results += o.results;
    duplicates += o.duplicates;
    without_result += o.without_result;
    leases += o.leases;
    re_leases += o.re_leases;
    early_re_leases += o.early_re_leases;
    active_leases_left += o.active_leases_left;
    result_lease_mismatch += o.result_lease_mismatch;
    attempts_mismatch += o.attempts_mismatch;
    abandoned += o.abandoned;
    cache_copies += o.cache_copies;
    if (integrity.empty() || integrity == "ok") integrity = o.integrity;
    foreign_key_violations += o.foreign_key_violations;
    return *this;
  }
};

inline Audit audit_database(const std::string& path) {
  SqliteConnection db(path);
  db.exec("PRAGMA busy_timeout = 5000");
  auto count = [&](const std::string& sql) {
    auto s = db.prepare(sql);
    return s.step() ? s.column_int(0) : int64_t{0};
  };
  Audit a;
  a.runs = count("SELECT COUNT(*) FROM runs");
  a.runs_unfinished = count("SELECT COUNT(*) FROM runs WHERE state != " + std::to_string(v1::DONE));
  a.candidates = count("SELECT COUNT(*) FROM candidates");
  a.candidates_unfinished = count("SELECT COUNT(*) FROM candidates WHERE state != 'done'");
  a.results = count("SELECT COUNT(*) FROM evaluations WHERE is_confirmation = 0");
  a.duplicates = count(
      "SELECT COUNT(*) FROM (SELECT candidate_id FROM evaluations WHERE is_confirmation = 0 "
      "GROUP BY candidate_id HAVING COUNT(*) > 1)");
  a.without_result = count(
      "SELECT COUNT(*) FROM candidates c WHERE c.state = 'done' AND NOT EXISTS (SELECT 1 FROM evaluations e "
      "WHERE e.id = c.final_evaluation_id AND e.candidate_id = c.id)");
  a.leases = count("SELECT COUNT(*) FROM leases");
  a.re_leases = count("SELECT COUNT(*) FROM leases WHERE outcome = 'expired'");
  a.early_re_leases = count(
      "SELECT COUNT(*) FROM leases later JOIN leases earlier ON earlier.candidate_id = later.candidate_id "
      "AND earlier.id != later.id AND earlier.issued_ms < later.issued_ms "
      "AND earlier.confirmation = later.confirmation "
      "WHERE (earlier.outcome = 'expired' AND later.issued_ms <= earlier.deadline_ms) "
      "OR (earlier.outcome = 'returned' AND later.issued_ms < earlier.deadline_ms) "
      "OR earlier.outcome NOT IN ('expired', 'returned')");
  a.active_leases_left = count(
      "SELECT COUNT(*) FROM leases l JOIN candidates c ON c.id = l.candidate_id "
      "WHERE l.outcome = 'active' AND c.state = 'done'");
  a.result_lease_mismatch =
      count("SELECT COUNT(*) FROM evaluations e JOIN leases l ON l.id = e.lease_id WHERE l.outcome != 'reported' "
            "OR l.candidate_id != e.candidate_id") +
      count("SELECT COUNT(*) FROM leases l WHERE l.outcome = 'reported' AND NOT EXISTS "
            "(SELECT 1 FROM evaluations e WHERE e.lease_id = l.id)");
  // A candidate given up after kMaxLeaseAttempts expiries has its last expiry in the leases table
  // but not in attempts (it was recorded as a crash instead of being queued again).
  a.attempts_mismatch = count(
      "SELECT COUNT(*) FROM candidates c WHERE c.attempts != (SELECT COUNT(*) FROM leases l "
      "WHERE l.candidate_id = c.id AND l.outcome = 'expired') - (CASE WHEN c.final_status = " +
      std::to_string(v1::CRASH) +
      " AND c.result_source = 'measured' AND EXISTS (SELECT 1 FROM evaluations e "
      "WHERE e.id = c.final_evaluation_id AND e.lease_id IS NULL) THEN 1 ELSE 0 END)");
  a.abandoned = count(
      "SELECT COUNT(*) FROM candidates c JOIN evaluations e ON e.id = c.final_evaluation_id "
      "WHERE e.lease_id IS NULL AND c.result_source = 'measured'");
  a.cache_copies = count("SELECT COUNT(*) FROM candidates WHERE result_source = 'cache'");
  {
    auto s = db.prepare("PRAGMA integrity_check");
    a.integrity = s.step() ? s.column_text(0) : "no answer";
  }
  {
    auto s = db.prepare("PRAGMA foreign_key_check");
    while (s.step()) ++a.foreign_key_violations;
  }
  return a;
}

}  // namespace evo::fault

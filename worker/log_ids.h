#pragma once
// The run and candidate a worker thread is working on, for the log lines written about them below
// the daemon (gates, evaluators, the compiler). The daemon names them once per lease; the
// evaluators' interfaces stay free of ids, which `evo-worker eval` (no run) would not have.
#include <string>
#include <utility>

namespace evo {

// "run_id=R candidate_id=C " while the calling thread works on a candidate, else "": written
// first after the event name, so a line reads `event=gate_rejected run_id=... genome_hash=...`.
const std::string& log_ids();

// Names the candidate the calling thread works on until the scope ends; scopes nest.
class LogIdsScope {
 public:
  LogIdsScope(const std::string& run_id, const std::string& candidate_id);
  // Another thread's log_ids(), carried into work it queued (a compile for its candidate).
  static LogIdsScope adopt(std::string ids) { return LogIdsScope(std::move(ids)); }
  ~LogIdsScope();
  LogIdsScope(const LogIdsScope&) = delete;
  LogIdsScope& operator=(const LogIdsScope&) = delete;

 private:
  explicit LogIdsScope(std::string ids);
  std::string saved_;
};

}  // namespace evo

#pragma once
// The read side of the coordinator: a run's status and progress, the list of runs, the
// leaderboard with its lineage, the candidates and the best elite for export. Each call reads in
// one transaction and writes nothing.
#include <string>
#include <vector>

#include "coordinator_common.h"
#include "evo/evo.pb.h"
#include "store.h"
#include "worker_registry.h"

namespace evo {

// Elites of a run from its candidates: elite-eligible, with a fitness, in fitness order (ties by
// genome text), at most k.
std::vector<CandidateRecord> elites_of(const std::vector<CandidateRecord>& candidates, int k);

// A stored run as the wire shows it.
v1::Run to_proto(const RunRecord& run);

// A stored genome text as a response carries it: the text, and the message its kernel's space
// reads from it. A text the space no longer reads leaves the message unset (the text says what it
// was; a worker parsing it reports why).
void put_genome(const std::string& stored, std::string* text, v1::Genome* typed);

// A run and the stored evaluation of its leaderboard's first elite (for export).
struct RunBest {
  RunRecord run;
  CandidateRecord candidate;
  EvaluationRecord evaluation;
};

class RunViews {
 public:
  // The registry says how many live workers could serve a run still waiting for work.
  RunViews(Store& store, WorkerRegistry& workers, Clock clock);

  v1::RunStatus status(const std::string& run_id);
  v1::ListRunsResponse list_runs();
  v1::LeaderboardResponse leaderboard(const v1::LeaderboardRequest& request);
  v1::ListCandidatesResponse list_candidates(const v1::ListCandidatesRequest& request);
  // kFailedPrecondition while the run has no confirmed elite.
  RunBest best_of(const std::string& run_id);

 private:
  v1::RunStatus build_status(const RunRecord& run);

  Store& store_;
  WorkerRegistry& workers_;
  Clock clock_;
};

}  // namespace evo

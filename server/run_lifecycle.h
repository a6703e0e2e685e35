#pragma once
// The run lifecycle: a run is submitted (checked whole, then stored with its generation 0 in one
// transaction), fixes its device class and starts running at its first lease, breeds each next
// generation once the current one is complete, and ends DONE (its last generation complete, or
// the search space exhausted, or a budget of the submit's spent: wall time, evaluations, patience;
// or an elite confirmed at its target time), FAILED (the strategy threw) or CANCELLED.
// Run.stop_reason says which. Over the runs and candidates tables of the Store; which candidate
// is leased, and when one is complete, is the lease scheduler's business (lease_scheduler.h).
#include <optional>
#include <string>
#include <vector>

#include "coordinator_common.h"
#include "evo/evo.pb.h"
#include "problem.h"
#include "store.h"

namespace evo {

// DONE, CANCELLED or FAILED: the run hands out nothing more and breeds nothing more.
bool is_terminal(int run_state);
// The run's problem: its stored shape texts, parsed.
std::vector<Problem> shapes_of(const RunRecord& run);
// The stored run; kNotFound when there is none. In the caller's transaction.
RunRecord require_run(Store& store, const std::string& run_id);

class RunLifecycle {
 public:
  RunLifecycle(Store& store, Clock clock);

  // One transaction each. submit checks everything before it writes (kInvalidArgument, and
  // nothing stored); a submit with the request id of an earlier one returns that run and stores
  // nothing. cancel leaves an ended run as it ended.
  RunRecord submit(const v1::SubmitRunRequest& request);
  RunRecord cancel(const std::string& run_id);

  // The rest run inside the caller's transaction, and update `run` as they update its row.
  // The first worker that leases fixes the run's device class: measured and estimated never mix.
  void fix_device_class(RunRecord& run, const std::string& device_class);
  // QUEUED -> RUNNING when the run's first lease is granted.
  void mark_running(RunRecord& run);
  // Ends the run DONE once an elite is confirmed at or under its target (at any report). When
  // every candidate of the run's current generation is done: breeds the next generation, or
  // ends the run after its last one (or when the strategy proposes nothing more, or throws).
  // A generation whose strategy is not ready (GenerationNotReady: the exhaustive strategy's list
  // of valid genomes is being built off the store lock) is left with no candidate, as the run's
  // current generation, and bred by breed_waiting_generations once the strategy is ready.
  void advance_if_generation_complete(const std::string& run_id);
  // For evod's sweeper, every period: breeds the generations left waiting; returns how many runs
  // were waiting. Also after a restart, for those that waited when evod stopped.
  int breed_waiting_generations();
  // For evod's sweeper, every period: ends DONE (budget spent) each running run whose wall-time
  // budget has passed since its first lease; returns how many.
  int end_spent_budgets();

 private:
  // A submit whose request id made a run already: that run (nullopt otherwise), in its own read.
  std::optional<RunRecord> repeated_submit(const v1::SubmitRunRequest& request);
  // Proposes `generation` (the current one when it waits, or the next) and stores it.
  void breed(RunRecord& run, int generation);
  // Why the run stops after its generation `completed` (its last one, max_evals, patience or the
  // wall-time budget); nullopt when it goes on.
  std::optional<std::pair<v1::StopReason, std::string>> spent_budget(const RunRecord& run, int completed);
  // Why the run stops now that an elite was confirmed at or under its target; nullopt when none
  // is, or it has no target.
  std::optional<std::string> target_reached(const RunRecord& run);
  // Ends the run with why, in the store and in `run`, and logs it.
  void end(RunRecord& run, v1::RunState state, v1::StopReason why, const std::string& message);

  Store& store_;
  Clock clock_;
};

}  // namespace evo

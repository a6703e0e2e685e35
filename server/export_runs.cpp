#include "export_runs.h"

#include <set>

#include <spdlog/spdlog.h>

#include "run_lifecycle.h"
#include "search_space.h"

namespace evo {
namespace {

CoordinatorError invalid(const std::string& message) {
  return CoordinatorError(CoordinatorError::Code::kInvalidArgument, message);
}

}  // namespace

std::vector<std::string> export_run_ids(const v1::ExportRequest& request) {
  std::vector<std::string> ids;
  if (!request.run_id().empty()) ids.push_back(request.run_id());
  for (const auto& id : request.run_ids()) ids.push_back(id);
  if (ids.empty()) throw invalid("missing run_id");
  std::set<std::string> seen;
  for (const auto& id : ids)
    if (!seen.insert(id).second) throw invalid("run '" + id + "' is named twice");
  return ids;
}

std::vector<ExportVariant> dispatch_variants(const std::vector<Coordinator::Best>& winners) {
  std::vector<ExportVariant> variants;
  // Which run claimed each shape first, to name both runs when a second one claims it too.
  std::vector<std::pair<Problem, std::string>> claimed;
  for (const auto& w : winners) {
    if (!variants.empty() && w.run.seed != winners.front().run.seed)
      throw invalid("runs '" + winners.front().run.id + "' (" + winners.front().run.seed + ") and '" + w.run.id +
                    "' (" + w.run.seed + ") tune different templates: one dispatch table holds one template");
    ExportVariant v;
    v.genome = SearchSpace::for_template(w.run.seed).parse(w.candidate.genome);
    v.evidence = w.evaluation.evaluation;
    v.run_id = w.run.id;
    v.fitness_inputs = w.run.fitness_inputs;
    for (const auto& shape : shapes_of(w.run)) {
      bool already_ours = false;
      for (const auto& [other, owner] : claimed) {
        if (!(other == shape)) continue;
        if (owner != w.run.id)
          throw invalid("shape " + shape.text() + " is in runs '" + owner + "' and '" + w.run.id +
                        "': each shape must belong to one run's bucket");
        already_ours = true;
      }
      if (already_ours) continue;
      claimed.emplace_back(shape, w.run.id);
      v.shapes.push_back(shape);
    }
    variants.push_back(std::move(v));
  }
  return variants;
}

v1::ExportResponse export_runs(Coordinator& coordinator, const std::vector<std::string>& run_ids,
                               const ExportOptions& options) {
  std::vector<Coordinator::Best> winners;
  for (const auto& id : run_ids) winners.push_back(coordinator.best_of(id));
  v1::ExportResponse response = export_dispatch_table(dispatch_variants(winners), options);
  for (const auto& w : winners)
    spdlog::info("event=exported run_id={} candidate_id={} genome={} buckets={}", w.run.id, w.candidate.id,
                 w.candidate.genome, winners.size());
  return response;
}

}  // namespace evo

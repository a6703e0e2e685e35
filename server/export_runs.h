#pragma once
// ExportBest over one run or several. One run: its winner (Top-1 elite) as a standalone kernel.
// Several runs: one dispatch table in which each run's winner serves that run's shapes as its
// bucket, so a shape suite tuned as one run per shape bucket ships as one .cu. Exporting only reads
// the store: nothing stored changes, whatever the outcome.
#include <string>
#include <vector>

#include "coordinator.h"
#include "evo/evo.pb.h"
#include "exporter.h"

namespace evo {

// The runs a request names: run_id (when set) first, then run_ids, in order. Throws
// CoordinatorError kInvalidArgument when none is named or one is named twice.
std::vector<std::string> export_run_ids(const v1::ExportRequest& request);

// Each run's winner as one variant whose bucket is that run's shapes, in the order given. Throws
// CoordinatorError kInvalidArgument when the winners come from different templates or a shape
// (with its causality) belongs to two runs: a call of that shape would have no one answer.
std::vector<ExportVariant> dispatch_variants(const std::vector<Coordinator::Best>& winners);

// The whole export. An unknown run is kNotFound and a run without an elite kFailedPrecondition
// (from Coordinator::best_of); the checks above; then the exporter's InputError for a genome it
// cannot emit.
v1::ExportResponse export_runs(Coordinator& coordinator, const std::vector<std::string>& run_ids,
                               const ExportOptions& options = {});

}  // namespace evo

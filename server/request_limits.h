#pragma once
// What one well-formed request may carry, checked at the gRPC edge before the coordinator sees it:
// ids and names of sane length without control characters (they end up in log lines and error
// messages), bounded lists, and evaluation figures that are numbers a measurement can produce
// (no NaN or negative times). Every check throws InputError (-> INVALID_ARGUMENT) naming the field,
// never echoing an oversized value. Messages above the server's receive limit never get this far:
// gRPC answers them RESOURCE_EXHAUSTED.
#include <cstddef>

#include "evo/evo.pb.h"

namespace evo::limits {

inline constexpr size_t kMaxIdBytes = 128;          // run, worker, lease ids
inline constexpr size_t kMaxTextBytes = 256;        // names, seeds, strategies, device strings
inline constexpr int kMaxShapes = 64;               // shapes of a run / results of a report
inline constexpr size_t kMaxShapeTextBytes = 64;    // "1x8x512x1024x64:causal" is 22
inline constexpr int kMaxStartGenomes = 256;        // warm-start genomes of a run
inline constexpr size_t kMaxGenomeTextBytes = 512;  // a whole fa_s512_v3 genome is about 110
inline constexpr int kMaxGenes = 64;                // genes of a typed genome (fa_s512_v3 has 11)
inline constexpr int kMaxHeartbeatLeases = 1024;
inline constexpr int kMaxExportRuns = 64;           // runs behind one dispatch table
inline constexpr int kMaxGates = 64;
inline constexpr int kMaxListedCandidates = 1000;   // ListCandidates.limit
inline constexpr int kMaxTemplates = 64;            // template fingerprints of one worker
inline constexpr size_t kMaxEvaluationBytes = 1 << 20;  // a ptxas log and a message fit easily

void check_request(const v1::RegisterWorkerRequest& request);
void check_request(const v1::LeaseRequest& request);
void check_request(const v1::ReportRequest& request);
void check_request(const v1::HeartbeatRequest& request);
void check_request(const v1::SubmitRunRequest& request);
// GetRun, WatchRun, CancelRun: the run id is required.
void check_request(const v1::RunRef& request);
void check_request(const v1::LeaderboardRequest& request);
void check_request(const v1::ListCandidatesRequest& request);
void check_request(const v1::ExportRequest& request);
inline void check_request(const v1::ListRunsRequest&) {}
inline void check_request(const v1::ListWorkersRequest&) {}

}  // namespace evo::limits

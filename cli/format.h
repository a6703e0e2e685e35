#pragma once
// What evoctl prints, as pure functions of evod's answers, so that tests can read them.
#include <cstdint>
#include <string>

#include "evo/evo.pb.h"

namespace evo::cli {

// v with `digits` decimals ("8.71").
std::string fixed(double v, int digits);
// "0:07", "12:30", "1:02:03"; "--:--" when unknown (negative).
std::string format_duration(int64_t ms);
// "DONE", "RUNNING", ...
std::string state_name(v1::RunState s);
bool is_final(v1::RunState s);
// A QUEUED or RUNNING run that no live worker can serve: it waits without end. False for an
// evod too old to count its workers.
bool waits_without_worker(const v1::RunStatus& s);
// What a QUEUED run waits for, or why a RUNNING one is stalled; empty when it waits for nothing.
std::string waiting_text(const v1::RunStatus& s);

// One progress line: "[#####.....] gen 2/5  evals 40/80  best 7.25 µs  elapsed 0:12  ETA 0:18".
// With bar=false (not a terminal) the same facts without the bar.
std::string progress_line(const v1::RunStatus& s, bool bar);
// The multi-line answer of `evoctl status RUN`.
std::string status_summary(const v1::RunStatus& s);
// The final line after a watch: state, best time and genome.
std::string final_line(const v1::RunStatus& s);

// The table of `evoctl leaderboard`, headed loudly when the figures are estimates.
std::string leaderboard_table(const v1::LeaderboardResponse& r);
// The table of `evoctl runs`.
std::string runs_table(const v1::ListRunsResponse& r);
// The table of `evoctl candidates`: each candidate's status, time, the gate that refused it and why.
std::string candidates_table(const v1::ListCandidatesResponse& r);
// The table of `evoctl workers`; all: the gone ones were asked for too.
std::string workers_table(const v1::ListWorkersResponse& r, bool all);

// The run's shapes as people type them, comma-separated: "1x8x512x64,2x8x512x64:causal".
std::string shapes_text(const v1::Run& run);
// "10m of wall time, 200 evaluations, patience 3, target 5.20 µs": the submit's budgets; empty
// for none.
std::string budgets_text(const v1::Run& r);
// The genes of a genome whose values differ from the default genome's (which reads back as the
// same genome: genes not named take their defaults), "BLOCK_N=256,WARPS=8"; "(the default
// genome)" for the default itself. Every gene where evod named no default genome (an older evod).
std::string genes_unlike_default(const v1::Genome& typed_genome, const std::string& genome,
                                 const v1::Genome& typed_default, const std::string& default_genome);
// The first gate that refused the evaluation; GATE_UNSPECIFIED when none did.
v1::Gate first_failed_gate(const v1::Evaluation& e);

// A genome's canonical text, printed through its kernel's space from the message evod sent; the
// text evod sent beside it where there is no message (an evod from before typed genomes) or this
// evoctl does not know the kernel.
std::string genome_text(const v1::Genome& typed_genome, const std::string& text);

// "evoctl: NOT_FOUND: unknown run 'r9'" for a gRPC status code number and message.
std::string grpc_code_name(int code);

}  // namespace evo::cli

#pragma once
// `evoctl report RUN --html FILE`: one run as a self-contained HTML page (inline SVG, no scripts,
// nothing fetched), as a pure function of evod's three answers so that tests can read it.
#include <string>

#include "evo/evo.pb.h"

namespace evo::cli {

// The page: the run's header and device (ESTIMATED in a banner when the model evaluator measured
// it), the convergence plots (best confirmed µs so far against candidate order and against wall
// time since the first candidate done, every listed candidate a dot coloured by the gate that
// stopped it), the elites' genes unlike the default genome's and the gate failure counts. Every
// text evod sent is HTML-escaped. `candidates` may hold only the latest of the run's candidates
// (ListCandidates lists at most 1000): the page says so.
std::string report_html(const v1::RunStatus& status, const v1::LeaderboardResponse& leaderboard,
                        const v1::ListCandidatesResponse& candidates);

// `text` with &, <, >, " and ' as character references: safe in an element and in a quoted
// attribute.
std::string html_escape(const std::string& text);

}  // namespace evo::cli

#include "format.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <sstream>
#include <vector>

#include "duration_text.h"
#include "errors.h"
#include "genome_proto.h"
#include "resident_time.h"
#include "family.h"
#include "template_registry.h"
#include "wire_labels.h"

namespace evo::cli {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

namespace {

// A genome evod sent as a message, read by its kernel's space; nullopt where it sent none (an
// evod from before typed genomes) or names a kernel this evoctl does not know: the caller prints
// the text evod sent beside it.
std::optional<Genome> typed(const v1::Genome& m) {
  if (m.kernel().empty() || !find_template(m.kernel())) return std::nullopt;
  try {
    return genome_from_proto(m);
  } catch (const InputError&) {
    return std::nullopt;
  }
}

// The genes without the template prefix: the table's header names the template once.
std::string genes_only(const std::string& genome) {
  const size_t colon = genome.find(':');
  return colon == std::string::npos ? genome : genome.substr(colon + 1);
}

// The NAME=VALUE items of a genome text, in order.
std::vector<std::string> gene_items(const std::string& genome) {
  std::vector<std::string> items;
  std::string genes = genes_only(genome);
  for (size_t start = 0; start < genes.size();) {
    const size_t comma = std::min(genes.find(',', start), genes.size());
    items.push_back(genes.substr(start, comma - start));
    start = comma + 1;
  }
  return items;
}

}  // namespace

// From the messages where evod sent both; else from the texts.
std::string genes_unlike_default(const v1::Genome& typed_genome, const std::string& genome,
                                 const v1::Genome& typed_default, const std::string& default_genome) {
  const auto g = typed(typed_genome), d = typed(typed_default);
  if (g && d) {
    const std::string unlike = g->genes_unlike(*d);
    return unlike.empty() ? "(the default genome)" : unlike;
  }
  const std::string text = g ? g->text() : genome, base = d ? d->text() : default_genome;
  if (base.empty()) return genes_only(text);
  const auto default_items = gene_items(base);
  std::string out;
  for (const auto& item : gene_items(text))
    if (std::find(default_items.begin(), default_items.end(), item) == default_items.end())
      out += (out.empty() ? "" : ",") + item;
  return out.empty() ? "(the default genome)" : out;
}

std::string shapes_text(const v1::Run& run) {
  std::string out;
  for (const auto& p : problems_of(run.problems(), run.shapes())) {
    if (!out.empty()) out += ",";
    out += p.text();
  }
  return out;
}

namespace {

// The fitness's counterpart with inputs left in L2, or "-" where a shape lacks it.
std::string resident_text(const v1::Evaluation& e) {
  const double us = resident_geomean_us(e);
  return us > 0 ? fixed(us, 2) : "-";
}

// The run's fitness inputs from an evod of either release: rotated, evod's default, where the run
// predates the choice.
v1::FitnessInputs fitness_inputs_of(const v1::Run& run) {
  const auto f = enum_or_label(run.fitness_from(), run.fitness_inputs());
  return f == v1::FITNESS_INPUTS_UNSPECIFIED ? v1::FITNESS_INPUTS_ROTATED : f;
}

// What the run's fitness measures.
std::string fitness_inputs_text(const v1::Run& run) {
  return fitness_inputs_of(run) == v1::FITNESS_INPUTS_RESIDENT ? "per call on one L2-resident input set"
                                                               : "per call with inputs cycled past L2";
}

std::string sanitizer_verdict(const v1::Evaluation& e) {
  for (const auto& g : e.gates())
    if (gate_of(g) == v1::GATE_SANITIZER) return label(verdict_of(g));
  return "-";
}

// Columns padded to their widest cell; the first row is the header.
std::string render(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  auto display_width = [](const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;  // count UTF-8 code points (µ)
    return n;
  };
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], display_width(row[i]));
    }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - display_width(row[i]) + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

// The generation the run is in, or ended in (1-based): a run cancelled, failed or out of genomes
// early shows where it stopped, not its planned total.
int shown_generation(const v1::RunStatus& s) {
  const int total = s.run().generations();
  return std::min(std::max(s.generation() + 1, 0), total);
}

// The first gate that refused the evaluation, or "-".
std::string failed_gate(const v1::Evaluation& e) {
  const v1::Gate gate = first_failed_gate(e);
  return gate == v1::GATE_UNSPECIFIED ? "-" : label(gate);
}

// At most `width` code points of the text's first line, with "..." where it was cut.
std::string clipped(const std::string& text, size_t width) {
  const std::string line = text.substr(0, text.find('\n'));
  std::vector<size_t> starts;  // the byte where each code point begins
  for (size_t i = 0; i < line.size(); ++i)
    if ((static_cast<unsigned char>(line[i]) & 0xC0) != 0x80) starts.push_back(i);
  if (starts.size() <= width && line.size() == text.size()) return line;
  const size_t keep = std::min(starts.size(), width - 3);
  return line.substr(0, keep < starts.size() ? starts[keep] : line.size()) + "...";
}

// "4 s ago", "12 min ago", "3 h ago", "2 d ago".
std::string ago(int64_t ms) {
  const int64_t s = std::max<int64_t>(0, ms) / 1000;
  if (s < 120) return std::to_string(s) + " s ago";
  if (s < 2 * 3600) return std::to_string(s / 60) + " min ago";
  if (s < 2 * 86400) return std::to_string(s / 3600) + " h ago";
  return std::to_string(s / 86400) + " d ago";
}

}  // namespace

std::string format_duration(int64_t ms) {
  if (ms < 0) return "--:--";
  const int64_t total = ms / 1000;
  const int64_t h = total / 3600, m = (total / 60) % 60, s = total % 60;
  char buf[64];
  if (h > 0) std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)h, (long long)m, (long long)s);
  else std::snprintf(buf, sizeof buf, "%lld:%02lld", (long long)m, (long long)s);
  return buf;
}

std::string state_name(v1::RunState s) {
  switch (s) {
    case v1::QUEUED: return "QUEUED";
    case v1::RUNNING: return "RUNNING";
    case v1::DONE: return "DONE";
    case v1::CANCELLED: return "CANCELLED";
    case v1::FAILED: return "FAILED";
    default: return "UNKNOWN";
  }
}

bool is_final(v1::RunState s) { return s == v1::DONE || s == v1::CANCELLED || s == v1::FAILED; }

bool waits_without_worker(const v1::RunStatus& s) {
  const auto state = s.run().state();
  return (state == v1::QUEUED || state == v1::RUNNING) && s.has_live_workers() && s.live_workers() == 0;
}

std::string waiting_text(const v1::RunStatus& s) {
  const v1::Run& r = s.run();
  const std::string which = r.device_class().empty()
                                ? " (of any class: the first to lease fixes the run's)"
                                : " of device class " + r.device_class() + " (no other class takes it)";
  if (waits_without_worker(s))
    return (r.state() == v1::QUEUED ? "waiting for a worker" + which : "stalled: it needs a worker" + which) +
           "; evod has heard from none in the last few heartbeats (is evo-worker running, pointed at "
           "this evod by --coordinator or $EVO_COORDINATOR?)";
  if (r.state() != v1::QUEUED) return "";
  std::string out = "waiting for a worker" + which;
  if (s.has_live_workers())
    out += "; " + std::to_string(s.live_workers()) + (s.live_workers() == 1 ? " live worker" : " live workers") +
           " could take it, none has yet";
  return out;
}

std::string progress_line(const v1::RunStatus& s, bool bar) {
  std::string out;
  const int done = s.evaluations_done(), total = s.evaluations_total();
  if (bar) {
    constexpr int kWidth = 24;
    const int filled = total > 0 ? std::min(kWidth, done * kWidth / total) : 0;
    out += "[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "] ";
  }
  out += "gen " + std::to_string(shown_generation(s)) + "/" + std::to_string(s.run().generations());
  out += "  evals " + std::to_string(done) + "/" + std::to_string(total);
  out += "  best " + (s.best_us() > 0 ? fixed(s.best_us(), 2) + " µs" : std::string("-"));
  if (s.run().target_us() > 0) out += " (target " + fixed(s.run().target_us(), 2) + ")";
  out += "  elapsed " + format_duration(s.elapsed_ms());
  out += "  ETA " + (is_final(s.run().state()) ? std::string("0:00") : format_duration(s.eta_ms() > 0 ? s.eta_ms() : -1));
  if (s.failed() > 0) out += "  failed " + std::to_string(s.failed());
  if (s.estimated()) out += "  ESTIMATED";
  if (waits_without_worker(s)) out += "  NO WORKER";
  return out;
}

std::string budgets_text(const v1::Run& r) {
  std::vector<std::string> parts;
  if (r.budget_ms() > 0) parts.push_back(duration_text(r.budget_ms()) + " of wall time");
  if (r.max_evals() > 0) parts.push_back(std::to_string(r.max_evals()) + " evaluations");
  if (r.patience() > 0) parts.push_back("patience " + std::to_string(r.patience()));
  if (r.target_us() > 0) parts.push_back("target " + fixed(r.target_us(), 2) + " µs");
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

std::string status_summary(const v1::RunStatus& s) {
  const v1::Run& r = s.run();
  std::ostringstream o;
  o << "run " << r.run_id() << ": " << state_name(r.state()) << (r.message().empty() ? "" : " (" + r.message() + ")")
    << "\n"
    << "  seed " << r.seed() << ", shapes " << shapes_text(r) << ", strategy "
    << label(enum_or_label(r.search_strategy(), r.strategy())) << ", rng seed " << r.rng_seed() << ", top-k "
    << r.top_k() << "\n"
    << "  device class " << (r.device_class().empty() ? "(not fixed yet)" : r.device_class()) << "\n"
    << "  fitness: " << fitness_inputs_text(r) << "\n";
  if (const std::string budgets = budgets_text(r); !budgets.empty()) o << "  budgets: " << budgets << "\n";
  for (int i = 0; i < r.start_genomes_size(); ++i)
    o << "  start "
      << (i < r.typed_start_genomes_size() ? genome_text(r.typed_start_genomes(i), r.start_genomes(i))
                                            : r.start_genomes(i))
      << "\n";
  // A run named for a class no worker has, or one whose workers are gone, waits without end:
  // say what it waits for.
  if (const std::string waiting = waiting_text(s); !waiting.empty()) o << "  " << waiting << "\n";
  o << "  " << progress_line(s, false) << "\n";
  if (s.has_evaluations_per_minute())
    o << "  throughput: " << fixed(s.evaluations_per_minute(), 1) << " evaluations a minute, the GPU measuring "
      << fixed(100 * s.gpu_share(), 0) << "% of the wall time (correctness, sanitizer, timing)\n";
  const std::string best = genome_text(s.typed_best_genome(), s.best_genome());
  if (!best.empty())
    o << "  best " << best
      << (s.best_self_confirmed() ? " (self-confirmed: no other worker of the class was live)" : "") << "\n";
  if (s.estimated()) o << "  ESTIMATED (model evaluator, no GPU): times are estimates, not measurements\n";
  return o.str();
}

std::string final_line(const v1::RunStatus& s) {
  std::string out = "run " + s.run().run_id() + " " + state_name(s.run().state());
  if (s.best_us() > 0)
    out += ": best " + fixed(s.best_us(), 2) + " µs " + genome_text(s.typed_best_genome(), s.best_genome());
  if (!s.run().message().empty()) out += " (" + s.run().message() + ")";
  if (s.estimated()) out += " [ESTIMATED]";
  return out;
}

std::string leaderboard_table(const v1::LeaderboardResponse& r) {
  bool estimated = false;
  for (const auto& e : r.elites()) estimated = estimated || e.estimated();
  std::ostringstream o;
  if (estimated)
    o << "!!! ESTIMATED (model evaluator, no GPU): these times are estimates, not measurements !!!\n";
  o << "run " << r.run().run_id() << "  " << r.run().seed() << "  " << shapes_text(r.run()) << "  "
    << state_name(r.run().state()) << "  device class "
    << (r.run().device_class().empty() ? "-" : r.run().device_class()) << "\n";
  o << "default genome: " << (r.seed_us() > 0 ? fixed(r.seed_us(), 2) + " µs" : std::string("not measured"));
  const std::string seed_genome = genome_text(r.typed_seed_genome(), r.seed_genome());
  if (!seed_genome.empty()) o << "  " << genes_only(seed_genome);
  o << "\n";
  if (r.elites().empty()) {
    o << "no elites yet\n";
    return o.str();
  }
  std::vector<std::vector<std::string>> rows = {
      {"rank", seed_genome.empty() ? "genome" : "genome (genes unlike the default's)", "µs", "resident µs",
       "spread", "TFLOP/s", "speedup", "regs", "smem", "spills", "sanitizer"}};
  for (const auto& e : r.elites()) {
    const auto& res = e.evaluation().resources();
    rows.push_back({std::to_string(e.rank()),
                    genes_unlike_default(e.typed_genome(), e.genome(), r.typed_seed_genome(), r.seed_genome()),
                    fixed(e.fitness_us(), 2), resident_text(e.evaluation()),
                    fixed(e.spread_pct(), 1) + "%" + (e.self_confirmed() ? " (self)" : ""),
                    fixed(e.tflops(), 1),
                    e.speedup_vs_seed() > 0 ? fixed(e.speedup_vs_seed(), 2) + "x" : "-",
                    std::to_string(res.registers()),
                    std::to_string(res.static_smem_bytes() + res.dynamic_smem_bytes()),
                    std::to_string(res.spill_store_bytes() + res.spill_load_bytes()),
                    sanitizer_verdict(e.evaluation())});
  }
  o << render(rows);
  o << "µs: the fitness, " << fitness_inputs_text(r.run()) << "; resident µs: one input set left in L2\n";
  for (const auto& e : r.elites())
    if (e.self_confirmed()) {
      o << "(self): confirmed by the worker that measured it first, as no other worker of the class was live: "
           "two measurements, one worker's word\n";
      break;
    }
  // How each elite was bred: the operator and its parents' candidate ids.
  for (const auto& e : r.elites())
    if (!e.parents().empty())
      o << "#" << e.rank() << " " << e.candidate_id() << " (generation " << e.generation() << "): " << e.parents()
        << "\n";
  return o.str();
}

std::string runs_table(const v1::ListRunsResponse& r) {
  if (r.runs().empty()) return "no runs\n";
  std::vector<std::vector<std::string>> rows = {
      {"run", "seed", "shapes", "state", "gen", "evals", "best µs", "estimated", "fitness inputs"}};
  for (const auto& s : r.runs())
    rows.push_back({s.run().run_id(), s.run().seed(), shapes_text(s.run()),
                    state_name(s.run().state()) + (waits_without_worker(s) ? " (no worker)" : ""),
                    std::to_string(shown_generation(s)) + "/" + std::to_string(s.run().generations()),
                    std::to_string(s.evaluations_done()) + "/" + std::to_string(s.evaluations_total()),
                    s.best_us() > 0 ? fixed(s.best_us(), 2) : "-", s.estimated() ? "yes" : "no",
                    label(fitness_inputs_of(s.run()))});
  return render(rows);
}

std::string candidates_table(const v1::ListCandidatesResponse& r) {
  std::ostringstream o;
  o << "run " << r.run().run_id() << "  " << r.run().seed() << "  " << shapes_text(r.run()) << "  "
    << state_name(r.run().state()) << "  " << r.candidates_size() << " of " << r.matched() << " candidates";
  o << (r.candidates_size() < r.matched() ? " (the latest; --limit shows more)\n" : "\n");
  if (r.candidates().empty()) return o.str();
  constexpr size_t kWhyWidth = 60;
  std::vector<std::vector<std::string>> rows = {
      {"candidate", "gen", "state", "status", "µs", "gate", "why", "genes unlike the default's"}};
  bool estimated = false;
  for (const auto& c : r.candidates()) {
    const auto& e = c.evaluation();
    estimated = estimated || e.estimated();
    const v1::CandidateState state = enum_or_label(c.phase(), c.state());
    rows.push_back({c.candidate_id(), std::to_string(c.generation()), label(state),
                    state == v1::CANDIDATE_STATE_DONE ? v1::EvalStatus_Name(e.status()) : "-",
                    c.fitness_us() > 0 ? fixed(c.fitness_us(), 2) : "-", failed_gate(e),
                    e.message().empty() ? "-" : clipped(e.message(), kWhyWidth),
                    genes_unlike_default(c.typed_genome(), c.genome(), r.typed_seed_genome(), r.seed_genome())});
  }
  if (estimated) o << "!!! ESTIMATED (model evaluator, no GPU): these times are estimates, not measurements !!!\n";
  o << render(rows);
  return o.str();
}

std::string workers_table(const v1::ListWorkersResponse& r, bool all) {
  if (r.workers().empty())
    return all ? "no worker has registered with this evod\n"
               : "no live worker (evoctl workers --all lists the gone ones too)\n";
  std::vector<std::vector<std::string>> rows = {
      {"worker", "name", "enrolment", "device class", "backend", "state", "last seen", "leases", "peers agreed/not"}};
  std::string why;
  for (const auto& w : r.workers()) {
    const std::string state = w.quarantined().empty() ? (w.live() ? "live" : "gone")
                                                      : (w.live() ? "QUARANTINED" : "QUARANTINED, gone");
    rows.push_back({w.worker_id(), w.name(), w.enrolment().empty() ? "-" : w.enrolment(), w.device_class(),
                    w.backend(), state,
                    ago(r.now_unix_ms() - w.last_seen_unix_ms()), std::to_string(w.active_leases()),
                    std::to_string(w.agreements()) + "/" + std::to_string(w.disagreements())});
    if (!w.quarantined().empty()) why += w.worker_id() + " is quarantined (no leases, reports refused): " +
                                         w.quarantined() + "\n";
  }
  return render(rows) + why;
}

v1::Gate first_failed_gate(const v1::Evaluation& e) {
  for (const auto& g : e.gates())
    if (verdict_of(g) == v1::VERDICT_FAILED) return gate_of(g);
  return v1::GATE_UNSPECIFIED;
}

std::string genome_text(const v1::Genome& typed_genome, const std::string& text) {
  const auto g = typed(typed_genome);
  return g ? g->text() : text;
}

std::string grpc_code_name(int code) {
  static const char* kNames[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
                                 "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                                 "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
                                 "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  if (code >= 0 && code < static_cast<int>(sizeof kNames / sizeof kNames[0])) return kNames[code];
  return "CODE_" + std::to_string(code);
}

}  // namespace evo::cli

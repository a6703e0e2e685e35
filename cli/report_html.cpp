#include "report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "format.h"
#include "wire_labels.h"

namespace evo::cli {
namespace {

// What stopped a candidate, which colours its dot: it passed every gate (OK), a gate refused it,
// it ended without a gate's verdict (a lost lease is a CRASH: its status names it), or it is not
// done yet. `order` is the legend's: OK, the gates in the order a candidate meets them, the rest.
struct Outcome {
  int order = 0;
  std::string label;
  std::string colour;
  bool failed = false;  // counted in the gate failure table
};

// One colour per gate, by its number in evo.proto: a gate keeps its colour from run to run.
const char* const kGateColours[] = {"#8c510a", "#762a83", "#d73027", "#fc8d59", "#e6ab02", "#4575b4", "#e7298a"};
constexpr int kGateColourCount = sizeof kGateColours / sizeof kGateColours[0];

Outcome outcome_of(const v1::CandidateSummary& c) {
  if (enum_or_label(c.phase(), c.state()) != v1::CANDIDATE_STATE_DONE) return {1000, "not done", "#9e9e9e", false};
  if (c.fitness_us() > 0) return {0, "OK", "#1a9850", false};
  const v1::Gate gate = first_failed_gate(c.evaluation());
  if (gate != v1::GATE_UNSPECIFIED) {
    const bool known = gate > 0 && gate < kGateColourCount;  // a gate added after this evoctl: its number
    return {gate, known ? label(gate) : "gate " + std::to_string(gate), kGateColours[known ? gate : 0], true};
  }
  const v1::EvalStatus status = c.evaluation().status();
  return {500, status == v1::OK ? "no fitness" : v1::EvalStatus_Name(status), kGateColours[0], true};
}

// A listed candidate as a dot of one plot.
struct Dot {
  const v1::CandidateSummary* candidate = nullptr;
  Outcome outcome;
  double x = 0;               // its number in the order proposed, or seconds since the first done
  std::optional<double> us;   // its fitness; none: drawn at the top edge
  bool ranks = false;         // confirmed with a fitness: it may move the best-so-far line
};

Dot dot_of(const v1::CandidateSummary& c, double x) {
  Dot d;
  d.candidate = &c;
  d.outcome = outcome_of(c);
  d.x = x;
  if (c.fitness_us() > 0) d.us = c.fitness_us();
  d.ranks = d.us && c.elite_eligible();
  return d;
}

// Evenly spaced round values across lo..hi (about five, at least min_step apart), and how many
// decimals they need.
struct Ticks {
  std::vector<double> values;
  double step = 1;
  int decimals = 0;
};

Ticks ticks(double lo, double hi, double min_step = 0) {
  Ticks t;
  const double raw = (hi - lo) / 5;
  const double magnitude = std::pow(10, std::floor(std::log10(raw)));
  t.step = magnitude;
  for (double m : {2.0, 5.0, 10.0})
    if (raw > t.step) t.step = m * magnitude;
  t.step = std::max(t.step, min_step);
  t.decimals = std::max(0, static_cast<int>(-std::floor(std::log10(t.step))));
  // + 0.0: a tick at -0 reads 0.
  for (double v = std::ceil(lo / t.step) * t.step + 0.0; v <= hi + t.step * 1e-9; v += t.step) t.values.push_back(v);
  return t;
}

// A tick of the x axis: a candidate's number, or seconds as m:ss (as "0.5 s" below a second).
std::string x_tick_text(double v, const Ticks& t, bool x_is_time) {
  if (!x_is_time) return fixed(v, t.decimals);
  return t.step >= 1 ? format_duration(std::llround(v * 1000)) : fixed(v, t.decimals) + " s";
}

// lo..hi widened by `pad` of its span each way, and to a span of 1 when it has none.
std::pair<double, double> padded(double lo, double hi, double pad) {
  if (hi - lo < 1e-9) return {lo - 0.5, hi + 0.5};
  const double d = (hi - lo) * pad;
  return {lo - d, hi + d};
}

// The plot's frame in pixels; the band above the y axis holds the dots that have no time.
constexpr double kWidth = 760, kHeight = 320, kLeft = 70, kRight = 740, kBand = 22, kTop = 42, kBottom = 272;

struct Frame {
  double x_lo, x_hi, y_lo, y_hi;
  double px(double x) const { return kLeft + (x - x_lo) / (x_hi - x_lo) * (kRight - kLeft); }
  double py(double us) const { return kBottom - (us - y_lo) / (y_hi - y_lo) * (kBottom - kTop); }
};

// The frame of the dots, and of the run's target time where it has one (0: none).
Frame frame_of(const std::vector<Dot>& dots, double target_us) {
  double x_lo = dots.front().x, x_hi = dots.front().x;
  std::optional<double> y_lo, y_hi;
  if (target_us > 0) y_lo = y_hi = target_us;
  for (const auto& d : dots) {
    x_lo = std::min(x_lo, d.x);
    x_hi = std::max(x_hi, d.x);
    if (d.us) {
      y_lo = std::min(y_lo.value_or(*d.us), *d.us);
      y_hi = std::max(y_hi.value_or(*d.us), *d.us);
    }
  }
  const auto [xa, xb] = padded(x_lo, x_hi, 0.02);
  const auto [ya, yb] = padded(y_lo.value_or(0), y_hi.value_or(1), 0.05);
  return {xa, xb, ya, yb};
}

// The axes: grid lines and tick labels (x in seconds as m:ss where `x_is_time`), their titles and
// the top band's.
std::string axes_svg(const Frame& f, bool x_is_time, const std::string& x_title) {
  std::ostringstream o;
  o << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << kRight - kLeft << "\" height=\""
    << kBottom - kTop << "\" class=\"frame\"/>\n";
  const Ticks xt = ticks(f.x_lo, f.x_hi, x_is_time ? 0 : 1), yt = ticks(f.y_lo, f.y_hi);
  for (double v : xt.values) {
    const std::string x = fixed(f.px(v), 1);
    o << "<line x1=\"" << x << "\" y1=\"" << kTop << "\" x2=\"" << x << "\" y2=\"" << kBottom << "\" class=\"grid\"/>"
      << "<text x=\"" << x << "\" y=\"" << kBottom + 16 << "\" text-anchor=\"middle\">"
      << x_tick_text(v, xt, x_is_time) << "</text>\n";
  }
  for (double v : yt.values) {
    const std::string y = fixed(f.py(v), 1);
    o << "<line x1=\"" << kLeft << "\" y1=\"" << y << "\" x2=\"" << kRight << "\" y2=\"" << y << "\" class=\"grid\"/>"
      << "<text x=\"" << kLeft - 6 << "\" y=\"" << y << "\" text-anchor=\"end\" dominant-baseline=\"middle\">"
      << fixed(v, yt.decimals) << "</text>\n";
  }
  o << "<text x=\"" << kLeft - 6 << "\" y=\"" << kBand << "\" text-anchor=\"end\" dominant-baseline=\"middle\">"
    << "no time</text>\n"
    << "<text x=\"" << (kLeft + kRight) / 2 << "\" y=\"" << kHeight - 12 << "\" text-anchor=\"middle\">"
    << html_escape(x_title) << "</text>\n"
    << "<text x=\"16\" y=\"" << (kTop + kBottom) / 2 << "\" text-anchor=\"middle\" transform=\"rotate(-90 16 "
    << (kTop + kBottom) / 2 << ")\">µs</text>\n";
  return o.str();
}

// The best confirmed time so far as a step line over the dots (in x order).
std::string best_line_svg(const Frame& f, const std::vector<Dot>& dots) {
  std::string path;
  std::optional<double> best;
  for (const auto& d : dots) {
    if (!d.ranks || (best && *d.us >= *best)) continue;
    if (best) path += " L" + fixed(f.px(d.x), 1) + "," + fixed(f.py(*best), 1);
    path += (best ? " L" : "M") + fixed(f.px(d.x), 1) + "," + fixed(f.py(*d.us), 1);
    best = d.us;
  }
  if (!best) return "";
  path += " L" + fixed(f.px(dots.back().x), 1) + "," + fixed(f.py(*best), 1);
  return "<path d=\"" + path + "\" class=\"best\"/>\n";
}

// The run's target time (--target-us) as a dashed line across the plot.
std::string target_line_svg(const Frame& f, double target_us) {
  const std::string y = fixed(f.py(target_us), 1);
  return "<line x1=\"" + fixed(kLeft, 0) + "\" y1=\"" + y + "\" x2=\"" + fixed(kRight, 0) + "\" y2=\"" + y +
         "\" class=\"target\"><title>target " + fixed(target_us, 2) + " µs</title></line>\n";
}

// A dot with its tooltip: the candidate, its generation, and its time or what stopped it.
std::string dot_svg(const Frame& f, const Dot& d) {
  const v1::CandidateSummary& c = *d.candidate;
  std::string why = d.us ? fixed(*d.us, 2) + " µs" : d.outcome.label;
  if (!d.us && !c.evaluation().message().empty()) why += ": " + c.evaluation().message();
  std::ostringstream o;
  o << "<circle cx=\"" << fixed(f.px(d.x), 1) << "\" cy=\"" << fixed(d.us ? f.py(*d.us) : kBand, 1)
    << "\" r=\"3.5\" fill=\"" << d.outcome.colour << "\" data-candidate=\"" << html_escape(c.candidate_id())
    << "\"><title>" << html_escape(c.candidate_id() + " (generation " + std::to_string(c.generation()) + "): " + why)
    << "</title></circle>\n";
  return o.str();
}

// One plot: `dots` in x order, at least one; the run's target time as a line where it has one.
std::string plot_svg(const std::string& id, const std::vector<Dot>& dots, bool x_is_time, const std::string& x_title,
                     double target_us) {
  const Frame f = frame_of(dots, target_us);
  std::ostringstream o;
  o << "<svg id=\"" << id << "\" width=\"" << kWidth << "\" height=\"" << kHeight
    << "\" viewBox=\"0 0 " << kWidth << " " << kHeight << "\">\n"
    << axes_svg(f, x_is_time, x_title) << (target_us > 0 ? target_line_svg(f, target_us) : "")
    << best_line_svg(f, dots);
  for (const auto& d : dots) o << dot_svg(f, d);
  o << "</svg>\n";
  return o.str();
}

// The dots by candidate order: the first listed is the run's candidate number `first`.
std::vector<Dot> dots_by_evaluation(const v1::ListCandidatesResponse& r, int first) {
  std::vector<Dot> dots;
  for (int i = 0; i < r.candidates_size(); ++i) dots.push_back(dot_of(r.candidates(i), first + i));
  return dots;
}

// The dots of the candidates evod said when they finished, by seconds since the first of them.
std::vector<Dot> dots_by_time(const v1::ListCandidatesResponse& r) {
  int64_t t0 = 0;
  for (const auto& c : r.candidates())
    if (c.done_unix_ms() > 0) t0 = t0 == 0 ? c.done_unix_ms() : std::min(t0, c.done_unix_ms());
  std::vector<Dot> dots;
  for (const auto& c : r.candidates())
    if (c.done_unix_ms() > 0) dots.push_back(dot_of(c, static_cast<double>(c.done_unix_ms() - t0) / 1000));
  std::stable_sort(dots.begin(), dots.end(), [](const Dot& a, const Dot& b) { return a.x < b.x; });
  return dots;
}

// Each outcome with its colour and how many listed candidates it stopped, in the legend's order.
std::vector<std::pair<Outcome, int>> outcome_counts(const std::vector<Dot>& dots) {
  std::map<std::pair<int, std::string>, std::pair<Outcome, int>> by_key;
  for (const auto& d : dots) {
    auto& entry = by_key[{d.outcome.order, d.outcome.label}];
    entry.first = d.outcome;
    ++entry.second;
  }
  std::vector<std::pair<Outcome, int>> out;
  for (const auto& [key, entry] : by_key) out.push_back(entry);
  return out;
}

std::string swatch(const std::string& colour) {
  return "<span class=\"swatch\" style=\"background:" + colour + "\"></span>";
}

std::string legend_html(const std::vector<Dot>& dots, double target_us) {
  std::ostringstream o;
  o << "<ul class=\"legend\">\n<li><span class=\"line\"></span>best confirmed µs so far</li>\n";
  if (target_us > 0)
    o << "<li><span class=\"line target\"></span>target " << fixed(target_us, 2) << " µs (the run ends once an "
      << "elite is confirmed at it)</li>\n";
  for (const auto& [outcome, count] : outcome_counts(dots))
    o << "<li>" << swatch(outcome.colour)
      << html_escape(outcome.failed ? "failed " + outcome.label : outcome.label) << " (" << count << ")</li>\n";
  o << "</ul>\n";
  return o.str();
}

std::string fact_row(const std::string& name, const std::string& value) {
  return "<tr><th>" + html_escape(name) + "</th><td>" + html_escape(value) + "</td></tr>\n";
}

bool is_estimated(const v1::RunStatus& s, const v1::LeaderboardResponse& b, const v1::ListCandidatesResponse& r) {
  bool estimated = s.estimated();
  for (const auto& e : b.elites()) estimated = estimated || e.estimated() || e.evaluation().estimated();
  for (const auto& c : r.candidates()) estimated = estimated || c.evaluation().estimated();
  return estimated;
}

std::string run_section(const v1::RunStatus& s) {
  const v1::Run& r = s.run();
  std::ostringstream o;
  o << "<h1>evo run " << html_escape(r.run_id()) << "</h1>\n<table class=\"facts\">\n"
    << fact_row("run", r.run_id()) << fact_row("seed", r.seed()) << fact_row("shapes", shapes_text(r))
    << fact_row("state", state_name(r.state()) + (r.message().empty() ? "" : ": " + r.message()))
    << fact_row("generations × population", std::to_string(r.generations()) + " × " +
                                                std::to_string(r.population()) + ", top-k " +
                                                std::to_string(r.top_k()))
    << fact_row("strategy", label(enum_or_label(r.search_strategy(), r.strategy())) + ", rng seed " +
                                std::to_string(r.rng_seed()))
    << fact_row("evaluations", std::to_string(s.evaluations_done()) + " done of " +
                                   std::to_string(s.evaluations_total()) + ", " + std::to_string(s.failed()) +
                                   " refused by a gate");
  if (const std::string budgets = budgets_text(r); !budgets.empty()) o << fact_row("budgets", budgets);
  const std::string best = genome_text(s.typed_best_genome(), s.best_genome());
  o << fact_row("best", s.best_us() > 0 ? fixed(s.best_us(), 2) + " µs  " + best : "none yet") << "</table>\n";
  return o.str();
}

// The device that measured the run, as the first evaluation that names one says (an elite's,
// else any candidate's).
std::string device_section(const v1::RunStatus& s, const v1::LeaderboardResponse& b,
                           const v1::ListCandidatesResponse& r, bool estimated) {
  const v1::DeviceInfo* device = nullptr;
  for (const auto& e : b.elites())
    if (!device && e.evaluation().has_device()) device = &e.evaluation().device();
  for (const auto& c : r.candidates())
    if (!device && c.evaluation().has_device()) device = &c.evaluation().device();
  std::ostringstream o;
  o << "<h2>Device</h2>\n<table class=\"facts\">\n"
    << fact_row("device class", s.run().device_class().empty() ? "not fixed yet" : s.run().device_class());
  if (device)
    o << fact_row("GPU", device->gpu_name()) << fact_row("arch", device->arch())
      << fact_row("backend", device->backend() + (estimated ? " (ESTIMATED: model evaluator)" : ""));
  o << "</table>\n";
  if (!device) o << "<p>No evaluation has named its device yet.</p>\n";
  return o.str();
}

std::string convergence_section(const v1::ListCandidatesResponse& r) {
  std::ostringstream o;
  o << "<h2>Convergence</h2>\n";
  if (r.candidates().empty()) return o.str() + "<p>No candidate has been proposed yet.</p>\n";
  const int listed = r.candidates_size(), matched = std::max(r.matched(), listed);
  if (matched > listed)
    o << "<p class=\"note\">The run has " << matched << " candidates, of which evod listed the latest " << listed
      << ": the plots and the counts below show candidates " << matched - listed + 1 << " to " << matched
      << ", and the best-so-far line starts at the first of them.</p>\n";
  const double target_us = r.run().target_us();
  const std::vector<Dot> by_evaluation = dots_by_evaluation(r, matched - listed + 1);
  o << legend_html(by_evaluation, target_us) << "<figure>\n"
    << plot_svg("by-evaluation", by_evaluation, false, "candidate, in the order proposed", target_us)
    << "<figcaption>Best confirmed µs so far against candidates proposed; every candidate a dot at its "
       "µs, or in the top band when it has none.</figcaption>\n</figure>\n";
  const std::vector<Dot> by_time = dots_by_time(r);
  if (by_time.empty())
    return o.str() + "<p>No wall-time plot: evod sent no finish times (an evod from before them, or no candidate "
                     "is done).</p>\n";
  const int untimed = listed - static_cast<int>(by_time.size());
  o << "<figure>\n" << plot_svg("by-time", by_time, true, "wall time since the first candidate done", target_us)
    << "<figcaption>The same against wall time since the first listed candidate was done";
  if (untimed > 0)
    o << "; " << (untimed == 1 ? "the one listed candidate" : "the " + std::to_string(untimed) + " listed candidates")
      << " without a finish time (not done yet) " << (untimed == 1 ? "is" : "are") << " left out";
  o << ".</figcaption>\n</figure>\n";
  return o.str();
}

std::string elites_section(const v1::LeaderboardResponse& b) {
  std::ostringstream o;
  o << "<h2>Elites</h2>\n";
  const std::string seed = genome_text(b.typed_seed_genome(), b.seed_genome());
  if (!seed.empty())
    o << "<p>Default genome " << html_escape(seed) << ": "
      << (b.seed_us() > 0 ? fixed(b.seed_us(), 2) + " µs" : std::string("not measured")) << ".</p>\n";
  if (b.elites().empty()) return o.str() + "<p>No elites yet.</p>\n";
  o << "<table>\n<tr><th>rank</th><th>candidate</th><th>generation</th><th>µs</th><th>speedup</th>"
    << "<th>genes unlike the default genome's</th></tr>\n";
  for (const auto& e : b.elites())
    o << "<tr><td>" << e.rank() << "</td><td>" << html_escape(e.candidate_id()) << "</td><td>" << e.generation()
      << "</td><td>" << fixed(e.fitness_us(), 2) << "</td><td>"
      << (e.speedup_vs_seed() > 0 ? fixed(e.speedup_vs_seed(), 2) + "x" : "-") << "</td><td>"
      << html_escape(genes_unlike_default(e.typed_genome(), e.genome(), b.typed_seed_genome(), b.seed_genome()))
      << "</td></tr>\n";
  o << "</table>\n";
  return o.str();
}

std::string failures_section(const v1::ListCandidatesResponse& r) {
  std::ostringstream o;
  o << "<h2>Gate failures</h2>\n";
  int failed = 0;
  std::ostringstream rows;
  for (const auto& [outcome, count] : outcome_counts(dots_by_evaluation(r, 1)))
    if (outcome.failed) {
      failed += count;
      rows << "<tr><td>" << swatch(outcome.colour) << html_escape(outcome.label) << "</td><td>" << count
           << "</td></tr>\n";
    }
  if (failed == 0) return o.str() + "<p>No listed candidate failed a gate.</p>\n";
  o << "<table>\n<tr><th>gate</th><th>candidates it refused</th></tr>\n" << rows.str() << "</table>\n"
    << "<p>" << failed << " of the " << r.candidates_size() << " listed candidates failed.</p>\n";
  return o.str();
}

const char* const kStyle =
    "body{font-family:sans-serif;margin:2em;color:#222}"
    "table{border-collapse:collapse;margin:0.5em 0}th,td{border:1px solid #ccc;padding:0.2em 0.6em;text-align:left}"
    "table.facts th{background:#f4f4f4}"
    ".estimated{background:#b00;color:#fff;font-size:1.4em;font-weight:bold;padding:0.6em}"
    ".note{background:#fff3cd;padding:0.4em}"
    ".legend{list-style:none;padding:0}.legend li{display:inline-block;margin-right:1.2em}"
    ".swatch{display:inline-block;width:0.8em;height:0.8em;border-radius:50%;margin-right:0.3em}"
    ".line{display:inline-block;width:1.5em;border-top:2px solid #000;margin-right:0.3em;vertical-align:middle}"
    ".line.target{border-top:2px dashed #c00}.target{stroke:#c00;stroke-width:1.5;stroke-dasharray:6 4}"
    "svg text{font-size:11px;fill:#444}.frame{fill:none;stroke:#888}.grid{stroke:#eee}"
    ".best{fill:none;stroke:#000;stroke-width:1.5}circle{fill-opacity:0.8}";

}  // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string report_html(const v1::RunStatus& status, const v1::LeaderboardResponse& leaderboard,
                        const v1::ListCandidatesResponse& candidates) {
  const bool estimated = is_estimated(status, leaderboard, candidates);
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>evo run "
    << html_escape(status.run().run_id()) << "</title>\n<style>" << kStyle << "</style>\n</head>\n<body>\n";
  if (estimated)
    o << "<p class=\"estimated\">ESTIMATED: the model evaluator (no GPU) made every time on this page; they are "
         "estimates, not measurements.</p>\n";
  o << run_section(status) << device_section(status, leaderboard, candidates, estimated)
    << convergence_section(candidates) << elites_section(leaderboard) << failures_section(candidates)
    << "</body>\n</html>\n";
  return o.str();
}

}  // namespace evo::cli

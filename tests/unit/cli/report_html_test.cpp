// `evoctl report`'s page as a pure function of evod's three answers: what it draws, what it says.
#include <gtest/gtest.h>

#include <string>

#include "report_html.h"

namespace evo::cli {
namespace {

const std::string kDefault = "fa_s512_v3:BLOCK_M=32,BLOCK_N=64,WARPS=4,STAGES=2,SCHEDULE=cp_async,SWIZZLE=1";

std::string genome(const std::string& block_m, const std::string& warps = "4") {
  return "fa_s512_v3:BLOCK_M=" + block_m + ",BLOCK_N=64,WARPS=" + warps + ",STAGES=2,SCHEDULE=cp_async,SWIZZLE=1";
}

// The occurrences of `what` in `text`.
int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// The <svg> element whose id is `id`, or "" when the page has none.
std::string svg(const std::string& page, const std::string& id) {
  const size_t start = page.find("<svg id=\"" + id + "\"");
  if (start == std::string::npos) return "";
  return page.substr(start, page.find("</svg>", start) - start);
}

class ReportHtml : public ::testing::Test {
 protected:
  ReportHtml() {
    v1::Run run;
    run.set_run_id("r1");
    run.set_seed("fa_s512_v3");
    run.set_generations(3);
    run.set_population(16);
    run.set_top_k(2);
    run.set_search_strategy(v1::SEARCH_STRATEGY_EVOLVE);
    run.set_rng_seed(42);
    run.set_state(v1::RUNNING);
    run.set_device_class("sm_90a/NVIDIA H200");
    *status.mutable_run() = run;
    status.set_evaluations_done(5);
    status.set_evaluations_total(48);
    *board.mutable_run() = run;
    board.set_seed_genome(kDefault);
    board.set_seed_us(10.0);
    add_elite(1, genome("128"), 8.0);
    add_elite(2, genome("64", "8"), 9.5);
    *candidates.mutable_run() = run;
    candidates.set_seed_genome(kDefault);
    // In the order proposed: OK 10 µs (confirmed), refused by compile, by correct, by compile, OK
    // 6 µs but unconfirmed (the line ignores it), OK 8 µs (confirmed), one not done yet.
    add_ok("r1-c0000", kDefault, 10.0, true, 1'000'000);
    add_refused("r1-c0001", v1::GATE_COMPILE, "register spills", 1'002'000);
    add_refused("r1-c0002", v1::GATE_CORRECT, "max abs error 0.5", 1'003'000);
    add_refused("r1-c0003", v1::GATE_COMPILE, "register spills", 1'004'000);
    add_ok("r1-c0004", genome("16"), 6.0, false, 1'005'000);
    add_ok("r1-c0005", genome("128"), 8.0, true, 1'009'000);
    auto* queued = candidates.add_candidates();
    queued->set_candidate_id("r1-c0006");
    queued->set_genome(genome("64"));
    queued->set_phase(v1::CANDIDATE_STATE_QUEUED);
    candidates.set_matched(candidates.candidates_size());
  }

  void add_elite(int rank, const std::string& text, double us) {
    auto* e = board.add_elites();
    e->set_rank(rank);
    e->set_candidate_id("r1-c000" + std::to_string(rank));
    e->set_genome(text);
    e->set_fitness_us(us);
    auto* d = e->mutable_evaluation()->mutable_device();
    d->set_gpu_name("NVIDIA H200");
    d->set_arch("sm_90a");
    d->set_backend("cuda");
  }
  v1::CandidateSummary* add_done(const std::string& id, int64_t done_ms) {
    auto* c = candidates.add_candidates();
    c->set_candidate_id(id);
    c->set_generation(0);
    c->set_phase(v1::CANDIDATE_STATE_DONE);
    c->set_done_unix_ms(done_ms);
    return c;
  }
  void add_ok(const std::string& id, const std::string& text, double us, bool confirmed, int64_t done_ms) {
    auto* c = add_done(id, done_ms);
    c->set_genome(text);
    c->set_fitness_us(us);
    c->set_elite_eligible(confirmed);
    c->mutable_evaluation()->set_status(v1::OK);
  }
  void add_refused(const std::string& id, v1::Gate gate, const std::string& why, int64_t done_ms) {
    auto* c = add_done(id, done_ms);
    c->set_genome(genome("128", "8"));
    c->set_failed(true);
    c->mutable_evaluation()->set_status(gate == v1::GATE_COMPILE ? v1::RESOURCE_REJECT : v1::INCORRECT);
    c->mutable_evaluation()->set_message(why);
    auto* g = c->mutable_evaluation()->add_gates();
    g->set_kind(gate);
    g->set_outcome(v1::VERDICT_FAILED);
  }
  std::string page() const { return report_html(status, board, candidates); }

  v1::RunStatus status;
  v1::LeaderboardResponse board;
  v1::ListCandidatesResponse candidates;
};

TEST_F(ReportHtml, EveryCandidateIsADotInTheEvaluationPlot) {
  const std::string p = page();
  const std::string by_evaluation = svg(p, "by-evaluation");
  ASSERT_FALSE(by_evaluation.empty()) << p;
  EXPECT_EQ(count(by_evaluation, "<circle "), 7);
  for (int i = 0; i <= 6; ++i)
    EXPECT_EQ(count(by_evaluation, "data-candidate=\"r1-c000" + std::to_string(i) + "\""), 1) << i;
  // Those without a time sit in the top band, coloured by what stopped them.
  EXPECT_EQ(count(by_evaluation, "cy=\"22.0\""), 4) << "three refused, one not done";
  EXPECT_EQ(count(by_evaluation, "fill=\"#d73027\""), 2) << "the compile gate's colour";
}

TEST_F(ReportHtml, TheWallTimePlotHasTheCandidatesThatFinished) {
  const std::string by_time = svg(page(), "by-time");
  ASSERT_FALSE(by_time.empty());
  EXPECT_EQ(count(by_time, "<circle "), 6) << "the queued one has no finish time";
  EXPECT_EQ(count(by_time, "data-candidate=\"r1-c0006\""), 0);
  EXPECT_NE(by_time.find(">0:00</text>"), std::string::npos) << "seconds since the first done, as m:ss";
}

TEST_F(ReportHtml, WithoutFinishTimesThereIsNoWallTimePlotAndThePageSaysWhy) {
  for (auto& c : *candidates.mutable_candidates()) c.clear_done_unix_ms();  // an evod before the field
  const std::string p = page();
  EXPECT_EQ(svg(p, "by-time"), "");
  EXPECT_NE(p.find("No wall-time plot: evod sent no finish times"), std::string::npos);
  EXPECT_FALSE(svg(p, "by-evaluation").empty());
}

// The line steps down at each better confirmed time: 10 µs at the first, 8 µs at the sixth; the
// unconfirmed 6 µs of the fifth moves it not.
TEST_F(ReportHtml, TheBestLineFollowsConfirmedTimesOnly) {
  const std::string by_evaluation = svg(page(), "by-evaluation");
  const size_t at = by_evaluation.find("class=\"best\"");
  ASSERT_NE(at, std::string::npos) << by_evaluation;
  const size_t d = by_evaluation.rfind("<path d=\"", at);
  const std::string path = by_evaluation.substr(d, at - d);
  EXPECT_EQ(count(path, "M"), 1) << path;
  EXPECT_EQ(count(path, "L"), 3) << "down once, then on to the last candidate: " << path;
  // It ends at the height of the sixth's dot (8 µs), not the fifth's (6 µs).
  auto dot_y = [&](const std::string& id) {
    const size_t dot = by_evaluation.find("data-candidate=\"" + id + "\"");
    const size_t cy = by_evaluation.rfind("cy=\"", dot) + 4;
    return by_evaluation.substr(cy, by_evaluation.find('"', cy) - cy);
  };
  const std::string end_y = path.substr(path.rfind(',') + 1, path.find('"', path.rfind(',')) - path.rfind(',') - 1);
  EXPECT_EQ(end_y, dot_y("r1-c0005")) << path;
  EXPECT_NE(end_y, dot_y("r1-c0004")) << path;
  for (auto& c : *candidates.mutable_candidates()) c.set_elite_eligible(false);
  EXPECT_EQ(svg(page(), "by-evaluation").find("class=\"best\""), std::string::npos) << "nothing confirmed, no line";
}

TEST_F(ReportHtml, TheLegendAndTheFailureTableNameTheGates) {
  const std::string p = page();
  EXPECT_NE(p.find("</span>OK (3)</li>"), std::string::npos) << p;
  EXPECT_NE(p.find("</span>failed compile (2)</li>"), std::string::npos) << p;
  EXPECT_NE(p.find("</span>failed correct (1)</li>"), std::string::npos) << p;
  EXPECT_NE(p.find("</span>not done (1)</li>"), std::string::npos) << p;
  EXPECT_NE(p.find("</span>compile</td><td>2</td></tr>"), std::string::npos) << p;
  EXPECT_NE(p.find("</span>correct</td><td>1</td></tr>"), std::string::npos) << p;
  EXPECT_LT(p.find("compile</td><td>2"), p.find("correct</td><td>1")) << "in the order a candidate meets them";
  EXPECT_NE(p.find("3 of the 7 listed candidates failed"), std::string::npos) << p;
}

TEST_F(ReportHtml, ACandidateEndedWithoutAGateIsNamedByItsStatus) {
  add_done("r1-c0007", 1'010'000)->mutable_evaluation()->set_status(v1::CRASH);
  const std::string p = page();
  EXPECT_NE(p.find("</span>failed CRASH (1)</li>"), std::string::npos) << p;
  EXPECT_NE(p.find("</span>CRASH</td><td>1</td></tr>"), std::string::npos) << p;
}

TEST_F(ReportHtml, TheElitesShowTheGenesUnlikeTheDefault) {
  const std::string p = page();
  EXPECT_NE(p.find("<td>BLOCK_M=128</td></tr>"), std::string::npos) << p;
  EXPECT_NE(p.find("<td>BLOCK_M=64,WARPS=8</td></tr>"), std::string::npos) << p;
  EXPECT_LT(p.find("<td>BLOCK_M=128</td>"), p.find("<td>BLOCK_M=64,WARPS=8</td>")) << "best first";
  EXPECT_NE(p.find("<td>8.00</td>"), std::string::npos);
  board.clear_elites();
  EXPECT_NE(page().find("No elites yet."), std::string::npos);
}

// A run with a target time (--target-us) draws it as a dashed line at its height in both plots,
// names it in the legend and lists it with the budgets; a run without one has none of these.
TEST_F(ReportHtml, ATargetTimeIsALineInEachPlotAndABudget) {
  EXPECT_EQ(page().find("class=\"target\""), std::string::npos);
  EXPECT_EQ(page().find("<th>budgets</th>"), std::string::npos);
  status.mutable_run()->set_target_us(7.0);
  status.mutable_run()->set_budget_ms(600'000);
  candidates.mutable_run()->set_target_us(7.0);
  const std::string p = page();
  EXPECT_NE(p.find("<th>budgets</th><td>10m of wall time, target 7.00 µs</td>"), std::string::npos) << p;
  EXPECT_NE(p.find("target 7.00 µs (the run ends once an elite is confirmed at it)"), std::string::npos) << p;
  for (const char* id : {"by-evaluation", "by-time"}) {
    const std::string plot = svg(p, id);
    const size_t at = plot.find("class=\"target\"");
    ASSERT_NE(at, std::string::npos) << id;
    // Below the 8 µs dot, above the 6 µs one: the frame takes the target in.
    auto number_after = [&](size_t v) { return std::stod(plot.substr(v, plot.find('"', v) - v)); };
    auto dot_y = [&](const std::string& id) {
      return number_after(plot.rfind("cy=\"", plot.find("data-candidate=\"" + id + "\"")) + 4);
    };
    const double target_y = number_after(plot.find("y1=\"", plot.rfind("<line", at)) + 4);
    const double y8 = dot_y("r1-c0005"), y6 = dot_y("r1-c0004");
    EXPECT_GT(target_y, y8) << id;
    EXPECT_LT(target_y, y6) << id;
  }
}

TEST_F(ReportHtml, TheHeaderAndTheDevice) {
  status.mutable_run()->set_message("budget of 10m spent");
  const std::string p = page();
  EXPECT_NE(p.find("<th>state</th><td>RUNNING: budget of 10m spent</td>"), std::string::npos) << p;
  EXPECT_NE(p.find("<th>shapes</th><td>"), std::string::npos);
  EXPECT_NE(p.find("<td>3 × 16, top-k 2</td>"), std::string::npos) << p;
  EXPECT_NE(p.find("<td>evolve, rng seed 42</td>"), std::string::npos) << p;
  EXPECT_NE(p.find("<th>device class</th><td>sm_90a/NVIDIA H200</td>"), std::string::npos) << p;
  EXPECT_NE(p.find("<th>GPU</th><td>NVIDIA H200</td>"), std::string::npos) << p;
  EXPECT_NE(p.find("<th>arch</th><td>sm_90a</td>"), std::string::npos) << p;
  EXPECT_NE(p.find("<th>backend</th><td>cuda</td>"), std::string::npos) << p;
  EXPECT_EQ(p.find("ESTIMATED"), std::string::npos) << "a measured run";
}

TEST_F(ReportHtml, AnEstimatedRunSaysSoLoudly) {
  status.set_estimated(true);
  const std::string p = page();
  EXPECT_NE(p.find("<p class=\"estimated\">ESTIMATED: the model evaluator (no GPU)"), std::string::npos) << p;
  EXPECT_LT(p.find("class=\"estimated\">"), p.find("<h1>")) << "before anything else";
  status.set_estimated(false);
  candidates.mutable_candidates(0)->mutable_evaluation()->set_estimated(true);
  EXPECT_NE(page().find("<p class=\"estimated\">"), std::string::npos) << "any estimated evaluation says it";
}

TEST_F(ReportHtml, EveryTextFromEvodIsEscaped) {
  status.mutable_run()->set_message("<script>alert('run')</script>");
  candidates.mutable_candidates(1)->mutable_evaluation()->set_message("a < b & \"c\"");
  status.mutable_run()->set_device_class("sm_90a/<b>GPU</b>");
  const std::string p = page();
  EXPECT_EQ(p.find("<script"), std::string::npos) << p;
  EXPECT_NE(p.find("&lt;script&gt;alert(&#39;run&#39;)&lt;/script&gt;"), std::string::npos) << p;
  EXPECT_NE(p.find("a &lt; b &amp; &quot;c&quot;"), std::string::npos) << p;
  EXPECT_NE(p.find("sm_90a/&lt;b&gt;GPU&lt;/b&gt;"), std::string::npos) << p;
  EXPECT_EQ(html_escape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
}

TEST_F(ReportHtml, ThePageNeedsNothingFromOutside) {
  const std::string p = page();
  EXPECT_EQ(p.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(p.find("<script"), std::string::npos);
  EXPECT_EQ(p.find(" src="), std::string::npos);
  EXPECT_EQ(p.find("<link"), std::string::npos);
  EXPECT_EQ(p.find("url("), std::string::npos);
  EXPECT_EQ(p.find("http"), std::string::npos);
  EXPECT_EQ(count(p, "<svg "), 2);
}

TEST_F(ReportHtml, APartialListingIsSaid) {
  candidates.set_matched(1500);
  const std::string p = page();
  EXPECT_NE(p.find("The run has 1500 candidates, of which evod listed the latest 7: the plots and the counts "
                   "below show candidates 1494 to 1500"),
            std::string::npos)
      << p;
  candidates.set_matched(7);
  EXPECT_EQ(page().find("The run has"), std::string::npos);
}

TEST_F(ReportHtml, ARunWithoutCandidatesHasNoPlots) {
  candidates.clear_candidates();
  candidates.set_matched(0);
  const std::string p = page();
  EXPECT_EQ(count(p, "<svg "), 0);
  EXPECT_NE(p.find("No candidate has been proposed yet."), std::string::npos);
}

}  // namespace
}  // namespace evo::cli

// evoctl's commands: each is one or two calls to evod and a print. Errors from evod become one
// line "evoctl: <CODE>: <message>" and exit status 1.
#include <grpcpp/grpcpp.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <optional>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "build_command.h"
#include "client_security.h"
#include "device_limits.h"
#include "dispatch_file.h"
#include "errors.h"
#include "evo/evo.grpc.pb.h"
#include "evoctl.h"
#include "format.h"
#include "genome_proto.h"
#include "options.h"
#include "report_html.h"
#include "request_limits.h"
#include "search_space.h"
#include "template_registry.h"
#include "token.h"
#include "torch_package.h"
#include "workload.h"
#include "wire_labels.h"

namespace evo::cli {
namespace {

using Stub = v1::Coordinator::Stub;
constexpr auto kCallDeadline = std::chrono::seconds(30);

// Tries of one submit (the same request id each time) while evod is unreachable or late.
constexpr int kSubmitAttempts = 3;

// A submit's client request id: 128 random bits in hex.
std::string new_request_id() {
  std::random_device rd;
  char id[40];
  std::snprintf(id, sizeof id, "req-%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  return id;
}

// A failure already explained in one line.
struct Failure {
  std::string line;
};

void check(const grpc::Status& s) {
  if (s.ok()) return;
  std::string line = grpc_code_name(s.error_code()) + ": " + s.error_message();
  if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED) line += " (give evod's token: --token-file FILE or $EVO_TOKEN)";
  throw Failure{line};
}

// The stub and what every call carries (the token, when evod wants one).
struct Client {
  Stub& stub;
  const security::ClientSecurity& security;

  std::unique_ptr<grpc::ClientContext> context(bool with_deadline = true) const {
    auto ctx = std::make_unique<grpc::ClientContext>();
    if (with_deadline) ctx->set_deadline(std::chrono::system_clock::now() + kCallDeadline);
    security::attach_token(*ctx, security);
    return ctx;
  }
};

std::string to_json(const google::protobuf::Message& m) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  const auto status = google::protobuf::util::MessageToJsonString(m, &json, options);
  if (!status.ok()) throw Failure{"INTERNAL: cannot print evod's answer as JSON: " + std::string(status.message())};
  return json;
}

// Follows a run until it ends; returns the exit status (1 if it failed).
int watch(Client& c, const std::string& run_id, std::ostream& out, bool tty) {
  auto ctx_holder = c.context(/*with_deadline=*/false);  // no deadline: a run may take hours
  grpc::ClientContext& ctx = *ctx_holder;
  v1::RunRef ref;
  ref.set_run_id(run_id);
  auto reader = c.stub.WatchRun(&ctx, ref);
  v1::RunStatus s;
  bool finished = false;
  bool said_no_worker = false;
  std::string last_key;
  while (reader->Read(&s)) {
    // Said once each time the run loses its last worker, so a watch never sits silent on a run
    // that cannot move.
    const bool no_worker = waits_without_worker(s);
    if (no_worker && !said_no_worker) out << (tty ? "\r\033[K" : "") << waiting_text(s) << "\n";
    said_no_worker = no_worker;
    if (tty) {
      out << "\r\033[K" << progress_line(s, true) << std::flush;
    } else {
      // A new line only when something but the clock changed.
      const std::string key = std::to_string(s.generation()) + "/" + std::to_string(s.evaluations_done()) + "/" +
                              std::to_string(s.best_us()) + "/" + std::to_string(s.run().state()) + "/" +
                              std::to_string(no_worker);
      if (key != last_key) out << progress_line(s, false) << "\n" << std::flush;
      last_key = key;
    }
    if (is_final(s.run().state())) {
      finished = true;
      ctx.TryCancel();  // we have what we came for; do not wait for evod to close the stream
      break;
    }
  }
  if (tty) out << "\n";
  const grpc::Status status = reader->Finish();
  if (!finished) {
    check(status);
    throw Failure{"UNAVAILABLE: the watch ended before run " + run_id + " finished (did evod stop?)"};
  }
  out << final_line(s) << "\n";
  return s.run().state() == v1::FAILED ? 1 : 0;
}

// Every elite of a run, best first; a run without one is an error (it has nothing to start from).
std::vector<v1::Elite> elites_of(Client& c, const std::string& run_id) {
  v1::LeaderboardRequest req;
  req.set_run_id(run_id);
  req.set_top(1000);  // all of them: a run keeps its top-k, far fewer
  v1::LeaderboardResponse r;
  check(c.stub.Leaderboard(c.context().get(), req, &r));
  if (r.elites().empty())
    throw Failure{"FAILED_PRECONDITION: run " + run_id + " has no elite to start from (yet)"};
  return {r.elites().begin(), r.elites().end()};
}

// The start genomes of a submit: the --start texts, each read once by the seed's space (old gene
// names translated here; a bad one refused before evod is asked anything), then the elites of the
// --start-from runs as evod sent them. Sent typed, each with its canonical text for an evod from
// before typed genomes. For a seed this evoctl does not know, only the texts, for evod to read.
void add_start_genomes(Client& c, const SubmitOptions& s, v1::SubmitRunRequest& req) {
  const SearchSpace* space = find_template(s.seed) ? &SearchSpace::for_template(s.seed) : nullptr;
  auto add = [&](const Genome& g) {
    req.add_start_genomes(g.text());
    *req.add_typed_start_genomes() = genome_to_proto(g);
  };
  auto read = [&](const std::string& text) {
    try {
      return space->parse(text);
    } catch (const InputError& e) {
      throw Failure{"INVALID_ARGUMENT: start genome '" + text + "': " + e.what()};
    }
  };
  auto read_message = [&](const v1::Elite& e) {
    try {
      return genome_from_proto(e.typed_genome());
    } catch (const InputError& error) {
      throw Failure{"INVALID_ARGUMENT: elite " + e.candidate_id() + ": " + error.what()};
    }
  };
  for (const auto& text : s.start_genomes) {
    if (space)
      add(read(text));
    else
      req.add_start_genomes(text);
  }
  for (const auto& run_id : s.start_from_runs)
    for (const auto& e : elites_of(c, run_id)) {
      if (!space)
        req.add_start_genomes(e.genome());
      else  // the text alone only from an evod before typed genomes
        add(e.has_typed_genome() ? read_message(e) : read(e.genome()));
    }
}

// A submit's request from the command line's options, the shapes apart.
v1::SubmitRunRequest submit_request(Client& c, const Options& o) {
  v1::SubmitRunRequest req;
  req.set_seed(o.submit.seed);
  req.set_causal(o.submit.causal);
  req.set_dtype(o.submit.dtype);
  // Unset sizes stay unset so evod applies its defaults; an explicit 0 would be refused.
  if (o.submit.generations > 0) req.set_generations(o.submit.generations);
  if (o.submit.population > 0) req.set_population(o.submit.population);
  if (o.submit.top_k > 0) req.set_top_k(o.submit.top_k);
  // The enums, and their labels for an evod from before them.
  req.set_search_strategy(o.submit.strategy);
  req.set_strategy(label(o.submit.strategy));
  if (o.submit.rng_seed_set) req.set_rng_seed(o.submit.rng_seed);
  req.set_device_class(o.submit.device_class);
  add_start_genomes(c, o.submit, req);
  req.set_fitness_from(o.submit.fitness_inputs);
  req.set_fitness_inputs(label(o.submit.fitness_inputs));
  req.set_budget_ms(o.submit.budget_ms);
  req.set_max_evals(o.submit.max_evals);
  req.set_patience(o.submit.patience);
  req.set_target_us(o.submit.target_us);
  return req;
}

// Sends one submit; its run as evod made it.
v1::Run send_submit(Client& c, v1::SubmitRunRequest& req) {
  v1::Run run;
  // One request id per run, sent again on a retry: evod returns the run the first try made
  // (whose answer was lost, or came after the deadline) instead of making a second one.
  req.set_request_id(new_request_id());
  grpc::Status status;
  for (int attempt = 1;; ++attempt) {
    status = c.stub.SubmitRun(c.context().get(), req, &run);
    const bool transient = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                           status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (!transient || attempt >= kSubmitAttempts) break;
    std::this_thread::sleep_for(std::chrono::seconds(attempt));
  }
  check(status);
  return run;
}

int submit(Client& c, const Options& o, std::ostream& out, bool tty) {
  v1::SubmitRunRequest req = submit_request(c, o);
  for (const auto& s : o.submit.shapes) req.add_shapes(s);
  const v1::Run run = send_submit(c, req);
  out << run.run_id() << "\n" << std::flush;  // alone on its line: RUN=$(evoctl submit ...)
  return o.watch ? watch(c, run.run_id(), out, tty) : 0;
}

// The start genomes a bucket's run begins from: first those the workload file names for its shapes
// (each must fit the bucket), then those of `base` that fit it, checked as evod will check them
// (canonical for the bucket's shapes, every constraint at the run's fixed shared-memory limit),
// with why each other one is left out of it. One start list serves a workload whose buckets
// differ in dtype or head dim, so a genome that fits some buckets only (an FP16 block where FP8
// asks for wgmma) starts those runs alone.
struct BucketStarts {
  v1::SubmitRunRequest request;  // base, its start genomes cut to those that fit, the bucket's own first
  size_t own = 0;                // how many of them the workload file named for the bucket's shapes
  // Per start genome of base: nullopt where it fits, else "violates 'NAME' for SHAPE".
  std::vector<std::optional<std::string>> why_not;
};

// Why genome g cannot start a run on `shapes` ("violates 'NAME' for SHAPE"), or nullopt.
std::optional<std::string> misfit(const SearchSpace& space, const Genome& genome, const std::vector<Problem>& shapes,
                                  const std::vector<std::string>& shape_texts) {
  const Genome g = space.canonical(genome, shapes);
  for (size_t k = 0; k < shapes.size(); ++k)
    if (const auto violated = space.violated_constraint(g, shapes[k], kDefaultSmemLimit))
      return "violates '" + *violated + "' for " + shape_texts[k];
  return std::nullopt;
}

BucketStarts starts_for_bucket(const SearchSpace& space, const v1::SubmitRunRequest& base, const Workload& w,
                               size_t index) {
  const WorkloadBucket& bucket = w.buckets[index];
  const std::vector<std::string> shape_texts = bucket.run_shapes();
  std::vector<Problem> shapes;
  for (const auto& t : shape_texts) shapes.push_back(space.family().parse(t, {}));
  BucketStarts out{base, 0, {}};
  out.request.clear_start_genomes();
  out.request.clear_typed_start_genomes();
  std::set<std::string> added;
  for (const Genome& g : bucket.starts()) {
    if (const auto why = misfit(space, g, shapes, shape_texts))
      throw Failure{"INVALID_ARGUMENT: workload " + w.name + ": start genome '" + g.text() +
                    "', named for a shape of bucket " + std::to_string(index + 1) + ", " + *why};
    out.request.add_start_genomes(g.text());
    *out.request.add_typed_start_genomes() = genome_to_proto(g);
    added.insert(g.text());
  }
  out.own = added.size();
  for (int i = 0; i < base.typed_start_genomes_size(); ++i) {
    out.why_not.push_back(misfit(space, genome_from_proto(base.typed_start_genomes(i)), shapes, shape_texts));
    if (out.why_not.back() || !added.insert(base.start_genomes(i)).second) continue;
    out.request.add_start_genomes(base.start_genomes(i));
    *out.request.add_typed_start_genomes() = base.typed_start_genomes(i);
  }
  return out;
}

// Each bucket's request: `base` with the bucket's shapes, its share of max_evals and the start
// genomes that fit it. A start genome that fits no bucket, or one the file names for a shape whose
// bucket it does not fit, is refused before any run is made.
std::vector<BucketStarts> bucket_requests(const Options& o, const Workload& w, const v1::SubmitRunRequest& base) {
  const SearchSpace& space = SearchSpace::for_template(w.seed);
  std::vector<BucketStarts> out;
  for (size_t i = 0; i < w.buckets.size(); ++i) {
    const WorkloadBucket& b = w.buckets[i];
    out.push_back(starts_for_bucket(space, base, w, i));
    for (const auto& s : b.run_shapes()) out.back().request.add_shapes(s);
    out.back().request.set_max_evals(max_evals_share(w, b, o.submit.max_evals));
  }
  for (int i = 0; i < base.typed_start_genomes_size(); ++i) {
    const auto fits = [i](const BucketStarts& b) { return !b.why_not[static_cast<size_t>(i)]; };
    if (out.empty() || std::any_of(out.begin(), out.end(), fits)) continue;
    throw Failure{"INVALID_ARGUMENT: start genome '" + base.start_genomes(i) + "' fits no bucket of workload " +
                  w.name + ": it " + *out.front().why_not[static_cast<size_t>(i)]};
  }
  return out;
}

// One run per bucket of the workload, heaviest first: the plan and the export to make of the
// runs on `err`, each run's id alone on its line of `out` (RUNS=$(evoctl submit --workload F)).
// A refused submit stops there, naming the runs already made.
int submit_workload(Client& c, const Options& o, const Workload& w, std::ostream& out, std::ostream& err) {
  Options each = o;
  each.submit.seed = w.seed;
  const v1::SubmitRunRequest base = submit_request(c, each);
  std::vector<BucketStarts> buckets = bucket_requests(o, w, base);
  err << "workload " << w.name << ": " << w.buckets.size() << " bucket(s), seed " << w.seed << "\n";
  std::vector<std::string> made;
  for (size_t i = 0; i < w.buckets.size(); ++i) {
    const WorkloadBucket& b = w.buckets[i];
    char share[32];
    std::snprintf(share, sizeof share, "%.0f%%", 100.0 * b.weight / w.weight);
    err << "  bucket " << i + 1 << " (" << b.group << ", weight " << share << "): tunes on";
    for (const auto& s : b.run_shapes()) err << " " << s;
    if (b.shapes.size() > kRunShapes) err << " (and serves " << b.shapes.size() - kRunShapes << " more)";
    try {
      made.push_back(send_submit(c, buckets[i].request).run_id());
    } catch (const Failure& f) {
      err << "\n";
      std::string line = f.line;
      if (!made.empty()) {
        line += " (bucket " + std::to_string(i + 1) + "; runs made before it:";
        for (const auto& r : made) line += " " + r;
        line += ")";
      }
      throw Failure{line};
    }
    err << " -> " << made.back() << "\n";
    if (buckets[i].own > 0)
      err << "    starts first from the " << buckets[i].own << " genome(s) the workload names for its shapes\n";
    for (int k = 0; k < base.start_genomes_size(); ++k)
      if (const auto& why = buckets[i].why_not[static_cast<size_t>(k)])
        err << "    start genome '" << base.start_genomes(k) << "' left out: it " << *why << "\n";
    out << made.back() << "\n" << std::flush;
  }
  err << "when they are done: evoctl export";
  for (const auto& r : made) err << " " << r;
  err << " --out " << w.name << ".cu\n";
  return 0;
}

int status(Client& c, const Options& o, std::ostream& out, bool tty) {
  if (o.watch) return watch(c, o.run_id, out, tty);
  v1::RunRef ref;
  ref.set_run_id(o.run_id);
  v1::RunStatus s;
  check(c.stub.GetRun(c.context().get(), ref, &s));
  out << status_summary(s);
  return s.run().state() == v1::FAILED ? 1 : 0;
}

int leaderboard(Client& c, const Options& o, std::ostream& out) {
  v1::LeaderboardRequest req;
  req.set_run_id(o.run_id);
  req.set_top(o.top);
  v1::LeaderboardResponse r;
  check(c.stub.Leaderboard(c.context().get(), req, &r));
  out << (o.json ? to_json(r) + "\n" : leaderboard_table(r));
  return 0;
}

int candidates(Client& c, const Options& o, std::ostream& out) {
  v1::ListCandidatesRequest req;
  req.set_run_id(o.run_id);
  req.set_failed_only(o.failed_only);
  req.set_limit(o.limit);
  v1::ListCandidatesResponse r;
  check(c.stub.ListCandidates(c.context().get(), req, &r));
  out << (o.json ? to_json(r) + "\n" : candidates_table(r));
  return 0;
}

int workers(Client& c, const Options& o, std::ostream& out) {
  v1::ListWorkersRequest req;
  req.set_include_gone(o.all);
  v1::ListWorkersResponse r;
  check(c.stub.ListWorkers(c.context().get(), req, &r));
  out << (o.json ? to_json(r) + "\n" : workers_table(r, o.all));
  return 0;
}

int runs(Client& c, const Options& o, std::ostream& out) {
  v1::ListRunsResponse r;
  check(c.stub.ListRuns(c.context().get(), v1::ListRunsRequest(), &r));
  out << (o.json ? to_json(r) + "\n" : runs_table(r));
  return 0;
}

int cancel(Client& c, const Options& o, std::ostream& out) {
  v1::RunRef ref;
  ref.set_run_id(o.run_id);
  v1::Run run;
  check(c.stub.CancelRun(c.context().get(), ref, &run));
  // evod leaves a run that had already ended as it was: say so rather than look cancelled.
  out << "run " << run.run_id() << ": " << state_name(run.state())
      << (run.state() == v1::DONE || run.state() == v1::FAILED ? " (it had ended: nothing to cancel)" : "") << "\n";
  return 0;
}

// best.cu -> best.report.md; anything else gets .report.md appended.
std::string report_path(const std::string& out) { return cu_stem(out) + ".report.md"; }

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (f) f << text;
  if (!f || !f.flush()) throw Failure{"cannot write " + path + ": " + std::strerror(errno)};
}

// Replaces `path` whole or not at all: the text goes to a file beside it, which is renamed over
// it once written; on any failure the temporary file is removed and `path` left as it was.
void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp-" + std::to_string(::getpid());
  std::ofstream f(temporary, std::ios::binary | std::ios::trunc);
  if (f) f << text;
  if (!f || !f.flush()) {
    const std::string why = std::strerror(errno);
    std::remove(temporary.c_str());
    throw Failure{"cannot write " + path + ": " + why};
  }
  f.close();
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(temporary.c_str());
    throw Failure{"cannot write " + path + ": " + why};
  }
}

// The file name as the dispatch file beside it should name it.
std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// best.cu -> libbest.so, as the report's build line names it.
std::string shared_library_name(const std::string& cu_name) { return "lib" + cu_stem(cu_name) + ".so"; }

// Which winners the model evaluator chose (ExportBucket.estimated), if any.
void print_estimates(const v1::ExportResponse& r, std::ostream& out) {
  const auto estimated = std::count_if(r.buckets().begin(), r.buckets().end(),
                                       [](const v1::ExportBucket& b) { return b.estimated(); });
  if (estimated == 0) return;
  out << "ESTIMATED: ";
  if (r.buckets_size() == 1) out << "this winner was";
  else out << estimated << " of " << r.buckets_size() << " winners " << (estimated == 1 ? "was" : "were");
  out << " chosen by the model evaluator, not measured on a GPU\n";
}

// The build line for the target evod names, and which winners the model evaluator chose: both
// read from the response's fields (ExportResponse.arch, ExportBucket.estimated), never its report.
void print_build_and_estimates(const v1::ExportResponse& r, const std::string& cu_path, const std::string& report,
                               std::ostream& out) {
  if (r.arch().empty())  // an evod that predates the field: only its report names the target
    out << "build: as " << report << " says\n";
  else
    out << "build: " << exported_build_command(cu_path, shared_library_name(base_name(cu_path)), r.arch()) << "\n";
  print_estimates(r, out);
}

// The export of `run_ids`, its report's build line naming `source_name`.
v1::ExportResponse export_of(Client& c, const std::vector<std::string>& run_ids, const std::string& source_name) {
  v1::ExportRequest req;
  // One run goes as run_id, which every evod understands; several as run_ids only, so that an
  // evod that predates dispatch tables refuses them instead of exporting the first run alone.
  if (run_ids.size() == 1) req.set_run_id(run_ids[0]);
  else for (const auto& id : run_ids) req.add_run_ids(id);
  req.set_source_name(source_name);
  v1::ExportResponse r;
  check(c.stub.ExportBest(c.context().get(), req, &r));
  return r;
}

// One run's page (cli/report_html.h) from three answers of evod: the run's status, all its elites
// and its latest candidates (as many as evod lists). Throws Failure when evod refuses any of them.
struct RunPage {
  std::string html;
  std::string summary;  // "run R, C of M candidates, E elites"
  bool estimated = false;
  // How a line names it: "(run R, C of M candidates, E elites)[ ESTIMATED]".
  std::string described() const { return "(" + summary + ")" + (estimated ? " ESTIMATED" : ""); }
};

RunPage run_page(Client& c, const std::string& run_id) {
  v1::RunRef ref;
  ref.set_run_id(run_id);
  v1::RunStatus status;
  check(c.stub.GetRun(c.context().get(), ref, &status));
  v1::LeaderboardRequest board_req;
  board_req.set_run_id(run_id);
  board_req.set_top(1000);  // all of them: a run keeps its top-k, far fewer
  v1::LeaderboardResponse board;
  check(c.stub.Leaderboard(c.context().get(), board_req, &board));
  v1::ListCandidatesRequest candidates_req;
  candidates_req.set_run_id(run_id);
  candidates_req.set_limit(limits::kMaxListedCandidates);
  v1::ListCandidatesResponse candidates;
  check(c.stub.ListCandidates(c.context().get(), candidates_req, &candidates));
  std::ostringstream summary;
  summary << "run " << status.run().run_id() << ", " << candidates.candidates_size() << " of "
          << std::max(candidates.matched(), candidates.candidates_size()) << " candidates, " << board.elites_size()
          << (board.elites_size() == 1 ? " elite" : " elites");
  return {report_html(status, board, candidates), summary.str(), status.estimated()};
}

// Each exported run's page beside the report (best.cu: best.run-0001.html), which links them
// under "## Search". A page evod cannot give (a run it no longer lists, an evod from before
// candidate lists) is left out with a line saying so: the kernel and its evidence are written
// regardless.
std::string search_pages(Client& c, const std::vector<std::string>& run_ids, const std::string& cu_path,
                         std::ostream& out) {
  std::string links;
  for (const auto& run_id : run_ids) {
    const std::string page = cu_stem(cu_path) + "." + run_id + ".html";
    try {
      const RunPage p = run_page(c, run_id);
      write_file_atomically(page, p.html);
      out << "wrote " << page << " " << p.described() << "\n";
      links += "- [" + run_id + "](" + base_name(page) + "): " + p.described() + "\n";
    } catch (const Failure& f) {
      out << "no page for run " << run_id << ": " << f.line << "\n";
    }
  }
  if (links.empty()) return "";
  return "\n## Search\n\nEach run's convergence (best time against evaluations and against wall time, every candidate "
         "coloured by the gate that stopped it), its elites' genes and its gate failures, as `evoctl report` draws "
         "them:\n\n" +
         links;
}

// --out: the .cu, its report (with links to each run's page) and its dispatch file.
void export_source(Client& c, const Options& o, std::ostream& out) {
  const v1::ExportResponse r = export_of(c, o.run_ids, base_name(o.out));  // the build line names the file written
  DispatchFile dispatch;
  try {
    dispatch = dispatch_file(r, base_name(o.out));
  } catch (const std::invalid_argument& e) {
    throw Failure{std::string("INTERNAL: ") + e.what()};
  }
  const std::string report = report_path(o.out);
  write_file(o.out, r.source());
  std::ostringstream pages;  // the pages' lines follow the kernel's and the report's
  write_file(report, r.report() + search_pages(c, o.run_ids, o.out, pages));
  out << "wrote " << o.out << " (" << r.genome() << ") and " << report << "\n" << pages.str();
  if (r.buckets_size() > 0) {  // an evod that predates buckets sends none: no dispatch file then
    const std::string dispatch_json = dispatch_path(o.out);
    write_file(dispatch_json, dispatch.json);
    out << "wrote " << dispatch_json << " (" << r.buckets_size() << (r.buckets_size() == 1 ? " bucket" : " buckets")
        << "; bench: bench/run_gpu_bench.sh " << dispatch_json << " OUT_DIR)\n";
    for (const auto& s : dispatch.skipped) out << "not in " << dispatch_json << ": " << s << "\n";
  }
  if (r.buckets_size() > 1)
    for (const auto& b : r.buckets())
      out << "bucket " << b.run_id() << ": " << genome_text(b.typed_genome(), b.genome()) << " serves "
          << b.shapes_size() << " shape(s)"
          << (b.estimated() ? " (ESTIMATED)" : "") << "\n";
  print_build_and_estimates(r, o.out, report, out);
}

// A folder the package may be written to: new, or empty.
void check_package_folder(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return;
  if (!std::filesystem::is_directory(dir, ec)) throw Failure{"--python " + dir + ": not a folder"};
  if (!std::filesystem::is_empty(dir, ec))
    throw Failure{"--python " + dir + ": the folder is not empty (give a new or empty one)"};
}

// --python: the runs grouped by the architecture that measured them, one export per group, written
// as the evo_kernels package (cli/torch_package.h).
void export_python_package(Client& c, const Options& o, std::ostream& out) {
  check_package_folder(o.python);
  std::vector<std::pair<std::string, std::string>> run_classes;
  for (const auto& id : o.run_ids) {
    v1::RunRef ref;
    ref.set_run_id(id);
    v1::RunStatus status;
    check(c.stub.GetRun(c.context().get(), ref, &status));
    run_classes.emplace_back(id, status.run().device_class());
  }
  std::vector<PackageTable> tables;
  std::vector<std::pair<std::string, std::string>> files;
  try {
    for (const ArchGroup& group : group_runs_by_arch(run_classes)) {
      PackageTable t{group, export_of(c, group.run_ids, kPackageSourceName), ""};
      t.dispatch_json = dispatch_file(t.response, kPackageSourceName).json;
      tables.push_back(std::move(t));
    }
    files = torch_package_files(tables);
  } catch (const std::invalid_argument& e) {
    throw Failure{e.what()};
  }
  for (const auto& [path, text] : files) {
    const std::filesystem::path target = std::filesystem::path(o.python) / path;
    std::error_code ec;
    std::filesystem::create_directories(target.parent_path(), ec);
    if (ec) throw Failure{"cannot create " + target.parent_path().string() + ": " + ec.message()};
    write_file(target.string(), text);
  }
  out << "wrote " << o.python << " (the evo_kernels package, " << files.size() << " files)\n";
  for (const auto& t : tables) {
    out << "  " << (t.response.arch().empty() ? t.group.arch : t.response.arch()) << ": runs";
    for (const auto& id : t.group.run_ids) out << " " << id;
    out << " (" << t.response.buckets_size() << (t.response.buckets_size() == 1 ? " bucket" : " buckets") << ")\n";
    print_estimates(t.response, out);
  }
  out << "install (PyTorch and nvcc on that machine, no network): pip install --no-build-isolation --no-index "
      << shell_quote(o.python) << "\n";
}

int export_best(Client& c, const Options& o, std::ostream& out) {
  if (!o.out.empty()) export_source(c, o, out);
  if (!o.python.empty()) export_python_package(c, o, out);
  return 0;
}

// The run's page (run_page). A refusal of any of evod's answers writes nothing.
int report(Client& c, const Options& o, std::ostream& out) {
  const RunPage p = run_page(c, o.run_id);
  write_file_atomically(o.html, p.html);
  out << "wrote " << o.html << " " << p.described() << "\n";
  return 0;
}

}  // namespace

int run_evoctl(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
               const Environment& env) {
  Options o;
  int connect_timeout_ms = env.connect_timeout_ms;
  try {
    o = parse_options(args, env.coordinator);
    if (env.connect_timeout_s)
      connect_timeout_ms = 1000 * static_cast<int>(parse_integer("EVO_CONNECT_TIMEOUT_S", *env.connect_timeout_s, 1, 600));
  } catch (const UsageError& e) {
    err << "evoctl: " << e.what() << "\n";
    return 2;
  }
  if (o.help) {
    out << help_text(o.command);
    return 0;
  }
  // A workload file is read and planned whole before evod is asked anything: a bad one makes no run.
  std::optional<Workload> workload;
  if (o.command == "submit" && !o.submit.workload.empty()) {
    try {
      workload = read_workload(o.submit.workload, o.submit.seed);
    } catch (const InputError& e) {
      err << "evoctl: " << e.what() << "\n";
      return 2;
    }
  }
  security::ClientSecurity sec;
  try {
    sec = security::load_client_security(o.token_file, env.token ? env.token->c_str() : nullptr, o.tls_ca);
  } catch (const security::SecurityError& e) {
    err << "evoctl: " << e.what() << "\n";
    return 2;
  }
  if (!o.token_file.empty())
    if (auto warning = security::token_file_warning(o.token_file)) err << "evoctl: warning: " << *warning << "\n";
  auto channel = grpc::CreateChannel(o.coordinator, security::channel_credentials(sec));
  if (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                 std::chrono::milliseconds(connect_timeout_ms))) {
    char waited[32];
    std::snprintf(waited, sizeof waited, connect_timeout_ms % 1000 ? "%.1f" : "%.0f", connect_timeout_ms / 1000.0);
    err << "evoctl: " << security::unreachable_reason(o.coordinator, sec.tls) << " (waited " << waited
        << " s; EVO_CONNECT_TIMEOUT_S waits longer)\n";
    return 1;
  }
  auto stub = v1::Coordinator::NewStub(channel);
  Client c{*stub, sec};
  try {
    if (o.command == "submit" && workload) return submit_workload(c, o, *workload, out, err);
    if (o.command == "submit") return submit(c, o, out, env.stdout_is_tty);
    if (o.command == "status") return status(c, o, out, env.stdout_is_tty);
    if (o.command == "leaderboard") return leaderboard(c, o, out);
    if (o.command == "runs") return runs(c, o, out);
    if (o.command == "workers") return workers(c, o, out);
    if (o.command == "candidates") return candidates(c, o, out);
    if (o.command == "cancel") return cancel(c, o, out);
    if (o.command == "export") return export_best(c, o, out);
    if (o.command == "report") return report(c, o, out);
  } catch (const Failure& f) {
    out << std::flush;
    err << "evoctl: " << f.line << "\n";
    return 1;
  }
  err << "evoctl: unknown command '" << o.command << "'\n";
  return 2;
}

}  // namespace evo::cli

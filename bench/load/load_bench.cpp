// load_bench: a real evod under 64 simulated workers on loopback. Prints reports per second,
// p50/p99 lease (and report) latency, database bytes per 10k evaluations, evod's peak RSS
// (VmHWM) and its RSS sampled over the run, to show that memory stays bounded; writes the same as
// JSON.
//
//   load_bench [--evod PATH] [--workers 64] [--workers-per-run 8] [--seconds 60]
//              [--population 64] [--generations 40] [--sample-ms 1000] [--json PATH] [--keep]
//              [--watchers N] [--exhaustive-submit] [--report-at N,N...]
//
// --watchers N opens N WatchRun streams (as `evoctl status --watch` does) over the groups' runs
// for the whole benchmark; --exhaustive-submit times one exhaustive SubmitRun at the end (evod
// has listed no space yet); --report-at prints the report p50 around those counts of a run's
// reports (within 10 %), to show whether a report's cost grows with its run.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "proc_memory.h"
#include "sim_worker.h"
#include "store_sqlite.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string evod = EVOD_BIN_DEFAULT;
  int workers = 64;
  int workers_per_run = 8;
  int seconds = 60;
  int population = 64;
  int generations = 40;
  int sample_ms = 1000;
  std::string json;
  bool keep = false;
  int watchers = 0;
  bool exhaustive_submit = false;
  std::vector<int64_t> report_at;
};

const char* const kUsage =
    "usage: load_bench [--evod PATH] [--workers N] [--workers-per-run N] [--seconds N]\n"
    "                  [--population N] [--generations N] [--sample-ms N] [--json PATH] [--keep]\n"
    "                  [--watchers N] [--exhaustive-submit] [--report-at N,N...]\n"
    "Starts evod on a fresh database and drives it with simulated workers over loopback gRPC.\n";

int parse_int(const char* flag, const char* value, int lo, int hi) {
  char* end = nullptr;
  long n = value ? std::strtol(value, &end, 10) : 0;
  if (!value || *end != '\0' || n < lo || n > hi) {
    std::fprintf(stderr, "load_bench: %s needs a number in %d..%d\n", flag, lo, hi);
    std::exit(2);
  }
  return static_cast<int>(n);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (a == "--keep") {
      o.keep = true;
      continue;
    } else if (a == "--exhaustive-submit") {
      o.exhaustive_submit = true;
      continue;
    } else if (a == "--watchers") {
      o.watchers = parse_int("--watchers", v, 0, 4096);
    } else if (a == "--report-at" && v) {
      std::stringstream list(v);
      for (std::string n; std::getline(list, n, ',');)
        o.report_at.push_back(parse_int("--report-at", n.c_str(), 1, 10'000'000));
    } else if (a == "--evod" && v) {
      o.evod = v;
    } else if (a == "--json" && v) {
      o.json = v;
    } else if (a == "--workers") {
      o.workers = parse_int("--workers", v, 1, 1024);
    } else if (a == "--workers-per-run") {
      o.workers_per_run = parse_int("--workers-per-run", v, 1, 1024);
    } else if (a == "--seconds") {
      o.seconds = parse_int("--seconds", v, 1, 86400);
    } else if (a == "--population") {
      o.population = parse_int("--population", v, 1, 4096);
    } else if (a == "--generations") {
      o.generations = parse_int("--generations", v, 1, 10000);
    } else if (a == "--sample-ms") {
      o.sample_ms = parse_int("--sample-ms", v, 10, 60000);
    } else {
      std::fprintf(stderr, "load_bench: unknown or incomplete option '%s'\n%s", a.c_str(), kUsage);
      std::exit(2);
    }
    ++i;
  }
  return o;
}

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

pid_t start_evod(const Options& o, const std::string& db, const std::string& address, const std::string& log) {
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    // The workers never miss a heartbeat here, so leases need not expire during the benchmark.
    execl(o.evod.c_str(), o.evod.c_str(), "serve", "--db", db.c_str(), "--listen", address.c_str(),
          "--lease-ttl-ms", "60000", static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// The watchers' open calls, so that the end of the benchmark can cancel them.
struct OpenWatches {
  std::mutex mutex;
  std::vector<grpc::ClientContext*> calls;
  bool stopped = false;
  bool open(grpc::ClientContext* ctx) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!stopped) calls.push_back(ctx);
    return !stopped;
  }
  void close(grpc::ClientContext* ctx) {
    std::lock_guard<std::mutex> lock(mutex);
    calls.erase(std::remove(calls.begin(), calls.end(), ctx), calls.end());
  }
  void cancel_all() {
    std::lock_guard<std::mutex> lock(mutex);
    stopped = true;
    for (auto* ctx : calls) ctx->TryCancel();
  }
};

// Follows a group's runs with one WatchRun stream each, as `evoctl status --watch` does, until
// stop; counts the statuses received.
void watch_runs(int index, const std::string& address, std::vector<std::unique_ptr<evo::load::RunGroup>>& groups,
                OpenWatches& watches, std::atomic<int64_t>& statuses) {
  auto stub = evo::v1::Coordinator::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  auto& group = *groups[static_cast<size_t>(index) % groups.size()];
  for (;;) {
    std::string run_id;
    {
      std::lock_guard<std::mutex> lock(group.mutex);
      run_id = group.run_id;
    }
    if (run_id.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    grpc::ClientContext ctx;
    if (!watches.open(&ctx)) return;
    evo::v1::RunRef ref;
    ref.set_run_id(run_id);
    auto reader = stub->WatchRun(&ctx, ref);
    evo::v1::RunStatus st;
    while (reader->Read(&st)) ++statuses;
    reader->Finish();
    watches.close(&ctx);
    // The run ended: wait for the group's next one.
    for (int i = 0; i < 100; ++i) {
      {
        std::lock_guard<std::mutex> lock(group.mutex);
        if (group.run_id != run_id) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

// One exhaustive SubmitRun, timed (ms); -1 when it failed.
double time_exhaustive_submit(const std::string& address) {
  auto stub = evo::v1::Coordinator::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  evo::v1::SubmitRunRequest req;
  req.set_seed("fa_s512_v3");
  req.set_search_strategy(evo::v1::SEARCH_STRATEGY_EXHAUSTIVE);
  req.set_population(64);
  req.set_generations(2);
  req.set_device_class("sim/exhaustive");
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  evo::v1::Run run;
  auto t0 = Clock::now();
  grpc::Status s = stub->SubmitRun(&ctx, req, &run);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (!s.ok()) std::fprintf(stderr, "load_bench: exhaustive submit failed: %s\n", s.error_message().c_str());
  return s.ok() ? ms : -1;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  size_t k = static_cast<size_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return v[k];
}

int64_t file_size(const std::string& path) {
  std::error_code ec;
  auto n = fs::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(n);
}

std::string machine() {
  utsname u{};
  uname(&u);
  std::ifstream cpu("/proc/cpuinfo");
  std::string line, model;
  while (std::getline(cpu, line))
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  return model + ", " + std::to_string(std::thread::hardware_concurrency()) + " logical CPUs, " + u.sysname + " " +
         u.release;
}

// The simulated workers, in groups that each submit and share their own runs.
struct Load {
  std::vector<std::unique_ptr<evo::load::RunGroup>> groups;
  std::vector<std::unique_ptr<evo::load::SimWorker>> sims;
};

Load make_load(const Options& o, const std::string& address) {
  evo::load::SimConfig config;
  config.address = address;
  config.population = o.population;
  config.generations = o.generations;
  Load load;
  const int groups = (o.workers + o.workers_per_run - 1) / o.workers_per_run;
  for (int g = 0; g < groups; ++g) {
    load.groups.push_back(std::make_unique<evo::load::RunGroup>());
    load.groups.back()->index = g;
  }
  for (int w = 0; w < o.workers; ++w)
    load.sims.push_back(std::make_unique<evo::load::SimWorker>(w, *load.groups[w / o.workers_per_run], config));
  return load;
}

// What evod showed while the load ran: its RSS sampled every sample_ms, its peak, the statuses
// its watch streams sent, and the exhaustive submit's time.
struct Observed {
  double elapsed = 0;
  nlohmann::json rss_series = nlohmann::json::array();
  evo::load::ProcMemory peak;
  int64_t watch_statuses = 0;
  double exhaustive_submit_ms = 0;
};

// Runs every simulated worker and watcher against evod for o.seconds, then stops them.
Observed drive(const Options& o, pid_t evod, const std::string& address, Load& load) {
  Observed seen;
  std::atomic<bool> stop{false};
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (auto& s : load.sims) threads.emplace_back([&s, &stop] { s->run(stop); });
  std::atomic<int64_t> watch_statuses{0};
  OpenWatches watches;
  std::vector<std::thread> watcher_threads;
  for (int i = 0; i < o.watchers; ++i)
    watcher_threads.emplace_back([&, i] { watch_runs(i, address, load.groups, watches, watch_statuses); });
  const auto end = t0 + std::chrono::seconds(o.seconds);
  while (Clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(o.sample_ms));
    const auto m = evo::load::read_proc_memory(evod);
    const double t = std::chrono::duration<double>(Clock::now() - t0).count();
    seen.rss_series.push_back({{"t_s", t}, {"rss_kb", m.rss_kb}});
  }
  seen.peak = evo::load::read_proc_memory(evod);
  stop = true;
  for (auto& t : threads) t.join();
  watches.cancel_all();
  for (auto& t : watcher_threads) t.join();
  seen.elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  seen.watch_statuses = watch_statuses.load();
  seen.exhaustive_submit_ms = o.exhaustive_submit ? time_exhaustive_submit(address) : 0;
  return seen;
}

// What the store holds once evod has stopped cleanly (which checkpoints the WAL into the file).
struct Stored {
  int64_t db_bytes = 0, evaluations = 0, candidates = 0;
};

Stored read_store(const std::string& db) {
  Stored stored;
  stored.db_bytes = file_size(db) + file_size(db + "-wal");
  evo::SqliteConnection conn(db);
  auto s = conn.prepare("SELECT (SELECT COUNT(*) FROM evaluations), (SELECT COUNT(*) FROM candidates)");
  if (s.step()) {
    stored.evaluations = s.column_int(0);
    stored.candidates = s.column_int(1);
  }
  return stored;
}

// The figures the benchmark prints and writes.
struct Figures {
  int64_t reports = 0, errors = 0, empty = 0, runs = 0;
  std::vector<double> lease_ms, report_ms;
  std::vector<std::vector<double>> report_ms_at;  // per --report-at count
  double lease_p50 = 0, lease_p99 = 0, report_p50 = 0, report_p99 = 0;
  int64_t rss_q2 = 0, rss_q4 = 0, rss_start = 0, rss_end = 0;
  double db_bytes_per_10k = 0;
};

Figures summarise(const Options& o, const Load& load, const Observed& seen, const Stored& stored) {
  Figures f;
  f.report_ms_at.resize(o.report_at.size());
  for (const auto& s : load.sims) {
    const auto& st = s->stats();
    for (const auto& [before, ms] : st.report_at)
      for (size_t k = 0; k < o.report_at.size(); ++k)
        if (std::abs(static_cast<double>(before - o.report_at[k])) <= 0.1 * static_cast<double>(o.report_at[k]))
          f.report_ms_at[k].push_back(ms);
    f.lease_ms.insert(f.lease_ms.end(), st.lease_ms.begin(), st.lease_ms.end());
    f.report_ms.insert(f.report_ms.end(), st.report_ms.begin(), st.report_ms.end());
    f.reports += st.reports;
    f.errors += st.errors;
    f.empty += st.empty_leases;
    f.runs += st.runs_submitted;
  }
  // Memory bounded: RSS over the last quarter of the run against the second quarter (after warm-up).
  auto quarter_max = [&](double from, double to) {
    int64_t m = 0;
    for (const auto& p : seen.rss_series) {
      const double t = p["t_s"];
      if (t >= from * seen.elapsed && t < to * seen.elapsed) m = std::max<int64_t>(m, p["rss_kb"]);
    }
    return m;
  };
  f.rss_q2 = quarter_max(0.25, 0.5);
  f.rss_q4 = quarter_max(0.75, 1.01);
  f.rss_start = seen.rss_series.empty() ? 0 : static_cast<int64_t>(seen.rss_series.front()["rss_kb"]);
  f.rss_end = seen.rss_series.empty() ? 0 : static_cast<int64_t>(seen.rss_series.back()["rss_kb"]);
  f.lease_p50 = percentile(f.lease_ms, 0.50);
  f.lease_p99 = percentile(f.lease_ms, 0.99);
  f.report_p50 = percentile(f.report_ms, 0.50);
  f.report_p99 = percentile(f.report_ms, 0.99);
  f.db_bytes_per_10k = stored.evaluations ? static_cast<double>(stored.db_bytes) * 10000.0 /
                                                static_cast<double>(stored.evaluations)
                                          : 0;
  return f;
}

// Prints the table; returns the report-at figures as JSON for the file.
nlohmann::json print_figures(const Options& o, const Observed& seen, const Stored& stored, const Figures& f) {
  std::printf("load_bench: %d simulated workers (%d per run), %.1f s, evod %s\n", o.workers, o.workers_per_run,
              seen.elapsed, o.evod.c_str());
  std::printf("machine: %s\n", machine().c_str());
  std::printf("%-34s %14s\n", "figure", "value");
  std::printf("%-34s %14.1f\n", "reports per second", static_cast<double>(f.reports) / seen.elapsed);
  std::printf("%-34s %14lld\n", "reports accepted", static_cast<long long>(f.reports));
  std::printf("%-34s %14lld\n", "lease calls (empty answers)", static_cast<long long>(f.empty));
  std::printf("%-34s %14lld\n", "failed RPCs", static_cast<long long>(f.errors));
  std::printf("%-34s %14lld\n", "runs submitted", static_cast<long long>(f.runs));
  std::printf("%-34s %14.2f\n", "lease latency p50 (ms)", f.lease_p50);
  std::printf("%-34s %14.2f\n", "lease latency p99 (ms)", f.lease_p99);
  std::printf("%-34s %14.2f\n", "report latency p50 (ms)", f.report_p50);
  std::printf("%-34s %14.2f\n", "report latency p99 (ms)", f.report_p99);
  std::printf("%-34s %14d\n", "watchers", o.watchers);
  std::printf("%-34s %14lld\n", "statuses sent to watchers", static_cast<long long>(seen.watch_statuses));
  nlohmann::json at = nlohmann::json::array();
  for (size_t k = 0; k < o.report_at.size(); ++k) {
    const size_t calls = f.report_ms_at[k].size();
    const double p50 = percentile(f.report_ms_at[k], 0.50);
    std::printf("report p50 at %6lld reports (ms) %14.2f  (%zu calls)\n", static_cast<long long>(o.report_at[k]), p50,
                calls);
    at.push_back({{"run_reports", o.report_at[k]}, {"p50_ms", p50}, {"calls", calls}});
  }
  if (o.exhaustive_submit) std::printf("%-34s %14.1f\n", "exhaustive submit (ms)", seen.exhaustive_submit_ms);
  std::printf("%-34s %14lld\n", "evaluations stored", static_cast<long long>(stored.evaluations));
  std::printf("%-34s %14lld\n", "candidates stored", static_cast<long long>(stored.candidates));
  std::printf("%-34s %14.2f\n", "database MiB", static_cast<double>(stored.db_bytes) / 1048576.0);
  std::printf("%-34s %14.2f\n", "database MiB per 10k evaluations", f.db_bytes_per_10k / 1048576.0);
  std::printf("%-34s %14.1f\n", "evod peak RSS (VmHWM, MiB)", static_cast<double>(seen.peak.peak_kb) / 1024.0);
  std::printf("%-34s %14.1f\n", "evod RSS first sample (MiB)", static_cast<double>(f.rss_start) / 1024.0);
  std::printf("%-34s %14.1f\n", "evod RSS max, 2nd quarter (MiB)", static_cast<double>(f.rss_q2) / 1024.0);
  std::printf("%-34s %14.1f\n", "evod RSS max, last quarter (MiB)", static_cast<double>(f.rss_q4) / 1024.0);
  std::printf("%-34s %14.1f\n", "evod RSS last sample (MiB)", static_cast<double>(f.rss_end) / 1024.0);
  return at;
}

void write_json(const Options& o, const Observed& seen, const Stored& stored, const Figures& f,
                const nlohmann::json& report_at) {
  nlohmann::json j = {
      {"workers", o.workers},
      {"workers_per_run", o.workers_per_run},
      {"seconds", seen.elapsed},
      {"machine", machine()},
      {"reports", f.reports},
      {"reports_per_s", static_cast<double>(f.reports) / seen.elapsed},
      {"empty_leases", f.empty},
      {"failed_rpcs", f.errors},
      {"runs_submitted", f.runs},
      {"lease_ms", {{"p50", f.lease_p50}, {"p99", f.lease_p99}, {"calls", f.lease_ms.size()}}},
      {"report_ms", {{"p50", f.report_p50}, {"p99", f.report_p99}, {"calls", f.report_ms.size()}}},
      {"evaluations", stored.evaluations},
      {"candidates", stored.candidates},
      {"db_bytes", stored.db_bytes},
      {"db_bytes_per_10k_evaluations", f.db_bytes_per_10k},
      {"evod_peak_rss_kb", seen.peak.peak_kb},
      {"evod_rss_kb_max_q2", f.rss_q2},
      {"evod_rss_kb_max_q4", f.rss_q4},
      {"evod_rss_series", seen.rss_series},
      {"watchers", o.watchers},
      {"watch_statuses", seen.watch_statuses},
      {"report_ms_at_run_reports", report_at},
      {"exhaustive_submit_ms", o.exhaustive_submit ? nlohmann::json(seen.exhaustive_submit_ms) : nlohmann::json()},
  };
  std::ofstream(o.json) << j.dump(2) << "\n";
  std::printf("json: %s\n", o.json.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (access(o.evod.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "load_bench: evod not found at '%s' (use --evod PATH)\n", o.evod.c_str());
    return 2;
  }
  std::string tmpl = (fs::temp_directory_path() / "evo-load-XXXXXX").string();
  const std::string dir = mkdtemp(tmpl.data());
  const std::string db = dir + "/evo.db", log = dir + "/evod.log";
  const std::string address = "127.0.0.1:" + std::to_string(free_port());
  const pid_t evod = start_evod(o, db, address, log);
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(20))) {
    std::fprintf(stderr, "load_bench: evod did not come up on %s (log: %s)\n", address.c_str(), log.c_str());
    kill(evod, SIGKILL);
    return 1;
  }
  Load load = make_load(o, address);
  const Observed seen = drive(o, evod, address, load);
  kill(evod, SIGTERM);
  int status = 0;
  waitpid(evod, &status, 0);
  const Stored stored = read_store(db);
  const Figures figures = summarise(o, load, seen, stored);
  const nlohmann::json report_at = print_figures(o, seen, stored, figures);
  if (!o.json.empty()) write_json(o, seen, stored, figures, report_at);
  if (o.keep)
    std::printf("kept: %s\n", dir.c_str());
  else
    fs::remove_all(dir);
  // A failed RPC under load is a finding, not noise: the exit status says so.
  return figures.errors == 0 && figures.reports > 0 ? 0 : 1;
}

#include "worker_daemon.h"

#include <unistd.h>

#include <atomic>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <pthread.h>
#include <set>
#include <string>
#include <thread>

#include <spdlog/spdlog.h>

#include "coordinator_link.h"
#include "evaluator.h"
#include "genome_proto.h"
#include "host_resources.h"
#include "search_space.h"
#include "token.h"
#include "problem.h"
#include "family.h"
#include "template_registry.h"
#include "log_ids.h"
#include "wire_labels.h"

namespace evo {

namespace {

// "valid:0,compile:5210,...": where an evaluation's wall time went, gate by gate, in one token.
std::string gate_times_text(const v1::Evaluation& e) {
  std::string out;
  for (const auto& g : e.gates()) {
    if (!out.empty()) out += ",";
    out += label(g.kind()) + ":" + std::to_string(static_cast<long long>(g.elapsed_ms() + 0.5));
  }
  return out.empty() ? "-" : out;
}

const char* const kUsage =
    "usage: evo-worker [--coordinator HOST:PORT] [--gpu N] [--backend cuda|model] [--name NAME]\n"
    "                  [--max-inflight N] [--compile-threads N] [--token-file FILE] [--tls-ca CA]\n"
    "                  [--enrolment-key-file FILE] [--child-per-evaluation] [-v]\n"
    "       evo-worker --all-gpus [options]                   one worker per visible GPU\n"
    "       evo-worker --backend model --workers N [options]  N model workers\n"
    "       evo-worker eval [options]                         evaluate one genome once (eval --help)\n"
    "\n"
    "Runs the worker daemon: registers with evod, leases candidate kernels, compiles the next ones\n"
    "while the current one is evaluated, and reports each result. Each registration gets a\n"
    "credential from evod that every later call carries. Exits 1 when evod refuses it\n"
    "(PERMISSION_DENIED: quarantined, its results having kept disagreeing with its peers', or an\n"
    "enrolment key that is missing, unknown or refused).\n"
    "\n"
    "  --coordinator HOST:PORT  evod's address (default: $EVO_COORDINATOR, else 127.0.0.1:50051)\n"
    "  --gpu N                  CUDA device index (default: 0)\n"
    "  --backend cuda|model     cuda measures on the GPU; model needs no GPU and reports estimated\n"
    "                           results (default: cuda)\n"
    "  --name NAME              shown to people (default: HOSTNAME:gpuN, HOSTNAME:model on the model)\n"
    "  --max-inflight N         leases held at once: one evaluated, the rest compiling (default: 2;\n"
    "                           evod grants no more than this worker's share of the open work\n"
    "                           among the live workers of its class)\n"
    "  --child-per-evaluation   start a fresh gate process for every evaluation instead of one that\n"
    "                           serves evaluation after evaluation until one fails (slower; for\n"
    "                           comparison and diagnosis)\n"
    "  --compile-threads N      NVRTC compile threads (default: the cores this process may use divided\n"
    "                           by the workers on the host: a cuda worker counts one per visible GPU)\n"
    "  --all-gpus               start one worker per visible GPU, each a child process with --gpu K and\n"
    "                           the name HOST:gpuK (--name P: P:gpuK); one that dies is not restarted,\n"
    "                           the others run on, and evo-worker exits 1 naming it once all have ended\n"
    "  --workers N              with --backend model: N model workers, named HOST:modelK\n"
    "  --token-file FILE        evod's shared token, sent on every call (default: $EVO_TOKEN, else\n"
    "                           none); a file keeps it out of `ps`\n"
    "  --tls-ca CA              connect over TLS, trusting evod's certificate if CA (PEM) signed it\n"
    "  --enrolment-key-file FILE\n"
    "                           register under the enrolment whose key FILE holds (`evod enrol NAME`\n"
    "                           on evod's host): needed where evod runs --enrolled-workers-only\n"
    "  -v, --verbose            debug logging\n"
    "  -h, --help               this text\n"
    "The compile cache is $EVO_CACHE_DIR (else $XDG_CACHE_HOME/evo, else ~/.cache/evo).\n";

struct DaemonOptions {
  std::string coordinator = "127.0.0.1:50051";
  int gpu = 0;
  std::string backend = "cuda";
  std::string name;
  int max_inflight = 2;
  int compile_threads = 0;  // 0: host_resources.h's default
  bool verbose = false;
  std::string token_file;
  std::string tls_ca;
  security::ClientSecurity security;  // loaded from token_file / $EVO_TOKEN / tls_ca
  std::string enrolment_key_file;
  std::string enrolment_key;          // read from enrolment_key_file
  bool child_per_evaluation = false;
};

int usage_error(const std::string& line) {
  std::fprintf(stderr, "evo-worker: %s\n(see evo-worker --help)\n", line.c_str());
  return 2;
}

bool parse_int(const char* text, int lo, int hi, int* out) {
  if (!text) return false;
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

// Returns -1 when the daemon should run, else an exit status.
int parse_args(int argc, char** argv, DaemonOptions* opt) {
  // As evoctl: one exported variable points both at the same evod.
  if (const char* env = std::getenv("EVO_COORDINATOR"); env && *env) opt->coordinator = env;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "-v" || a == "--verbose") {
      opt->verbose = true;
    } else if (a == "--coordinator") {
      if (!next || !*next) return usage_error("--coordinator needs HOST:PORT");
      opt->coordinator = argv[++i];
    } else if (a == "--gpu") {
      if (!parse_int(next, 0, 1023, &opt->gpu)) return usage_error("--gpu needs a device index 0..1023");
      ++i;
    } else if (a == "--backend") {
      if (!next || (std::string(next) != "cuda" && std::string(next) != "model"))
        return usage_error("--backend must be cuda or model");
      opt->backend = argv[++i];
    } else if (a == "--name") {
      if (!next || !*next) return usage_error("--name needs a name");
      opt->name = argv[++i];
    } else if (a == "--token-file" || a == "--tls-ca" || a == "--enrolment-key-file") {
      if (!next || !*next) return usage_error(a + " needs a file");
      (a == "--token-file" ? opt->token_file : a == "--tls-ca" ? opt->tls_ca : opt->enrolment_key_file) = argv[++i];
    } else if (a == "--child-per-evaluation") {
      opt->child_per_evaluation = true;
    } else if (a == "--max-inflight") {
      if (!parse_int(next, 1, 64, &opt->max_inflight)) return usage_error("--max-inflight needs a number in 1..64");
      ++i;
    } else if (a == "--compile-threads") {
      if (!parse_int(next, 1, 1024, &opt->compile_threads))
        return usage_error("--compile-threads needs a number in 1..1024");
      ++i;
    } else {
      return usage_error("unknown option '" + a + "'");
    }
  }
  try {
    opt->security = security::load_client_security(opt->token_file, std::getenv(security::kTokenEnv), opt->tls_ca);
    if (!opt->enrolment_key_file.empty())
      opt->enrolment_key = security::read_secret_file(opt->enrolment_key_file, "enrolment key file");
  } catch (const security::SecurityError& e) {
    std::fprintf(stderr, "evo-worker: %s\n", e.what());
    return 2;
  }
  if (opt->name.empty()) {
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    opt->name = std::string(host) + (opt->backend == "model" ? ":model" : ":gpu" + std::to_string(opt->gpu));
  }
  return -1;
}

// A lease with its genome read (or the reason it would not read): the typed genome, checked once
// against its kernel's space; the text only from an evod before it.
// How long the daemon waits before it looks again at leases whose kernels are still compiling.
constexpr int kCompileWaitPollMs = 20;

struct Work {
  v1::Lease lease;
  Genome genome;
  std::vector<Problem> shapes;
  std::string parse_error;
};

Work prepare(const v1::Lease& lease) {
  Work w;
  w.lease = lease;
  try {
    w.shapes = problems_of(lease.problems(), lease.shapes());
    if (lease.has_typed_genome()) {
      w.genome = genome_from_proto(lease.typed_genome());
    } else {
      auto colon = lease.genome().find(':');
      std::string template_id = lease.genome().substr(0, colon == std::string::npos ? 0 : colon);
      w.genome = SearchSpace::for_template(template_id).parse(lease.genome());
    }
  } catch (const std::exception& e) {
    w.parse_error = e.what();
  }
  return w;
}

// The leases this worker holds: what heartbeats extend, and those evod said expired.
class HeldLeases {
 public:
  void add(const std::string& id) {
    std::lock_guard<std::mutex> lock(mutex_);
    held_.insert(id);
  }
  void remove(const std::string& id) {
    std::lock_guard<std::mutex> lock(mutex_);
    held_.erase(id);
    expired_.erase(id);
  }
  std::vector<std::string> ids() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {held_.begin(), held_.end()};
  }
  // False when the lease is no longer held (reported since the heartbeat named it).
  bool expire(const std::string& id) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!held_.erase(id)) return false;
    expired_.insert(id);
    return true;
  }
  bool expired(const std::string& id) {
    std::lock_guard<std::mutex> lock(mutex_);
    return expired_.count(id) > 0;
  }

 private:
  std::mutex mutex_;
  std::set<std::string> held_;
  std::set<std::string> expired_;
};

class WorkerDaemon {
 public:
  WorkerDaemon(const DaemonOptions& opt, Evaluator& evaluator, std::atomic<bool>& stop)
      : opt_(opt), evaluator_(evaluator), stop_(stop), link_(opt.coordinator, stop, opt.security) {}

  int run() {
    if (!register_self()) return stop_ ? 0 : 1;
    std::thread beats([this] { heartbeat_loop(); });
    std::deque<Work> queue;
    while (!stop_) {
      fill(queue);
      if (queue.empty()) {
        link_.sleep_for(retry_after_ms_);
        continue;
      }
      // The first lease whose kernels are compiled: one slow compile must not hold the GPU idle
      // while the leases behind it are ready. With none ready, look again shortly.
      auto ready = std::find_if(queue.begin(), queue.end(), [&](const Work& w) {
        return !w.parse_error.empty() || evaluator_.compiled(w.genome, w.shapes);
      });
      if (ready == queue.end()) {
        link_.sleep_for(kCompileWaitPollMs);
        continue;
      }
      Work w = std::move(*ready);
      queue.erase(ready);
      evaluate_and_report(w);
    }
    // Leases still queued are dropped: evod hands them out again when they expire.
    for (const auto& w : queue) {
      spdlog::info("event=lease_dropped run_id={} candidate_id={} lease_id={} reason=stopping", w.lease.run_id(),
                   w.lease.candidate_id(), w.lease.lease_id());
      held_.remove(w.lease.lease_id());
    }
    link_.wake();
    beats.join();
    spdlog::info("event=worker_stopped worker_id={}", worker_id_);
    return refused_ ? 1 : 0;
  }

  void wake() { link_.wake(); }

 private:
  bool register_self() {
    v1::RegisterWorkerRequest req;
    req.set_name(opt_.name);
    req.set_enrolment_key(opt_.enrolment_key);
    *req.mutable_device() = evaluator_.device();
    // evod registers only workers built from its own kernel templates.
    for (auto& f : template_fingerprints()) req.mutable_device()->add_template_fingerprints(std::move(f));
    auto resp = link_.register_worker(req);
    if (!resp) return false;
    set_identity(resp->worker_id(), resp->credential());
    heartbeat_ms_ = std::max(50, resp->heartbeat_interval_ms());
    spdlog::info("event=worker_registered worker_id={} name={} device_class=\"{}\" heartbeat_ms={}", worker_id_,
                 opt_.name, evaluator_.device().device_class(), heartbeat_ms_);
    return true;
  }

  // Tops the local queue up to max_inflight leases and starts compiling every new one, so the
  // compiler works on the next candidates while the current one is evaluated.
  void fill(std::deque<Work>& queue) {
    int want = opt_.max_inflight - static_cast<int>(queue.size());
    if (want <= 0) return;
    // While leases wait for their compiles the loop comes back every kCompileWaitPollMs; evod is
    // asked again only as often as it said to when it had nothing.
    const auto now = std::chrono::steady_clock::now();
    if (!queue.empty() && now < next_lease_poll_) return;
    v1::LeaseRequest req;
    const Identity me = identity();
    req.set_worker_id(me.worker_id);
    req.set_credential(me.credential);
    req.set_max_candidates(want);
    // What this worker holds: a lease evod granted that never arrived is returned at once.
    req.set_names_held_leases(true);
    for (const auto& id : held_.ids()) req.add_held_lease_ids(id);
    grpc::Status error;
    auto resp = link_.lease(req, &error);
    if (!resp) {
      if (error.error_code() == grpc::StatusCode::NOT_FOUND) {
        // evod does not know us (a fresh database): register again.
        spdlog::warn("event=worker_unknown worker_id={} error=\"{}\" registering again", worker_id_,
                     error.error_message());
        register_self();
      } else if (error.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
        // Quarantined, or evod no longer takes our credential: an operator must look.
        spdlog::error("event=worker_refused worker_id={} error=\"{}\" stopping", worker_id_, error.error_message());
        refused_ = true;
        stop_ = true;
      } else if (!stop_) {
        spdlog::error("event=lease_failed worker_id={} error=\"{}\"", worker_id_, error.error_message());
        link_.sleep_for(1000);
      }
      return;
    }
    retry_after_ms_ = resp->retry_after_ms() > 0 ? resp->retry_after_ms() : 200;
    next_lease_poll_ = resp->leases().empty() ? now + std::chrono::milliseconds(retry_after_ms_) : now;
    for (const auto& lease : resp->leases()) {
      held_.add(lease.lease_id());
      Work w = prepare(lease);
      spdlog::info("event=leased run_id={} candidate_id={} lease_id={} confirmation={} genome={}", lease.run_id(),
                   lease.candidate_id(), lease.lease_id(), lease.confirmation(),
                   w.parse_error.empty() ? w.genome.text() : lease.genome());
      if (w.parse_error.empty()) {
        LogIdsScope ids(lease.run_id(), lease.candidate_id());
        evaluator_.prefetch(w.genome, w.shapes);
      }
      queue.push_back(std::move(w));
    }
  }

  void evaluate_and_report(const Work& w) {
    const auto& lease = w.lease;
    LogIdsScope ids(lease.run_id(), lease.candidate_id());
    if (held_.expired(lease.lease_id())) {
      spdlog::warn("event=lease_dropped run_id={} candidate_id={} lease_id={} reason=expired", lease.run_id(),
                   lease.candidate_id(), lease.lease_id());
      held_.remove(lease.lease_id());
      return;
    }
    v1::Evaluation e;
    if (!w.parse_error.empty()) {
      e.set_status(v1::INVALID);
      e.set_message(w.parse_error);
    } else {
      // The sanitizer gate runs on confirmations: those are the candidates about to enter the elites.
      e = evaluator_.evaluate(w.genome, w.shapes, lease.confirmation());
    }
    if (!e.has_device()) *e.mutable_device() = evaluator_.device();
    spdlog::info("event=evaluated run_id={} candidate_id={} lease_id={} status={} fitness_us={:.3f} wall_ms={:.0f} "
                 "gate_ms={} message=\"{}\"",
                 lease.run_id(), lease.candidate_id(), lease.lease_id(), v1::EvalStatus_Name(e.status()),
                 e.fitness_us(), e.wall_ms(), gate_times_text(e), e.message());
    v1::ReportRequest req;
    const Identity me = identity();
    req.set_worker_id(me.worker_id);
    req.set_credential(me.credential);
    req.set_lease_id(lease.lease_id());
    *req.mutable_evaluation() = e;
    grpc::Status error;
    auto resp = link_.report(req, &error);
    if (!resp)
      spdlog::warn("event=report_rejected run_id={} candidate_id={} lease_id={} code={} error=\"{}\"", lease.run_id(),
                   lease.candidate_id(), lease.lease_id(), static_cast<int>(error.error_code()),
                   error.error_message());
    else if (resp->duplicate())
      spdlog::info("event=report_duplicate run_id={} candidate_id={} lease_id={}", lease.run_id(),
                   lease.candidate_id(), lease.lease_id());
    held_.remove(lease.lease_id());
  }

  void heartbeat_loop() {
    while (!stop_) {
      link_.sleep_for(heartbeat_ms_);
      if (stop_) break;
      auto ids = held_.ids();
      v1::HeartbeatRequest req;
      const Identity me = identity();
      req.set_worker_id(me.worker_id);
      req.set_credential(me.credential);
      for (const auto& id : ids) req.add_lease_ids(id);
      grpc::Status error;
      auto resp = link_.heartbeat(req, &error);
      if (!resp) {
        spdlog::debug("event=heartbeat_failed worker_id={} error=\"{}\"", me.worker_id, error.error_message());
        continue;
      }
      for (const auto& id : resp->expired_lease_ids())
        if (held_.expire(id)) spdlog::warn("event=lease_expired worker_id={} lease_id={}", me.worker_id, id);
    }
  }

  const DaemonOptions& opt_;
  Evaluator& evaluator_;
  std::atomic<bool>& stop_;
  CoordinatorLink link_;
  HeldLeases held_;
  // Who evod knows us as: the id and credential of the last registration. The heartbeat thread
  // reads them while the main thread may register again.
  struct Identity {
    std::string worker_id;
    std::string credential;
  };
  Identity identity() {
    std::lock_guard<std::mutex> lock(identity_mutex_);
    return {worker_id_, credential_};
  }
  void set_identity(const std::string& worker_id, const std::string& credential) {
    std::lock_guard<std::mutex> lock(identity_mutex_);
    worker_id_ = worker_id;
    credential_ = credential;
  }

  std::mutex identity_mutex_;
  std::string worker_id_;  // written under identity_mutex_; the main thread's logs read it as is
  std::string credential_;
  std::chrono::steady_clock::time_point next_lease_poll_{};
  bool refused_ = false;   // evod refused our calls (PERMISSION_DENIED): exit non-zero
  int heartbeat_ms_ = 1000;
  int retry_after_ms_ = 200;
};

}  // namespace

int check_worker_daemon_args(int argc, char** argv) {
  DaemonOptions opt;
  return parse_args(argc, argv, &opt);
}

int run_worker_daemon(int argc, char** argv) {
  DaemonOptions opt;
  if (int rc = parse_args(argc, argv, &opt); rc >= 0) return rc;
  // The worker's name in every line: several workers of one host may write to one log.
  std::string tag = opt.name;
  for (size_t p = tag.find('%'); p != std::string::npos; p = tag.find('%', p + 2)) tag.insert(p, "%");
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ evo-worker[" + tag + "] %v");
  spdlog::set_level(opt.verbose ? spdlog::level::debug : spdlog::level::info);
  if (!opt.token_file.empty())
    if (auto warning = security::token_file_warning(opt.token_file))
      spdlog::warn("event=token_file_readable {}", *warning);
  if (!opt.enrolment_key_file.empty())
    if (auto warning = security::secret_file_warning(opt.enrolment_key_file, "enrolment key file",
                                                     "can register workers as this enrolment"))
      spdlog::warn("event=enrolment_key_file_readable {}", *warning);

  // Block the stop signals before any thread starts; one thread waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  std::unique_ptr<Evaluator> evaluator;
  try {
    EvaluatorOptions eo;
    eo.backend = opt.backend;
    eo.gpu = opt.gpu;
    eo.child_per_evaluation = opt.child_per_evaluation;
    std::string sized_by = "from=--compile-threads";
    eo.compile_threads = opt.compile_threads;
    if (!eo.compile_threads) {
      const int workers_here = workers_on_host_for(opt.backend);
      eo.compile_threads = default_compile_threads(host_cores(), workers_here);
      sized_by = "host_cores=" + std::to_string(host_cores()) + " workers_on_host=" + std::to_string(workers_here) +
                 " from=default";
    }
    evaluator = make_evaluator(eo);
    // Once the evaluator stands: without a GPU the one line people get is make_evaluator's.
    spdlog::info("event=compile_pool threads={} {}", eo.compile_threads, sized_by);
  } catch (const std::exception& e) {
    std::string line = e.what();
    if (opt.backend == "cuda" && line.find("--backend model") == std::string::npos)
      line += " (without a GPU, use --backend model)";
    std::fprintf(stderr, "evo-worker: %s\n", line.c_str());
    return 1;
  }

  std::atomic<bool> stop{false}, signalled{false};
  WorkerDaemon daemon(opt, *evaluator, stop);
  std::thread signal_waiter([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (signalled.exchange(true)) return;  // the daemon ended on its own and released us
    if (sig == SIGTERM || sig == SIGINT) {
      spdlog::info("event=stopping signal={} (finishing the current evaluation)", sig == SIGTERM ? "SIGTERM" : "SIGINT");
      stop = true;
      daemon.wake();
    }
  });
  int rc = daemon.run();
  // run() returned on its own (registration refused, or evod refused a later call, which sets
  // stop too): release the waiter thread, which no signal reached.
  if (!signalled.exchange(true)) pthread_kill(signal_waiter.native_handle(), SIGTERM);
  signal_waiter.join();
  return rc;
}

}  // namespace evo

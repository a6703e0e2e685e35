// evod: the coordinator daemon. `evod serve [--db evo.db] [--init] [--listen 127.0.0.1:50051]
// [--lease-ttl-ms N] [--token-file F] [--tls-cert C --tls-key K] [--insecure]
// [--enrolled-workers-only] [-v]`, and `evod enrol` (enrol_command.h). All state lives in the
// SQLite database: SIGKILL loses nothing, and
// SIGTERM/SIGINT stop it gracefully (in-flight RPCs finish, watch streams end).
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <pthread.h>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "coordinator.h"
#include "coordinator_service.h"
#include "enrol_command.h"
#include "client_security.h"
#include "grpc_server.h"
#include "listen_policy.h"
#include "token.h"
#include "tls_pair.h"
#include "store.h"

namespace {

const char* const kUsage =
    "usage: evod serve [--db PATH] [--init] [--listen HOST:PORT] [--lease-ttl-ms N] [--max-db-mb N] [-v]\n"
    "                  [--token-file FILE] [--tls-cert CERT --tls-key KEY] [--insecure]\n"
    "                  [--enrolled-workers-only]\n"
    "       evod enrol NAME | --list | --revoke NAME | --release NAME [--db PATH]   (evod enrol --help)\n"
    "\n"
    "Runs the evo coordinator: keeps runs, candidates, leases and results in a SQLite database and\n"
    "hands candidate kernels to evo-worker daemons over gRPC.\n"
    "\n"
    "  --db PATH           SQLite database file, created if missing; its directory must exist\n"
    "                      (default: evo.db). It is checked at start (PRAGMA quick_check): a\n"
    "                      corrupt file is refused and left as it is\n"
    "  --init              make a new database in an existing empty (0-byte) file; without it such\n"
    "                      a file is refused, since a truncated database must not start over\n"
    "  --listen HOST:PORT  address to serve on (default: 127.0.0.1:50051, loopback only)\n"
    "  --lease-ttl-ms N    how long a worker holds a candidate without a heartbeat before it is\n"
    "                      handed out again (default: 30000)\n"
    "  --max-db-mb N       refuse writes (RESOURCE_EXHAUSTED) once the database reaches N MiB,\n"
    "                      as on a full disk; what is stored is kept (default: no limit)\n"
    "  --token-file FILE   shared token (a file, mode 0600; else $EVO_TOKEN): every call, worker,\n"
    "                      admin and read-only alike, must carry 'authorization: Bearer <token>'\n"
    "                      or is refused UNAUTHENTICATED (evo-worker/evoctl --token-file)\n"
    "  --tls-cert CERT     serve TLS with this PEM certificate (chain) and --tls-key KEY; clients\n"
    "  --tls-key KEY       then need --tls-ca CA. Default: plaintext\n"
    "  --insecure          allow a non-loopback --listen without a token (anyone who can reach\n"
    "                      the port may submit, cancel and report); refused otherwise\n"
    "  --enrolled-workers-only\n"
    "                      refuse a worker that presents no enrolment key (`evod enrol`): a\n"
    "                      holder of the token alone then cannot measure for a run\n"
    "  -v, --verbose       debug logging\n"
    "  -h, --help          this text\n";

struct Options {
  std::string token_file;
  std::string tls_cert;
  std::string tls_key;
  bool insecure = false;
  std::string db = "evo.db";
  bool init = false;
  std::string listen = "127.0.0.1:50051";
  int lease_ttl_ms = evo::server::kDefaultLeaseTtlMs;
  int64_t max_db_mb = 0;
  bool enrolled_only = false;
  bool verbose = false;
};

int usage_error(const std::string& line) {
  std::fprintf(stderr, "evod: %s\n(see evod --help)\n", line.c_str());
  return 2;
}

// `serve`'s options (argv[2..]) into opt. Returns the exit status where the process ends here:
// 0 after --help, 2 after one line naming a bad option; nothing where it goes on.
std::optional<int> parse_serve_options(int argc, char** argv, Options& opt) {
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "-v" || a == "--verbose") {
      opt.verbose = true;
    } else if (a == "--db") {
      const char* v = value();
      if (!v) return usage_error("--db needs a path");
      opt.db = v;
    } else if (a == "--token-file" || a == "--tls-cert" || a == "--tls-key") {
      const char* v = value();
      if (!v || !*v) return usage_error(a + " needs a file");
      (a == "--token-file" ? opt.token_file : a == "--tls-cert" ? opt.tls_cert : opt.tls_key) = v;
    } else if (a == "--init") {
      opt.init = true;
    } else if (a == "--insecure") {
      opt.insecure = true;
    } else if (a == "--enrolled-workers-only") {
      opt.enrolled_only = true;
    } else if (a == "--listen") {
      const char* v = value();
      if (!v) return usage_error("--listen needs HOST:PORT");
      opt.listen = v;
    } else if (a == "--lease-ttl-ms") {
      const char* v = value();
      char* end = nullptr;
      long n = v ? std::strtol(v, &end, 10) : 0;
      if (!v || *end != '\0' || n <= 0 || n > 3600000)
        return usage_error("--lease-ttl-ms needs a number of milliseconds in 1..3600000");
      opt.lease_ttl_ms = static_cast<int>(n);
    } else if (a == "--max-db-mb") {
      const char* v = value();
      char* end = nullptr;
      long long n = v ? std::strtoll(v, &end, 10) : 0;
      if (!v || *end != '\0' || n <= 0 || n > (1LL << 30))
        return usage_error("--max-db-mb needs a number of MiB in 1..1073741824");
      opt.max_db_mb = n;
    } else {
      return usage_error("unknown option '" + a + "'");
    }
  }
  if (opt.tls_cert.empty() != opt.tls_key.empty()) return usage_error("--tls-cert and --tls-key go together");
  return std::nullopt;
}

// The token and the TLS pair, read and checked, and the listen address against them. Returns 2
// after one line where they are refused; nothing where evod may serve.
std::optional<int> load_security(const Options& opt, evo::GrpcServerConfig& grpc_config, std::string& token) {
  try {
    token = evo::security::resolve_token(opt.token_file, std::getenv(evo::security::kTokenEnv));
    if (!opt.tls_cert.empty()) {
      grpc_config.tls_cert_pem = evo::security::read_pem_file(opt.tls_cert, "TLS certificate");
      grpc_config.tls_key_pem = evo::security::read_pem_file(opt.tls_key, "TLS key");
      evo::security::check_tls_key_pair(grpc_config.tls_cert_pem, grpc_config.tls_key_pem, opt.tls_cert, opt.tls_key);
    }
  } catch (const evo::security::SecurityError& e) {
    std::fprintf(stderr, "evod: %s\n", e.what());
    return 2;
  }
  if (auto refusal = evo::security::listen_refusal(opt.listen, !token.empty(), opt.insecure)) {
    std::fprintf(stderr, "evod: %s\n", refusal->c_str());
    return 2;
  }
  return std::nullopt;
}

// One line of what guards the port, and a warning where nothing or too little does.
void log_security(const Options& opt, bool tls, const std::string& token) {
  const bool loopback = evo::security::is_loopback_listen(opt.listen);
  spdlog::info("event=security auth={} tls={} loopback={} workers={}", token.empty() ? "none" : "token", tls, loopback,
               opt.enrolled_only ? "enrolled-only" : "any-token-holder");
  if (!loopback && token.empty())
    spdlog::warn("event=insecure_listen listen={} anyone who can reach this port can drive evod (--insecure)",
                 opt.listen);
  else if (!loopback && !tls)
    spdlog::warn("event=plaintext_token listen={} the token crosses the network in clear: add --tls-cert/--tls-key",
                 opt.listen);
}

// Serves until SIGTERM or SIGINT (blocked in every thread; one thread waits for them), sweeping
// every period meanwhile: expired leases back to the queue (a worker died mid-evaluation),
// generations bred, spent budgets ended. In-flight calls finish and watch streams end.
void serve_until_stopped(evo::Coordinator& coordinator, evo::CoordinatorService& service, grpc::Server& server,
                         const sigset_t& stop_signals) {
  std::atomic<bool> stopping{false};
  std::thread sweeper([&] {
    // Each sweep is also evod's liveness tick: leases are not charged for gaps between ticks.
    const auto period = std::chrono::milliseconds(coordinator.sweep_period_ms());
    while (!stopping) {
      try {
        coordinator.sweep_expired_leases();
        coordinator.breed_waiting_generations();
        coordinator.end_spent_budgets();
      } catch (const evo::StoreError& e) {
        // A storage fault was logged once by the Store; a sweep every period need not repeat it.
        if (e.fault() == evo::StoreFault::kOther) spdlog::error("event=sweep_failed error=\"{}\"", e.what());
      } catch (const std::exception& e) {
        spdlog::error("event=sweep_failed error=\"{}\"", e.what());
      }
      service.flush_refusal_log();
      std::this_thread::sleep_for(period);
    }
  });
  std::thread signal_waiter([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    spdlog::info("event=stopping signal={}", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    stopping = true;
    service.stop_streams();
    server.Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  });
  server.Wait();
  stopping = true;
  sweeper.join();
  signal_waiter.join();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage_error("missing command 'serve'");
  const std::string command = argv[1];
  if (command == "-h" || command == "--help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (command == "enrol") return evo::enrol_command(argc, argv);
  if (command != "serve") return usage_error("unknown command '" + command + "' (serve or enrol)");
  Options opt;
  if (auto status = parse_serve_options(argc, argv, opt)) return *status;
  evo::GrpcServerConfig grpc_config;
  grpc_config.listen = opt.listen;
  std::string token;
  if (auto status = load_security(opt, grpc_config, token)) return *status;
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ evod %v");
  spdlog::set_level(opt.verbose ? spdlog::level::debug : spdlog::level::info);
  if (!opt.token_file.empty())
    if (auto warning = evo::security::token_file_warning(opt.token_file))
      spdlog::warn("event=token_file_readable {}", *warning);

  // Blocked before any thread starts, so that every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  std::unique_ptr<evo::Store> store;
  try {
    evo::StoreOptions sopt;
    sopt.max_bytes = opt.max_db_mb * 1024 * 1024;
    sopt.init = opt.init;
    store = std::make_unique<evo::Store>(opt.db, sopt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "evod: %s\n", e.what());
    return 1;
  }
  evo::CoordinatorOptions copt;
  copt.lease_ttl_ms = opt.lease_ttl_ms;
  copt.enrolled_only = opt.enrolled_only;
  evo::Coordinator coordinator(*store, copt);
  evo::CoordinatorService service(coordinator, evo::security::TokenGate(token));
  try {
    coordinator.resume_leases_after_restart();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "evod: %s\n", e.what());
    return 1;
  }

  int port = 0;
  std::unique_ptr<grpc::Server> server = evo::start_grpc_server(service, grpc_config, &port);
  if (!server) {
    std::fprintf(stderr, "evod: cannot listen on %s (%s)\n", opt.listen.c_str(),
                 evo::listen_failure_reason(opt.listen).c_str());
    return 1;
  }
  spdlog::info("event=serving listen={} port={} db={} lease_ttl_ms={} max_db_mb={} schema_version={}", opt.listen,
               port, opt.db, opt.lease_ttl_ms, opt.max_db_mb, store->schema_version());
  log_security(opt, !grpc_config.tls_cert_pem.empty(), token);
  serve_until_stopped(coordinator, service, *server, stop_signals);
  spdlog::info("event=stopped");
  return 0;
}

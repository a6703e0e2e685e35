#include "host_workers.h"

#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "host_resources.h"

namespace evo {

namespace {

// The options plan_host_workers reads; the rest are passed on.
struct HostArgs {
  bool all_gpus = false;
  int workers = 0;                 // 0: not given
  int compile_threads = 0;         // 0: not given
  bool gpu_given = false;
  std::string name;
  std::string backend = "cuda";
  std::vector<std::string> passed_on;
};

bool parse_count(const std::string* text, int hi, int* out) {
  if (!text || text->empty()) return false;
  char* end = nullptr;
  const long v = std::strtol(text->c_str(), &end, 10);
  if (*end != '\0' || v < 1 || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

HostWorkersPlan refuse(int status, std::string line) {
  HostWorkersPlan p;
  p.exit_status = status;
  p.error = std::move(line);
  return p;
}

// Returns an empty string, or the usage error.
std::string parse(const std::vector<std::string>& args, HostArgs* h) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const std::string* next = i + 1 < args.size() ? &args[i + 1] : nullptr;
    if (a == "--all-gpus") {
      h->all_gpus = true;
    } else if (a == "--workers") {
      if (!parse_count(next, 256, &h->workers)) return "--workers needs a number in 1..256";
      ++i;
    } else if (a == "--compile-threads") {
      if (!parse_count(next, 1024, &h->compile_threads)) return "--compile-threads needs a number in 1..1024";
      ++i;
    } else if (a == "--gpu") {
      h->gpu_given = true;
      ++i;
    } else if (a == "--name") {
      if (!next || next->empty()) return "--name needs a name";
      h->name = *next;
      ++i;
    } else {
      if (a == "--backend" && next) h->backend = *next;
      h->passed_on.push_back(a);
    }
  }
  if (h->all_gpus && h->workers)
    return "--all-gpus and --workers do not go together: --all-gpus starts one cuda worker per GPU, "
           "--backend model --workers N that many model workers";
  if (h->all_gpus && h->backend == "model")
    return "--all-gpus starts one cuda worker per GPU; for model workers give --backend model --workers N";
  if (h->workers && h->backend != "model")
    return "--workers N starts model workers (with --backend model); for one worker per GPU give --all-gpus";
  if (h->gpu_given)
    return h->all_gpus ? "--all-gpus takes no --gpu: it starts a worker on every visible GPU "
                         "(CUDA_VISIBLE_DEVICES chooses which)"
                       : "--gpu is for cuda workers; model workers use no GPU";
  return "";
}

}  // namespace

bool asks_for_host_workers(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--all-gpus" || a == "--workers") return true;
  }
  return false;
}

HostWorkersPlan plan_host_workers(const std::vector<std::string>& args, const HostFacts& facts) {
  HostArgs h;
  if (std::string error = parse(args, &h); !error.empty()) return refuse(2, error);
  int count = h.workers;
  if (h.all_gpus) {
    try {
      count = facts.gpu_count();
    } catch (const std::exception& e) {
      std::string line = std::string("--all-gpus: ") + e.what();
      // "...; use --backend model": the model's equivalent of --all-gpus.
      if (line.size() >= 19 && line.compare(line.size() - 19, 19, "use --backend model") == 0)
        line += " --workers N";
      return refuse(1, line);
    }
    if (count < 1) return refuse(1, "--all-gpus: no GPU found; use --backend model --workers N");
  }
  HostWorkersPlan plan;
  plan.compile_threads = h.compile_threads ? h.compile_threads : default_compile_threads(facts.cores, count);
  const std::string prefix = h.name.empty() ? facts.host_name : h.name;
  for (int k = 0; k < count; ++k) {
    SupervisedWorker w;
    w.label = (h.all_gpus ? "the worker on GPU " : "model worker ") + std::to_string(k);
    w.name = prefix + (h.all_gpus ? ":gpu" : ":model") + std::to_string(k);
    w.argv.push_back(facts.self_exe);
    w.argv.insert(w.argv.end(), h.passed_on.begin(), h.passed_on.end());
    if (h.all_gpus) w.argv.insert(w.argv.end(), {"--gpu", std::to_string(k)});
    w.argv.insert(w.argv.end(), {"--name", w.name, "--compile-threads", std::to_string(plan.compile_threads)});
    plan.workers.push_back(std::move(w));
  }
  return plan;
}

int run_host_workers(int argc, char** argv, const WorkerArgsCheck& check) {
  HostFacts facts;
  char exe[PATH_MAX] = {0};
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  facts.self_exe = n > 0 ? std::string(exe, n) : argv[0];
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  facts.host_name = host;
  facts.cores = host_cores();
  facts.gpu_count = visible_gpu_count;

  const std::vector<std::string> args(argv + 1, argv + argc);
  for (const auto& a : args)
    if (a == "-h" || a == "--help") return check({facts.self_exe, "--help"});
  HostWorkersPlan plan = plan_host_workers(args, facts);
  if (plan.exit_status >= 0) {
    std::fprintf(stderr, "evo-worker: %s\n%s", plan.error.c_str(),
                 plan.exit_status == 2 ? "(see evo-worker --help)\n" : "");
    return plan.exit_status;
  }
  // Each worker's own options (the coordinator's address, the token file, ...) are checked once,
  // here, rather than failing in every child.
  if (int rc = check(plan.workers.front().argv); rc >= 0) return rc;
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ evo-worker %v");
  spdlog::info("event=host_workers_starting workers={} compile_threads={} host_cores={}", plan.workers.size(),
               plan.compile_threads, facts.cores);
  return supervise(plan.workers);
}

}  // namespace evo

#include "kernel_compiler.h"

#include <nvrtc.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "compile_cache.h"
#include "errors.h"
#include "ptxas_report.h"
#include "search_space.h"
#include "template_registry.h"
#include "log_ids.h"

namespace evo {
namespace fs = std::filesystem;
namespace {

std::string getenv_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

// The first line of an NVRTC log that says "error", for a one-line message.
std::string first_error_line(const std::string& log) {
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);)
    // ptxas ends every failure with "Ptx assembly aborted due to errors": the line before says why.
    if ((line.find("error") != std::string::npos || line.find("fatal") != std::string::npos) &&
        line.find("aborted due to errors") == std::string::npos)
      return line;
  return log.substr(0, log.find('\n'));
}

void check(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS)
    throw std::runtime_error(std::string("NVRTC ") + what + " failed: " + nvrtcGetErrorString(r));
}

std::vector<std::string> option_list(const std::string& arch) {
  // No -G, -lineinfo, debug defines or fast math: this build is the timed one, and its ptxas
  // report is what the resource gate judges.
  return {"--gpu-architecture=" + arch, "-std=c++17", "--ptxas-options=-v",
          "-I" + KernelCompiler::cuda_include_dir()};
}

std::string join(const std::vector<std::string>& parts) {
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : " ") + p;
  return s;
}

// RAII for an nvrtcProgram.
struct Program {
  nvrtcProgram handle = nullptr;
  ~Program() {
    if (handle) nvrtcDestroyProgram(&handle);
  }
};

struct Request {
  std::string source_id, source, name_expression;
};

}  // namespace

struct KernelCompiler::Impl {
  std::string arch;
  std::vector<std::string> options;
  std::string options_text;
  std::string nvrtc_version;
  CompileCache cache;

  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  bool stopping = false;
  std::map<std::string, std::shared_future<CompiledKernel>> in_flight;  // by cache key
  std::vector<std::thread> pool;

  Impl(std::string dir, std::string a)
      : arch(std::move(a)),
        options(option_list(arch)),
        options_text(join(options)),
        nvrtc_version(KernelCompiler::nvrtc_version()),
        cache(dir.empty() ? KernelCompiler::default_cache_dir() : std::move(dir)) {}

  void worker_loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stopping || !queue.empty(); });
        if (queue.empty()) return;  // stopping and drained
        job = std::move(queue.front());
        queue.pop_front();
      }
      job();
    }
  }

  // One entry point for sync and async compiles, so that both share the in-flight table.
  std::shared_future<CompiledKernel> start(Request req, bool run_inline) {
    const std::string key =
        CompileCache::key(req.source, req.name_expression, arch, nvrtc_version, options_text);
    auto promise = std::make_shared<std::promise<CompiledKernel>>();
    std::shared_future<CompiledKernel> future;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (auto it = in_flight.find(key); it != in_flight.end()) return it->second;
      future = promise->get_future().share();
      in_flight.emplace(key, future);
    }
    // The compile is logged under the ids of the candidate that first asked for it.
    auto job = [this, promise, key, req = std::move(req), ids = log_ids()] {
      const auto scope = LogIdsScope::adopt(ids);
      try {
        promise->set_value(compile_or_load(req, key));
      } catch (...) {
        promise->set_exception(std::current_exception());
      }
      std::lock_guard<std::mutex> lock(mu);
      in_flight.erase(key);  // later requests find the disk cache
    };
    if (run_inline) {
      job();
    } else {
      std::lock_guard<std::mutex> lock(mu);
      queue.push_back(std::move(job));
      cv.notify_one();
    }
    return future;
  }

  // Gate 3 runs here, on the compile pool, so that the GPU's evaluation loop never waits for a
  // cuobjdump run (bench/NOTES.md, "Host-side costs"): the verdict goes into the sidecar, and a
  // cache hit reads it back.
  void judge_sass(const std::string& key, std::string_view cubin, CacheEntry& entry) const {
    entry.tensor_cores = check_tensor_core_sass(entry.cubin_path, entry.lowered_name);
    if (entry.tensor_cores->verdict != v1::VERDICT_SKIPPED) entry = cache.store(key, cubin, entry);
  }

  static std::optional<std::string> read_cubin(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }

  CompiledKernel from_entry(const CacheEntry& e, double ms, bool hit) const {
    CompiledKernel k;
    k.cubin_path = e.cubin_path;
    k.lowered_name = e.lowered_name;
    k.name_expression = e.name_expression;
    k.arch = arch;
    k.resources = e.resources;
    k.options = e.options;
    k.compile_ms = ms;
    k.cache_hit = hit;
    k.tensor_cores = e.tensor_cores.value_or(SassVerdict{v1::VERDICT_SKIPPED, "the SASS was not read", {}});
    return k;
  }

  CompiledKernel compile_or_load(const Request& req, const std::string& key) {
    if (auto hit = cache.load(key)) {
      spdlog::debug("event=compile_cache_hit {}key={} kernel={}", log_ids(), key, req.name_expression);
      if (!hit->tensor_cores) {  // an entry from before the cache kept the SASS verdict and its counts
        if (const auto cubin = read_cubin(hit->cubin_path)) judge_sass(key, *cubin, *hit);
      }
      return from_entry(*hit, 0, true);
    }
    const auto t0 = std::chrono::steady_clock::now();
    Program prog;
    check(nvrtcCreateProgram(&prog.handle, req.source.c_str(), (req.source_id + ".cu").c_str(), 0,
                             nullptr, nullptr),
          "create program");
    check(nvrtcAddNameExpression(prog.handle, req.name_expression.c_str()), "add name expression");
    std::vector<const char*> argv;
    for (const auto& o : options) argv.push_back(o.c_str());
    const nvrtcResult rc =
        nvrtcCompileProgram(prog.handle, static_cast<int>(argv.size()), argv.data());
    size_t log_size = 0;
    nvrtcGetProgramLogSize(prog.handle, &log_size);
    std::string log(log_size, '\0');
    if (log_size) nvrtcGetProgramLog(prog.handle, log.data());
    while (!log.empty() && log.back() == '\0') log.pop_back();
    if (rc != NVRTC_SUCCESS)
      throw CompileError("NVRTC failed for " + req.name_expression + " (" + arch +
                             "): " + first_error_line(log),
                         log);

    const char* lowered = nullptr;
    check(nvrtcGetLoweredName(prog.handle, req.name_expression.c_str(), &lowered),
          "get lowered name");
    const std::string lowered_name = lowered;
    size_t cubin_size = 0;
    check(nvrtcGetCUBINSize(prog.handle, &cubin_size), "get CUBIN size");
    std::string cubin(cubin_size, '\0');
    check(nvrtcGetCUBIN(prog.handle, cubin.data()), "get CUBIN");
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

    auto resources = parse_ptxas_report(log, lowered_name);
    if (!resources)
      throw CompileError("no ptxas resource report for " + lowered_name + " in the NVRTC log (" +
                             std::to_string(log.size()) + " bytes: '" + log.substr(0, 400) + "')",
                         log);

    CacheEntry entry;
    entry.lowered_name = lowered_name;
    entry.name_expression = req.name_expression;
    entry.options = options_text;
    entry.resources = *resources;
    entry = cache.store(key, cubin, std::move(entry));
    judge_sass(key, cubin, entry);
    spdlog::info("event=compiled {}kernel={} arch={} ms={:.0f} registers={} stack={} spills={}/{} smem={}",
                 log_ids(), req.name_expression, arch, ms, resources->registers(),
                 resources->stack_frame_bytes(), resources->spill_store_bytes(),
                 resources->spill_load_bytes(), resources->static_smem_bytes());
    return from_entry(entry, ms, false);
  }
};

void disable_driver_compile_cache() {
  // Where a driver is installed, NVRTC reuses the driver's compute cache for the PTX->cubin step
  // and then prints no ptxas report at all: the resource gate would have nothing to read. Our own
  // disk cache (keyed by source, options and NVRTC version) replaces it. The driver reads the
  // variable when it initialises, so programs call this first thing in main().
  setenv("CUDA_CACHE_DISABLE", "1", 1);
}

KernelCompiler::KernelCompiler(std::string cache_dir, std::string arch, int threads) {
  static const std::regex kArch(R"(sm_\d{2,3}[af]?)");
  if (!std::regex_match(arch, kArch))
    throw InputError("unsupported arch '" + arch + "': expected sm_80, sm_89, sm_90a, ...");
  disable_driver_compile_cache();
  impl_ = std::make_unique<Impl>(std::move(cache_dir), std::move(arch));
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 0; i < threads; ++i) impl_->pool.emplace_back([this] { impl_->worker_loop(); });
}

KernelCompiler::~KernelCompiler() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  for (auto& t : impl_->pool) t.join();  // queued compiles finish: their futures stay valid
}

const std::string& KernelCompiler::arch() const { return impl_->arch; }
const std::string& KernelCompiler::cache_dir() const { return impl_->cache.dir(); }

CompiledKernel KernelCompiler::compile(std::string_view source_id, std::string_view source,
                                       const std::string& name_expression) {
  return impl_
      ->start({std::string(source_id), std::string(source), name_expression}, /*run_inline=*/true)
      .get();
}

std::shared_future<CompiledKernel> KernelCompiler::compile_async(std::string source_id,
                                                                 std::string source,
                                                                 std::string name_expression) {
  return impl_->start({std::move(source_id), std::move(source), std::move(name_expression)},
                      /*run_inline=*/false);
}

namespace {
Request candidate_request(const Genome& g, const Problem& shape) {
  const KernelTemplate* t = find_template(g.template_id());
  if (!t) throw InputError("unknown seed '" + g.template_id() + "'");
  const SearchSpace& space = SearchSpace::for_template(g.template_id());
  return {std::string(t->id), std::string(t->source), space.kernel_name(g, shape)};
}
}  // namespace

std::shared_future<CompiledKernel> KernelCompiler::compile_candidate_async(
    const Genome& g, const Problem& shape) {
  return impl_->start(candidate_request(g, shape), /*run_inline=*/false);
}

std::string KernelCompiler::nvrtc_version() {
  int major = 0, minor = 0;
  check(nvrtcVersion(&major, &minor), "version");
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string KernelCompiler::default_cache_dir() {
  if (const char* d = std::getenv("EVO_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return (fs::path(x) / "evo").string();
  if (const char* h = std::getenv("HOME"); h && *h)
    return (fs::path(h) / ".cache" / "evo").string();
  return ".evo-cache";
}

std::string KernelCompiler::cuda_include_dir() {
  const std::string home = getenv_or("CUDA_HOME", "/usr/local/cuda");
  const std::string inc = (fs::path(home) / "include").string();
  if (!fs::exists(fs::path(inc) / "cuda_fp16.h"))
    throw std::runtime_error("CUDA headers not found: " + inc +
                             "/cuda_fp16.h is missing; set CUDA_HOME to the CUDA toolkit");
  return inc;
}

}  // namespace evo

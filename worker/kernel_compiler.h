#pragma once
// Run-time compilation of kernel template variants with NVRTC, for one GPU architecture.
// Each compile yields a cubin (real SASS for the arch) in the on-disk cache, the kernel's lowered
// (mangled) name, and the ptxas resource report of exactly that build. Options never carry debug
// flags: what is compiled here is what gets timed.
#include <cstddef>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "evo/evo.pb.h"
#include "genome.h"
#include "sass_check.h"
#include "problem.h"

namespace evo {

struct CompiledKernel {
  std::string cubin_path;        // in the cache dir; the child process loads it from there
  std::string lowered_name;      // mangled name from nvrtcGetLoweredName, for cuModuleGetFunction
  std::string name_expression;   // what was asked for, e.g. "evo::fa_s512_v3_kernel<0, 64, ...>"
  std::string arch;              // "sm_90a"
  v1::ResourceReport resources;  // parsed from the ptxas -v log (dynamic smem / threads: 0, the
                                 // launch decides them)
  std::string options;           // exact NVRTC options, space-joined, for the report and export
  double compile_ms = 0;         // time of the NVRTC run (0 on a cache hit)
  bool cache_hit = false;
  SassVerdict tensor_cores;      // gate 3, read from the cubin's SASS when it was compiled
};

// NVRTC rejected the source. what() is one line; log() is NVRTC's full program log.
class CompileError : public std::runtime_error {
 public:
  CompileError(const std::string& message, std::string log)
      : std::runtime_error(message), log_(std::move(log)) {}
  const std::string& log() const { return log_; }

 private:
  std::string log_;
};

// Turns off the driver's own JIT cache for this process (CUDA_CACHE_DISABLE=1); with it on, NVRTC
// omits the ptxas report for programs it has compiled before. Call before any CUDA call.
void disable_driver_compile_cache();

// Thread-safe. compile() runs on the caller's thread; compile_async() on a fixed pool of
// `threads` workers so that several candidates compile while the GPU times another. Both share
// one in-flight table: the same key asked twice compiles once.
class KernelCompiler {
 public:
  // cache_dir empty: default_cache_dir(). arch: "sm_80", "sm_89", "sm_90a", ...
  // threads <= 0: hardware concurrency. Throws std::runtime_error (one line) when the CUDA headers
  // cannot be found ("set CUDA_HOME") or the cache directory cannot be created.
  KernelCompiler(std::string cache_dir, std::string arch, int threads);
  ~KernelCompiler();
  KernelCompiler(const KernelCompiler&) = delete;
  KernelCompiler& operator=(const KernelCompiler&) = delete;

  const std::string& arch() const;
  const std::string& cache_dir() const;

  // source_id names the source in logs and NVRTC diagnostics ("fa_s512_v3"); the cache key uses a
  // hash of the source text itself. Throws CompileError when NVRTC rejects the program.
  CompiledKernel compile(std::string_view source_id, std::string_view source,
                         const std::string& name_expression);
  // The same, on the pool. The future rethrows CompileError.
  std::shared_future<CompiledKernel> compile_async(std::string source_id, std::string source,
                                                   std::string name_expression);

  // The template of g.template_id() instantiated as SearchSpace::kernel_name(g, shape), on the
  // pool. Throws InputError for an unknown template.
  std::shared_future<CompiledKernel> compile_candidate_async(const Genome& g,
                                                             const Problem& shape);

  // "12.8" (major.minor of the NVRTC library loaded).
  static std::string nvrtc_version();
  // $EVO_CACHE_DIR, else $XDG_CACHE_HOME/evo, else $HOME/.cache/evo, else ./.evo-cache.
  static std::string default_cache_dir();
  // $CUDA_HOME/include (default /usr/local/cuda); throws std::runtime_error if cuda_fp16.h is
  // not there.
  static std::string cuda_include_dir();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace evo

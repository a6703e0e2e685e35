#include "eval_command.h"

#include <google/protobuf/util/json_util.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "errors.h"
#include "evaluator.h"
#include "family.h"
#include "search_space.h"
#include "wire_labels.h"

namespace evo {
namespace {

constexpr const char* kUsage = R"(usage: evo-worker eval --seed TEMPLATE --genome 'GENE=V,...' --shape BxHxSxD [options]

Evaluates one kernel variant once and prints each gate's verdict with the wall time spent in it,
the resource report, the error figures, the median time with its p10/p90 spread (inputs cycled
past L2), the median with one input set left in L2, and TFLOP/s.

  --seed TEMPLATE      kernel template, e.g. fa_s512_v3
  --genome TEXT        'BLOCK_M=32,BLOCK_N=64,...' (genes not named take their defaults; '' = default genome)
  --shape S            BxHxSxD, BxHxSqxSkxD or a packed batch LENSxHxD (17+300/4096x8x64),
                       optional ':kvN' (K/V heads), ':causal' (aligned
                       bottom-right) and ':bf16' or ':e4m3' suffixes; repeatable
                       (default 1x8x512x64)
  --causal             every shape without a causal suffix is causal
  --dtype T            fp16 (default), bf16 or e4m3: the dtype of every shape without a dtype suffix
  --backend B          cuda (default; needs a GPU) or model (NVRTC + analytical estimate, no GPU)
  --arch SM            NVRTC target (cuda: from the device; model: default sm_90a)
  --sanitize           also run the compute-sanitizer gate (cuda): memcheck, racecheck, initcheck
                       and synccheck on small shapes of several K/V tiles (the verdict names them)
  --cache-dir DIR      compile cache (default $EVO_CACHE_DIR, $XDG_CACHE_HOME/evo or ~/.cache/evo)
  --json               print the Evaluation as JSON instead of text
  -v, --verbose        debug logging on stderr
  -h, --help           this text

exit status: 0 ok, 1 the candidate failed a gate, 2 bad input or no usable backend
)";

struct Args {
  std::string seed, genome;
  bool genome_given = false;
  std::vector<std::string> shapes;
  bool causal = false, json = false, verbose = false;
  v1::DType dtype = v1::DTYPE_FP16;
  EvaluatorOptions options;
};

// Throws InputError for unknown flags or missing values.
Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw InputError(flag + " needs a value (see evo-worker eval --help)");
      return argv[++i];
    };
    if (flag == "--seed") a.seed = value();
    else if (flag == "--genome") a.genome = value(), a.genome_given = true;
    else if (flag == "--shape") a.shapes.push_back(value());
    else if (flag == "--causal") a.causal = true;
    else if (flag == "--dtype") {
      const std::string text = value();
      const auto d = parse_dtype_label(text);
      if (!d) throw InputError("unknown dtype '" + text + "': expected " + dtype_label_choices());
      a.dtype = *d;
    }
    else if (flag == "--backend") a.options.backend = value();
    else if (flag == "--arch") a.options.arch = value();
    else if (flag == "--sanitize") a.options.sanitize = true;
    else if (flag == "--cache-dir") a.options.cache_dir = value();
    else if (flag == "--json") a.json = true;
    else if (flag == "-v" || flag == "--verbose") a.verbose = true;
    else throw InputError("unknown option '" + flag + "' (see evo-worker eval --help)");
  }
  if (a.seed.empty()) throw InputError("--seed is required, e.g. --seed fa_s512_v3");
  if (!a.genome_given) throw InputError("--genome is required, e.g. --genome 'BLOCK_M=32,BLOCK_N=64'");
  return a;
}

// --causal and --dtype apply as a submit's fields do.
std::vector<Problem> parse_shapes(const Args& a, const SearchSpace& space) {
  const KernelFamily& family = space.family();
  v1::SubmitRunRequest flags;
  flags.set_causal(a.causal);
  flags.set_dtype(a.dtype);
  const ProblemDefaults defaults = family.submit_defaults(flags);
  std::vector<std::string> texts = a.shapes;
  if (texts.empty()) texts.emplace_back(family.default_problem);
  std::vector<Problem> shapes;
  for (const auto& text : texts) {
    Problem s = family.parse(text, defaults);
    family.require_tunable(s, text);
    space.require_serves(s, text);
    shapes.push_back(s);
  }
  return shapes;
}

void print_text(const Genome& g, const v1::Evaluation& e) {
  std::printf("genome    %s\n", g.text().c_str());
  std::printf("device    %s (%s, backend %s)%s\n", e.device().gpu_name().c_str(),
              e.device().arch().c_str(), e.device().backend().c_str(),
              e.estimated() ? "  [ESTIMATED, not measured]" : "");
  std::printf("gates (wall ms on this machine)\n");
  for (const auto& v : e.gates())
    std::printf("  %-13s %-8s %8.0f  %s\n", label(v.kind()).c_str(), label(v.outcome()).c_str(), v.elapsed_ms(),
                v.detail().c_str());
  if (e.wall_ms() > 0) std::printf("wall      %.0f ms in all\n", e.wall_ms());
  const auto& r = e.resources();
  if (r.registers() > 0)
    std::printf("resources %d registers, %d B stack frame, %d/%d B spill stores/loads, "
                "%d B static + %d B dynamic smem, %d threads/block\n",
                r.registers(), r.stack_frame_bytes(), r.spill_store_bytes(), r.spill_load_bytes(),
                r.static_smem_bytes(), r.dynamic_smem_bytes(), r.threads_per_block());
  if (!e.compile_options().empty())
    std::printf("compile   %.0f ms%s  options: %s\n", e.compile_ms(), e.cache_hit() ? " (cache hit)" : "",
                e.compile_options().c_str());
  for (const auto& s : e.shapes()) {
    // As people type it: the family's canonical text.
    std::printf("shape     %s: median %.2f us (p10 %.2f, p90 %.2f), %.1f TFLOP/s",
                result_problem(s).text().c_str(), s.median_us(), s.p10_us(), s.p90_us(), s.tflops());
    if (s.resident_us() > 0) std::printf(", L2-resident inputs %.2f us", s.resident_us());
    if (!e.estimated())
      std::printf(", rel L2 err %.2e, max abs err %.2e, non-finite %lld, unwritten %lld",
                  s.rel_l2_error(), s.max_abs_error(), static_cast<long long>(s.nonfinite()),
                  static_cast<long long>(s.unwritten()));
    std::printf("\n");
  }
  if (e.status() == v1::OK) std::printf("fitness   %.2f us (geometric mean)%s\n", e.fitness_us(),
                                        e.estimated() ? " [estimated]" : "");
  std::printf("status    %s%s%s\n", v1::EvalStatus_Name(e.status()).c_str(),
              e.message().empty() ? "" : ": ", e.message().c_str());
}

}  // namespace

int run_eval_command(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  auto log = spdlog::stderr_color_mt("eval");
  spdlog::set_default_logger(log);
  spdlog::set_level(spdlog::level::warn);
  try {
    Args args = parse_args(argc, argv);
    if (args.verbose) spdlog::set_level(spdlog::level::debug);
    const SearchSpace& space = SearchSpace::for_template(args.seed);
    const Genome genome = space.parse(args.genome);
    const std::vector<Problem> shapes = parse_shapes(args, space);
    std::unique_ptr<Evaluator> evaluator = make_evaluator(args.options);
    const v1::Evaluation e = evaluator->evaluate(genome, shapes, args.options.sanitize);
    if (args.json) {
      std::string json;
      google::protobuf::util::JsonPrintOptions opts;
      opts.add_whitespace = true;
      opts.always_print_primitive_fields = true;  // a 0-byte stack frame is a figure too
      (void)google::protobuf::util::MessageToJsonString(e, &json, opts);
      std::fputs(json.c_str(), stdout);
      if (json.empty() || json.back() != '\n') std::fputc('\n', stdout);
    } else {
      print_text(genome, e);
    }
    return e.status() == v1::OK ? 0 : 1;
  } catch (const InputError& e) {
    std::fprintf(stderr, "evo-worker eval: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    // No usable backend: no GPU, no driver, no CUDA headers, unwritable cache.
    std::fprintf(stderr, "evo-worker eval: %s\n", e.what());
    return 2;
  }
}

}  // namespace evo

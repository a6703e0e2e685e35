#include "attention/problem.h"
#include "gpu_test_support.h"

#include "device_probe.h"

extern const char kPlanted_planted_params_cuh[];
extern const char kPlanted_naive_attention_cuh[];
extern const char kPlanted_naive_correct_cu[];
extern const char kPlanted_wrong_output_cu[];
extern const char kPlanted_hang_cu[];
extern const char kPlanted_far_out_of_bounds_cu[];
extern const char kPlanted_off_by_one_write_cu[];
extern const char kPlanted_spill_cu[];
extern const char kPlanted_lazy_rescale_forgets_output_cu[];

namespace evo::testing_gpu {
namespace {

struct Probe {
  std::string reason;
  std::unique_ptr<CudaEvaluator> evaluator;
  Probe() {
    try {
      v1::DeviceInfo d = cuda::probe_device(0);
      EvaluatorOptions options;
      evaluator = std::make_unique<CudaEvaluator>(options, d);
    } catch (const std::exception& e) {
      reason = e.what();
    }
  }
};

Probe& probe() {
  static Probe p;
  return p;
}

}  // namespace

const std::string& no_gpu_reason() { return probe().reason; }
CudaEvaluator* shared_evaluator() { return probe().evaluator.get(); }

std::string planted_source(const std::string& file) {
  struct Entry {
    const char* file;
    const char* text;
  };
  static const Entry entries[] = {{"naive_correct.cu", kPlanted_naive_correct_cu},
                                  {"wrong_output.cu", kPlanted_wrong_output_cu},
                                  {"hang.cu", kPlanted_hang_cu},
                                  {"far_out_of_bounds.cu", kPlanted_far_out_of_bounds_cu},
                                  {"off_by_one_write.cu", kPlanted_off_by_one_write_cu},
                                  {"spill.cu", kPlanted_spill_cu},
                                  {"lazy_rescale_forgets_output.cu",
                                   kPlanted_lazy_rescale_forgets_output_cu}};
  for (const auto& e : entries)
    if (file == e.file)
      return std::string(kPlanted_planted_params_cuh) + kPlanted_naive_attention_cuh + e.text;
  throw std::invalid_argument("no planted kernel " + file);
}

SourceKernel planted_kernel(const std::string& file, const std::string& name) {
  SourceKernel k;
  k.source_id = "planted_" + name;
  k.source = planted_source(file);
  k.name_expression = [name](const Problem& p) {
    return "planted::" + name + "<" + std::to_string(attention::shape_of(p).causal ? 1 : 0) + ">";
  };
  k.launch = [](const Problem& p) {
    const attention::Shape s = attention::shape_of(p);
    LaunchConfig l;
    l.threads = 128;
    l.grid_x = (s.seq_q + 127) / 128;
    l.grid_y = int64_t(s.batch) * s.heads;
    l.smem_bytes = 0;
    return l;
  };
  return k;
}

SourceKernel planted_dtype_kernel(const std::string& file, const std::string& name) {
  SourceKernel k = planted_kernel(file, name);
  k.name_expression = [name](const Problem& p) {
    const attention::Shape s = attention::shape_of(p);
    return "planted::" + name + "<" + std::to_string(s.causal ? 1 : 0) + ", " +
           std::to_string(static_cast<int>(s.dtype)) + ">";
  };
  return k;
}

std::vector<Problem> gate_shapes() {
  std::vector<Problem> shapes;
  for (bool causal : {false, true})
    for (const char* text : {"1x8x512x64", "2x8x512x64", "1x4x1000x64"})
      shapes.push_back(problem(text, causal));
  return shapes;
}

Problem problem(std::string_view text, bool causal_default) {
  return attention::to_problem(attention::parse_shape(text, causal_default));
}

}  // namespace evo::testing_gpu

#include "eval_request.h"

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace evo::cuda {

using nlohmann::json;

std::string to_json(const EvalRequest& r) {
  json shapes = json::array();
  for (const auto& s : r.shapes) {
    shapes.push_back({{"batch", s.shape.batch},
                      {"heads", s.shape.heads},
                      {"seq_q", s.shape.seq_q},
                      {"seq_k", s.shape.seq_k},
                      {"head_dim", s.shape.head_dim},
                      {"causal", s.shape.causal},
                      {"dtype", static_cast<int>(s.shape.dtype)},
                      {"flops", s.flops},
                      {"cubin", s.cubin_path},
                      {"kernel", s.kernel},
                      {"grid", {s.grid[0], s.grid[1], s.grid[2]}},
                      {"threads", s.threads},
                      {"smem_bytes", s.smem_bytes},
                      {"workspace_bytes", s.workspace_bytes},
                      {"tensor_map_box_rows", s.tensor_map_box_rows},
                      {"tensor_map_q_box_rows", s.tensor_map_q_box_rows}});
  }
  json j = {{"device", r.device},
            {"seed", r.seed},
            {"run_correct", r.run_correct},
            {"run_timed", r.run_timed},
            {"repeated_launches", r.repeated_launches},
            {"warmup_launches", r.warmup_launches},
            {"timed_launches", r.timed_launches},
            {"launches_per_sample", r.launches_per_sample},
            {"rotation_bytes", r.rotation_bytes},
            {"reference_cubin", r.reference_cubin},
            {"shapes", shapes},
            {"result_path", r.result_path}};
  return j.dump(1);
}

EvalRequest request_from_json(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("malformed evaluation request: ") + e.what());
  }
  auto field = [&](const json& obj, const char* name) -> const json& {
    if (!obj.contains(name)) throw std::runtime_error(std::string("evaluation request lacks '") + name + "'");
    return obj.at(name);
  };
  try {
    EvalRequest r;
    r.device = field(j, "device").get<int>();
    r.seed = field(j, "seed").get<uint64_t>();
    r.run_correct = field(j, "run_correct").get<bool>();
    r.run_timed = field(j, "run_timed").get<bool>();
    r.repeated_launches = field(j, "repeated_launches").get<int>();
    r.warmup_launches = field(j, "warmup_launches").get<int>();
    r.timed_launches = field(j, "timed_launches").get<int>();
    r.launches_per_sample = field(j, "launches_per_sample").get<int>();
    r.rotation_bytes = field(j, "rotation_bytes").get<int64_t>();
    r.reference_cubin = field(j, "reference_cubin").get<std::string>();
    r.result_path = field(j, "result_path").get<std::string>();
    for (const auto& s : field(j, "shapes")) {
      ShapeJob job;
      job.shape.batch = field(s, "batch").get<int>();
      job.shape.heads = field(s, "heads").get<int>();
      job.shape.seq_q = field(s, "seq_q").get<int>();
      job.shape.seq_k = field(s, "seq_k").get<int>();
      job.shape.head_dim = field(s, "head_dim").get<int>();
      job.shape.causal = field(s, "causal").get<bool>();
      const int dtype = field(s, "dtype").get<int>();
      if (dtype != static_cast<int>(DType::kF16) && dtype != static_cast<int>(DType::kBF16))
        throw std::runtime_error("evaluation request: unknown dtype " + std::to_string(dtype));
      job.shape.dtype = static_cast<DType>(dtype);
      job.flops = field(s, "flops").get<double>();
      job.cubin_path = field(s, "cubin").get<std::string>();
      job.kernel = field(s, "kernel").get<std::string>();
      const auto& g = field(s, "grid");
      if (!g.is_array() || g.size() != 3) throw std::runtime_error("evaluation request: 'grid' needs 3 values");
      job.grid = {g[0].get<int64_t>(), g[1].get<int64_t>(), g[2].get<int64_t>()};
      job.threads = field(s, "threads").get<int64_t>();
      job.smem_bytes = field(s, "smem_bytes").get<int64_t>();
      job.workspace_bytes = field(s, "workspace_bytes").get<int64_t>();
      job.tensor_map_box_rows = field(s, "tensor_map_box_rows").get<int>();
      job.tensor_map_q_box_rows = field(s, "tensor_map_q_box_rows").get<int>();
      r.shapes.push_back(std::move(job));
    }
    return r;
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("malformed evaluation request: ") + e.what());
  }
}

}  // namespace evo::cuda

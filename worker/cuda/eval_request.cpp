#include "eval_request.h"

#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

#include "family.h"

namespace evo::cuda {

using nlohmann::json;

namespace {

// A problem travels as its wire message (evo.v1.Problem) in protobuf's JSON form, read back with
// the family's checks.
json problem_json(const Problem& p) {
  std::string text;
  (void)google::protobuf::util::MessageToJsonString(problem_to_proto(p), &text);
  return json::parse(text);
}

Problem problem_from_json(const json& j) {
  v1::Problem m;
  if (!google::protobuf::util::JsonStringToMessage(j.dump(), &m).ok())
    throw std::runtime_error("evaluation request: malformed problem " + j.dump());
  try {
    return problem_from_proto(m);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("evaluation request: ") + e.what());
  }
}

}  // namespace

std::string to_json(const EvalRequest& r) {
  json shapes = json::array();
  for (const auto& s : r.shapes) {
    shapes.push_back({{"problem", problem_json(s.shape)},
                      {"flops", s.flops},
                      {"cubin", s.cubin_path},
                      {"kernel", s.kernel},
                      {"grid", {s.grid[0], s.grid[1], s.grid[2]}},
                      {"threads", s.threads},
                      {"smem_bytes", s.smem_bytes},
                      {"workspace_bytes", s.workspace_bytes},
                      {"tensor_map_box_rows", s.tensor_map_box_rows},
                      {"tensor_map_q_box_rows", s.tensor_map_q_box_rows},
                      {"persistent", s.persistent},
                      {"persistent_blocks", s.persistent_blocks}});
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
      job.shape = problem_from_json(field(s, "problem"));
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
      job.persistent = field(s, "persistent").get<bool>();
      job.persistent_blocks = field(s, "persistent_blocks").get<int64_t>();
      r.shapes.push_back(std::move(job));
    }
    return r;
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("malformed evaluation request: ") + e.what());
  }
}

}  // namespace evo::cuda

#pragma once
// What the parent asks of one evaluation child, and how it travels: a JSON file in the
// evaluation's temp dir, named on the child's command line (`__child <request.json>`). The child
// answers with a serialized v1::Evaluation in result_path (gates "correct" and "timed" only).
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "problem.h"

namespace evo::cuda {

// One shape to check and time, with the kernel that serves it (a problem's variables may be template
// parameters, so a run's shapes may need different cubins) and the launch formulas' results.
struct ShapeJob {
  Problem shape;
  double flops = 0;
  std::string cubin_path;
  std::string kernel;  // lowered (mangled) name inside the cubin
  std::array<int64_t, 3> grid{1, 1, 1};
  int64_t threads = 0;
  int64_t smem_bytes = 0;
  int64_t workspace_bytes = 0;  // zeroed device scratch passed in the kernel's parameter; 0: none
  // TMA: the box heights of the tensor maps the family encodes into the kernel's parameter
  // (LaunchValues); 0: no tensor maps.
  int tensor_map_box_rows = 0;
  int tensor_map_q_box_rows = 0;
  // A persistent kernel: grid[0] counts work tiles, and the launch holds only as many blocks as
  // the device runs at once (LaunchConfig::persistent), and at most persistent_blocks where that
  // is nonzero: the sanitizer's launches take few, so that every block goes on to further work
  // tiles under racecheck and synccheck, as on a long sequence.
  bool persistent = false;
  int64_t persistent_blocks = 0;
};

struct EvalRequest {
  int device = 0;
  uint64_t seed = 1;              // host RNG seed; each check derives its own from it
  bool run_correct = true;
  bool run_timed = true;
  int repeated_launches = 0;      // back-to-back launches before the re-check
  int warmup_launches = 0;
  int timed_launches = 0;
  int launches_per_sample = 1;    // the fewest launches in the graph one pair of events times
  int64_t rotation_bytes = 0;     // input sets are cycled until their total exceeds this
  // The shapes' family's float32 reference kernels, compiled for the same arch: the child loads
  // the one FamilyRuntime::reference_kernel names for each shape.
  std::string reference_cubin;
  std::vector<ShapeJob> shapes;
  std::string result_path;
};

std::string to_json(const EvalRequest& r);
// Throws std::runtime_error naming the missing or malformed field.
EvalRequest request_from_json(const std::string& text);

}  // namespace evo::cuda

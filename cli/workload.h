#pragma once
// A workload file (`evoctl submit --workload FILE`): the problems a served model asks one kernel
// template for, with weights, read once into a plan of buckets, one tuning run each. evoctl
// submits the runs; `evoctl export RUN...` of them is one dispatch table whose buckets cover the
// workload, shapes between buckets going to the nearest one (the family's problem_distance).
//
//   {
//     "name": "llama3-8b",                       // optional, for the plan's lines
//     "seed": "fa_s512_v3",                      // optional: --seed, where the file names none
//     "dtype": "bf16", "causal": true,           // optional defaults of shapes without a suffix
//     "shapes": [{"shape": "1x32x2048x128:kv8", "weight": 3,        // weight: optional, 1
//                 "starts": ["BLOCK_M=128,BLOCK_N=128,WARPS=8", ...]},  // optional
//                ...]
//   }
//
// A shape's "starts" are genomes known to suit it: its bucket's run starts from them first (the
// shapes' own, heaviest shape first), then from the command line's --start genomes that fit. A
// start list shared by every bucket reaches a late genome only after the earlier ones, which a
// short search may never do.
//
// Problems of one family group (KernelFamily::workload_group) whose distance from the group's
// smallest problem is at most kBucketSpan share a bucket; a bucket's run tunes on its
// kRunShapes heaviest problems (a run's fitness is the geometric mean of its shapes' times, so a
// few stand for the rest).
#include <cstdint>
#include <string>
#include <vector>

#include "genome.h"
#include "problem.h"

namespace evo::cli {

// ln 2: problems within a factor of two in batch and lengths together share a tuned kernel.
constexpr double kBucketSpan = 0.6931471805599453;
constexpr size_t kRunShapes = 3;

struct WorkloadShape {
  std::string text;  // canonical (Problem::text), as the run's --shape
  double weight = 1;
  std::vector<Genome> starts;  // the file's "starts", read by the seed's search space
};

struct WorkloadBucket {
  std::string group;                 // the family's workload_group of its shapes
  std::vector<WorkloadShape> shapes;  // every shape of the file it covers, heaviest first
  double weight = 0;                  // its shapes' weights, summed
  // The shapes its run tunes on: the kRunShapes heaviest.
  std::vector<std::string> run_shapes() const;
  // Its shapes' starts, heaviest shape first, each genome once.
  std::vector<Genome> starts() const;
};

struct Workload {
  std::string name;
  std::string seed;  // empty where the file names none
  std::vector<WorkloadBucket> buckets;  // heaviest first
  double weight = 0;                    // every shape's, summed
};

// Reads and plans FILE against the template `seed` (the file's own seed where `seed` is empty,
// and it must then name one). Throws InputError with one line naming the file and what is wrong:
// unreadable, not JSON, an unknown field, no shapes, a shape the seed's family refuses (or that
// it could not tune: Problem::require_tunable), a weight that is not a positive number, a shape
// named twice, a start that is not a genome of the seed's space, a seed that disagrees with `seed`.
Workload read_workload(const std::string& path, const std::string& seed);

// A bucket's share of `total` evaluations by its weight, at least 1 (`--max-evals` spread over
// the runs); 0 where total is 0 (no limit).
int32_t max_evals_share(const Workload& w, const WorkloadBucket& b, int32_t total);

}  // namespace evo::cli

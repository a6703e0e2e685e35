// fit_model_constants: fits the attention family's model constants (ChainConstants,
// kernel_templates/attention/model_estimate.h) to genomes measured on a card, and prints how well the model's order agrees
// with the card's before and after, per file and shape.
//
//   fit_model_constants [--arch sm_90a] [--hold-out FILE.csv ...] FILE.csv ...
//
// Each FILE.csv is what bench/measured_fitness_csv.py writes from an evo.db. The fit maximises,
// over the (file, shape) groups of 20 genomes or more, the mean of each group's Spearman
// correlation less the log of how much slower the model's pick is than the measured best (a
// search keeps the top, so a good order with a poor pick still misleads it), and keeps the model
// picking the measured winner of each smaller group (a suite's large-shape winners and the few
// genomes timed beside them). It searches one constant at a time by multiplicative steps,
// halving the steps when no constant improves, so it ends in a local optimum near where it
// starts: the constants the model uses now. --hold-out files are reported, never fitted. The
// printed initializer goes into kernel_templates/attention/model_estimate.cpp by hand, with the
// tests' figures (model_evaluator_test pins a few estimates: those change with it).
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "device_catalog.h"
#include "model_calibration.h"
#include "model_evaluator.h"

namespace evo {
namespace {

using attention::ChainConstants;

struct Group {
  std::string label;  // "file shape"
  std::vector<MeasuredGenome> rows;
};

constexpr size_t kRankedGroup = 20;  // smaller groups only have to keep their winner picked

std::vector<Group> load_groups(const std::vector<std::string>& files) {
  std::vector<Group> groups;
  for (const auto& file : files) {
    const std::string name = file.substr(file.find_last_of('/') + 1);
    for (auto& [shape, rows] : group_by_shape(load_measured_genomes(file)))
      groups.push_back({name + " " + shape, std::move(rows)});
  }
  return groups;
}

// The mean over the ranked groups of Spearman less log(pick / best), less one for each small
// group whose winner the model would not pick.
double objective(std::vector<Group>& groups, const DeviceModel& dev, const ChainConstants& c) {
  double rho_sum = 0, penalty = 0;
  int ranked = 0;
  for (auto& g : groups) {
    estimate_measured(g.rows, dev, c);
    const Agreement a = agreement(g.rows);
    if (g.rows.size() >= kRankedGroup) {
      rho_sum += a.rho - std::log(a.picked_over_best);
      ++ranked;
    } else if (a.picked_over_best > 1.0) {
      penalty += 1.0;
    }
  }
  return (ranked ? rho_sum / ranked : 0) - penalty;
}

void report(const char* title, std::vector<Group>& groups, const DeviceModel& dev,
            const ChainConstants& c) {
  std::printf("%s\n", title);
  for (auto& g : groups) {
    estimate_measured(g.rows, dev, c);
    const Agreement a = agreement(g.rows);
    std::printf("  %-48s %4zu genomes  spearman %5.2f  pick %.2fx the best\n", g.label.c_str(),
                a.genomes, a.rho, a.picked_over_best);
  }
}

struct Field {
  const char* name;
  double ChainConstants::*member;
};
const Field kFields[] = {
    {"cycles_per_score_mma_sync", &ChainConstants::cycles_per_score_mma_sync},
    {"cycles_per_score_wgmma", &ChainConstants::cycles_per_score_wgmma},
    {"lone_warp_slowdown", &ChainConstants::lone_warp_slowdown},
    {"scheduler_sharing_exponent", &ChainConstants::scheduler_sharing_exponent},
    {"cycles_per_cp_async", &ChainConstants::cycles_per_cp_async},
    {"tile_barrier_cycles", &ChainConstants::tile_barrier_cycles},
    {"copy_latency_cycles", &ChainConstants::copy_latency_cycles},
    {"merge_cycles_per_group", &ChainConstants::merge_cycles_per_group},
    {"first_tile_cycles", &ChainConstants::first_tile_cycles},
    {"store_cycles", &ChainConstants::store_cycles},
    {"cluster_merge_cycles", &ChainConstants::cluster_merge_cycles},
    {"unswizzled_slowdown", &ChainConstants::unswizzled_slowdown},
    {"step_latency_cycles", &ChainConstants::step_latency_cycles},
};

ChainConstants fit(std::vector<Group>& groups, const DeviceModel& dev, ChainConstants c) {
  double best = objective(groups, dev, c);
  for (double step = 0.4; step > 0.02; step /= 2) {
    bool improved = true;
    while (improved) {
      improved = false;
      for (const Field& f : kFields) {
        for (double factor : {1 + step, 1 / (1 + step)}) {
          ChainConstants trial = c;
          trial.*f.member *= factor;
          const double score = objective(groups, dev, trial);
          if (score > best + 1e-6) {
            best = score;
            c = trial;
            improved = true;
            std::printf("  %-28s -> %-10.4g objective %.4f\n", f.name, c.*f.member, best);
          }
        }
      }
    }
  }
  return c;
}

int usage(const char* why) {
  if (why) std::fprintf(stderr, "fit_model_constants: %s\n", why);
  std::fprintf(stderr, "usage: fit_model_constants [--arch sm_90a] [--hold-out FILE.csv ...] "
                       "FILE.csv ...\n");
  return 2;
}

int run(int argc, char** argv) {
  std::string arch = "sm_90a";
  std::vector<std::string> fitted, held_out;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      usage(nullptr);
      return 0;
    }
    if (a == "--arch" || a == "--hold-out") {
      if (i + 1 >= argc) return usage((a + " needs a value").c_str());
      if (a == "--arch")
        arch = argv[++i];
      else
        held_out.push_back(argv[++i]);
    } else if (a.rfind("--", 0) == 0) {
      return usage(("unknown option " + a).c_str());
    } else {
      fitted.push_back(a);
    }
  }
  if (fitted.empty()) return usage("no measured file to fit");
  const DeviceModel* dev = find_device_model(arch);
  if (!dev) return usage(("no device model for " + arch).c_str());

  auto groups = load_groups(fitted);
  auto checks = load_groups(held_out);
  const ChainConstants start = attention::fitted_chain_constants();
  report("the constants in use, fitted files:", groups, *dev, start);
  if (!checks.empty()) report("the constants in use, held-out files:", checks, *dev, start);
  std::printf("fitting (objective %.4f):\n", objective(groups, *dev, start));
  const ChainConstants c = fit(groups, *dev, start);
  report("fitted, fitted files:", groups, *dev, c);
  if (!checks.empty()) report("fitted, held-out files:", checks, *dev, c);
  std::printf("constexpr ChainConstants kFit = {\n");
  for (const Field& f : kFields) std::printf("    /*%s=*/%.4g,\n", f.name, c.*f.member);
  std::printf("};\n");
  return 0;
}

}  // namespace
}  // namespace evo

int main(int argc, char** argv) {
  try {
    return evo::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fit_model_constants: %s\n", e.what());
    return 2;
  }
}

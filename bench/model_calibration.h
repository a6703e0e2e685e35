#pragma once
// The model evaluator against a card: genomes measured on a GPU (as bench/measured_fitness_csv.py
// writes them from an evo.db), the model's estimate for each, and how well the two orders agree.
// model_calibration_test checks the fitted constants with it; bench/fit_model_constants fits them.
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "device_catalog.h"
#include "genome.h"
#include "attention/model_estimate.h"
#include "model_evaluator.h"

namespace evo {

struct MeasuredGenome {
  std::string shape;  // as evoctl writes it: "2x8x512x64:causal"
  Genome genome;
  int registers = 0;
  int static_smem_bytes = 0;
  double median_us = 0;  // measured: per call, inputs cycled past L2 (the fitness)
  double model_us = 0;   // the model's estimate, once estimate_measured() has run
};

// Rows `shape,"genome",registers,static_smem_bytes,median_us` after a header line. Throws
// InputError naming the file and line for a file that cannot be read or a row that does not parse.
std::vector<MeasuredGenome> load_measured_genomes(const std::string& path);

// Sets each row's model_us from its genome, shape and resources.
void estimate_measured(std::vector<MeasuredGenome>& rows, const DeviceModel& dev,
                       const attention::ChainConstants& chain = attention::fitted_chain_constants());

std::map<std::string, std::vector<MeasuredGenome>> group_by_shape(
    std::vector<MeasuredGenome> rows);

// Spearman's rank correlation; tied values take their mean rank. 0 for fewer than two values or
// a constant side.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

struct Agreement {
  size_t genomes = 0;
  double rho = 0;               // Spearman of the model's times against the measured ones
  double picked_over_best = 0;  // measured time of the model's pick / the measured best
};
// Over rows of one shape; estimate_measured() first.
Agreement agreement(const std::vector<MeasuredGenome>& rows);

}  // namespace evo

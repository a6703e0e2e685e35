#pragma once
// The resident counterpart of an evaluation's fitness: the geometric mean of its shapes' times
// with one input set left in L2 (ShapeResult.resident_us), as the fitness is of the medians with
// inputs cycled past L2. Used where a run ranks by it (evod), and where both are shown (evoctl,
// the export's evidence and buckets).
#include <cmath>

#include "evo/evo.pb.h"

namespace evo {

// 0 when there are no shapes or any shape lacks a resident time (the model evaluator, workers
// built before that figure).
inline double resident_geomean_us(const v1::Evaluation& e) {
  if (e.shapes().empty()) return 0;
  double log_sum = 0;
  for (const auto& s : e.shapes()) {
    if (!(s.resident_us() > 0)) return 0;
    log_sum += std::log(s.resident_us());
  }
  return std::exp(log_sum / e.shapes_size());
}

// Whether a run with these fitness_inputs ranks this evaluation by its resident times. The model
// evaluator estimates one figure, which serves both kinds of run.
inline bool ranks_by_resident(v1::FitnessInputs fitness_inputs, const v1::Evaluation& e) {
  return fitness_inputs == v1::FITNESS_INPUTS_RESIDENT && !e.estimated();
}

// What a run ranks an evaluation by: the worker's fitness (inputs cycled past L2), or the
// geometric mean of the resident times (0 where an OK evaluation lacks one).
inline double ranked_fitness_us(v1::FitnessInputs fitness_inputs, const v1::Evaluation& e) {
  return ranks_by_resident(fitness_inputs, e) ? resident_geomean_us(e) : e.fitness_us();
}

}  // namespace evo

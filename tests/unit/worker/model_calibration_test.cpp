// The model evaluator against measurements on an NVIDIA H200, as bench/measured_fitness_csv.py
// writes them from an evo.db (the median µs per call with inputs cycled past L2, the registers
// ptxas gave the kernel):
// - data/h200_measured_fitness.csv: every genome suites 17 and 18 measured
//   (bench/results/2026-11-29-h200-suite-1[78]-*), mostly near the winners, at the four small
//   shapes and the three large ones. The model's block-chain constants were fitted to it.
// - data/h200_random_genomes.csv: 54 genomes the random strategy drew afterwards, each measured
//   at the four small shapes (bench/results/2026-11-29-h200-random-sample-*): the held-out check.
// - data/h200_random_genomes_large.csv: 40 random genomes measured at 16x16x512x64 and
//   4x16x2048x64, where many blocks share each SM and the throughput terms decide: held out too.
// The model is meant to rank variants, not to predict microseconds, so these tests ask how well
// its order agrees with the measured one (Spearman's rank correlation per shape) and whether the
// genome it would pick is near the measured best.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "device_catalog.h"
#include "model_evaluator.h"
#include "search_space.h"

namespace evo {
namespace {

struct Measured {
  std::string shape;
  Genome genome;
  int registers = 0;
  int static_smem = 0;
  double median_us = 0;
  double model_us = 0;
};

// Rows: shape,"genome",registers,static_smem_bytes,median_us (a header line first).
std::vector<Measured> load_measured(const std::string& file) {
  const SearchSpace& space = SearchSpace::for_template("fa_s512_v3");
  std::ifstream in(std::string(EVO_TEST_DATA_DIR) + "/" + file);
  EXPECT_TRUE(in.good()) << "data/" << file << " is missing";
  std::vector<Measured> out;
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    const size_t q1 = line.find('"'), q2 = line.find('"', q1 + 1);
    if (q1 == std::string::npos || q2 == std::string::npos) continue;
    Measured m;
    m.shape = line.substr(0, q1 - 1);
    m.genome = space.parse(line.substr(q1 + 1, q2 - q1 - 1));
    if (std::sscanf(line.c_str() + q2 + 1, ",%d,%d,%lf", &m.registers, &m.static_smem,
                    &m.median_us) != 3)
      ADD_FAILURE() << "bad row: " << line;
    out.push_back(std::move(m));
  }
  return out;
}

// Ranks with ties given their mean rank.
std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    for (size_t k = i; k <= j; ++k) r[order[k]] = (i + j) / 2.0;
    i = j + 1;
  }
  return r;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const auto ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size());
  const double mean = (n - 1) / 2.0;
  double cov = 0, va = 0, vb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    cov += (ra[i] - mean) * (rb[i] - mean);
    va += (ra[i] - mean) * (ra[i] - mean);
    vb += (rb[i] - mean) * (rb[i] - mean);
  }
  return cov / std::sqrt(va * vb);
}

std::map<std::string, std::vector<Measured>> estimated_by_shape(const std::string& file) {
  const DeviceModel* dev = find_device_model("sm_90a");
  const SearchSpace& space = SearchSpace::for_template("fa_s512_v3");
  std::map<std::string, std::vector<Measured>> by_shape;
  for (auto& m : load_measured(file)) {
    v1::ResourceReport r;
    r.set_registers(m.registers);
    r.set_static_smem_bytes(m.static_smem);
    m.model_us = estimate_kernel(*dev, space, m.genome, parse_shape(m.shape), r).us;
    by_shape[m.shape].push_back(std::move(m));
  }
  return by_shape;
}

struct Agreement {
  double rho = 0;
  double picked_over_best = 0;  // measured time of the model's pick / the measured best
};

Agreement agreement(const std::vector<Measured>& rows) {
  std::vector<double> measured, model;
  for (const auto& m : rows) {
    measured.push_back(m.median_us);
    model.push_back(m.model_us);
  }
  const auto pick = std::min_element(rows.begin(), rows.end(), [](const Measured& a, const Measured& b) {
    return a.model_us < b.model_us;
  });
  const double best = *std::min_element(measured.begin(), measured.end());
  return {spearman(measured, model), pick->median_us / best};
}

TEST(ModelCalibration, SpearmanOfKnownOrdersIsExact) {
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  EXPECT_NEAR(spearman({1, 2, 3, 4, 5}, {2, 1, 4, 3, 5}), 0.8, 1e-12);
}

const std::vector<std::string> kSmallShapes = {"1x8x512x64", "1x8x512x64:causal", "2x8x512x64",
                                              "2x8x512x64:causal"};

// Each shape's rows: the model's order against the card's, and how far the genome it would pick
// is from the measured best.
void expect_agreement(const std::map<std::string, std::vector<Measured>>& by_shape,
                      const std::vector<std::string>& shapes, double min_rho, double max_pick) {
  for (const auto& shape : shapes) {
    ASSERT_TRUE(by_shape.count(shape)) << shape;
    const auto& rows = by_shape.at(shape);
    ASSERT_GE(rows.size(), 40u) << shape;
    const Agreement a = agreement(rows);
    std::printf("%-20s %3zu genomes  spearman %.2f  model's pick %.2fx the measured best\n",
                shape.c_str(), rows.size(), a.rho, a.picked_over_best);
    if (std::getenv("EVO_MODEL_CALIBRATION_DUMP"))  // every row, for work on the model
      for (const auto& m : rows)
        std::printf("  measured %8.2f  model %8.2f  %s\n", m.median_us, m.model_us,
                    m.genome.genes_text().c_str());
    EXPECT_GE(a.rho, min_rho) << shape;
    EXPECT_LE(a.picked_over_best, max_pick) << shape;
  }
}

// The data the constants were fitted to (about 40 genomes a shape, mostly good ones): the model
// orders them like the card (0.86-0.96; the model before the block chain: -0.11-0.81), and its
// pick is within 5 % of the measured best.
TEST(ModelCalibration, RanksTheSuitesGenomesLikeTheCard) {
  expect_agreement(estimated_by_shape("h200_measured_fitness.csv"), kSmallShapes, 0.8, 1.05);
}

// Genomes the fit never saw, drawn at random: the order still agrees (0.75-0.80; before the block
// chain 0.47-0.69, picking a genome twice as slow as the best at 1,8), and the pick is within
// 15 % of the measured best.
TEST(ModelCalibration, RanksARandomSampleLikeTheCard) {
  expect_agreement(estimated_by_shape("h200_random_genomes.csv"), kSmallShapes, 0.7, 1.15);
}

// Random genomes at two large shapes (the fit saw three or four genomes there): the order agrees
// (0.91 and 0.85; before the block chain 0.85 and 0.75), though the pick is weaker than at the
// small shapes (1.11x and 1.26x the best; before 1.17x and 1.29x).
TEST(ModelCalibration, RanksARandomSampleAtTheLargeShapesLikeTheCard) {
  expect_agreement(estimated_by_shape("h200_random_genomes_large.csv"), {"16x16x512x64", "4x16x2048x64"},
                   0.75, 1.35);
}

// The large shapes, three or four genomes each (a suite's table winner and the few it was
// re-measured beside): the model picks the measured winner.
TEST(ModelCalibration, PicksTheMeasuredWinnerAtTheLargeShapes) {
  const auto by_shape = estimated_by_shape("h200_measured_fitness.csv");
  int shapes = 0;
  for (const auto& [shape, rows] : by_shape) {
    if (rows.size() >= 40) continue;
    ++shapes;
    const Agreement a = agreement(rows);
    std::printf("%-22s %zu genomes  model's pick %.2fx the measured best\n", shape.c_str(), rows.size(),
                a.picked_over_best);
    EXPECT_EQ(a.picked_over_best, 1.0) << shape;
  }
  EXPECT_EQ(shapes, 6);
}

}  // namespace
}  // namespace evo

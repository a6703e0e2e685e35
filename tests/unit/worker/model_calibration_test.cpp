// The model evaluator against measurements on an NVIDIA H200, as bench/measured_fitness_csv.py
// writes them from an evo.db (the median µs per call with inputs cycled past L2, the registers
// ptxas gave the kernel). bench/fit_model_constants fitted the model's chain constants to the
// first three files; the others it never saw:
// - data/h200_measured_fitness.csv: every genome suites 17 and 18 measured
//   (bench/results/2026-11-29-h200-suite-1[78]-*), mostly near the winners, at the four small
//   shapes and the three large ones.
// - data/h200_random_genomes.csv: 54 genomes the random strategy drew, each measured at the four
//   small shapes (bench/results/2026-11-29-h200-random-sample-*).
// - data/h200_random_genomes_large.csv: 40 random genomes measured at 16x16x512x64 and
//   4x16x2048x64, where many blocks share each SM and the throughput terms decide.
// - data/h200_held_out_small.csv, data/h200_held_out_large.csv: 47 and 42 more random genomes at
//   the same shapes (rng seeds 1201 and 1202; bench/results/2026-11-29-h200-held-out-*).
// - data/h200_held_out_2_small.csv, data/h200_held_out_2_large.csv: 32 and 40 more (rng seeds
//   1204 and 1203), measured after the fit that added the step's fixed latency
//   (bench/results/2026-11-29-h200-held-out-2-*).
// The model is meant to rank variants, not to predict microseconds, so these tests ask how well
// its order agrees with the measured one (Spearman's rank correlation per shape) and whether the
// genome it would pick is near the measured best.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "device_catalog.h"
#include "errors.h"
#include "model_calibration.h"
#include "test_support.h"

namespace evo {
namespace {

std::map<std::string, std::vector<MeasuredGenome>> estimated_by_shape(const std::string& file) {
  auto rows = load_measured_genomes(std::string(EVO_TEST_DATA_DIR) + "/" + file);
  estimate_measured(rows, *find_device_model("sm_90a"));
  return group_by_shape(std::move(rows));
}

TEST(ModelCalibration, SpearmanOfKnownOrdersIsExact) {
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  EXPECT_NEAR(spearman({1, 2, 3, 4, 5}, {2, 1, 4, 3, 5}), 0.8, 1e-12);
  EXPECT_NEAR(spearman({1, 2, 2, 3}, {1, 2, 3, 4}), 0.9486832980505138, 1e-12);  // a tie
  EXPECT_EQ(spearman({1}, {1}), 0.0);
  EXPECT_EQ(spearman({2, 2, 2}, {1, 2, 3}), 0.0);
}

TEST(ModelCalibration, AgreementNamesTheMeasuredTimeOfTheModelsPick) {
  std::vector<MeasuredGenome> rows(3);
  rows[0].median_us = 5, rows[0].model_us = 9;
  rows[1].median_us = 4, rows[1].model_us = 8;
  rows[2].median_us = 6, rows[2].model_us = 7;  // the model's pick, 1.5x the best
  const Agreement a = agreement(rows);
  EXPECT_EQ(a.genomes, 3u);
  EXPECT_DOUBLE_EQ(a.picked_over_best, 1.5);
  EXPECT_DOUBLE_EQ(a.rho, -0.5);
}

// A measured file that cannot be used is one error naming the file and the line, never a
// silently shorter sample.
TEST(ModelCalibration, BadMeasuredFilesAreOneErrorWithTheLine) {
  test::TempDir dir;
  const auto write = [&](const std::string& text) {
    const std::string path = dir.path() + "/m.csv";
    std::ofstream(path) << "shape,genome,registers,static_smem_bytes,median_us\n" << text;
    return path;
  };
  const std::string good = "1x8x512x64,\"BLOCK_M=64,BLOCK_N=64\",128,0,5.5\n";
  EXPECT_EQ(load_measured_genomes(write(good)).size(), 1u);
  EXPECT_THROW(load_measured_genomes(dir.path() + "/absent.csv"), InputError);
  for (const std::string bad : {
           "1x8x512x64,BLOCK_M=64,128,0,5.5\n",                   // genome not quoted
           "1x8x512,\"BLOCK_M=64\",128,0,5.5\n",                   // shape
           "1x8x512x64,\"BLOCK_M=63\",128,0,5.5\n",                // a value outside the domain
           "1x8x512x64,\"BLOCK_M=64\",128,0\n",                    // median missing
           "1x8x512x64,\"BLOCK_M=64\",128,0,0\n",                  // median not positive
           "1x8x512x64,\"BLOCK_M=64\",128,0,5.5x\n",               // trailing text
       }) {
    try {
      load_measured_genomes(write(good + bad));
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("m.csv:3: "), std::string::npos) << e.what();
    }
  }
}

const std::vector<std::string> kSmallShapes = {"1x8x512x64", "1x8x512x64:causal", "2x8x512x64",
                                              "2x8x512x64:causal"};

// Each shape's rows: the model's order against the card's, and how far the genome it would pick
// is from the measured best.
void expect_agreement(const std::map<std::string, std::vector<MeasuredGenome>>& by_shape,
                      const std::vector<std::string>& shapes, double min_rho, double max_pick) {
  for (const auto& shape : shapes) {
    ASSERT_TRUE(by_shape.count(shape)) << shape;
    const auto& rows = by_shape.at(shape);
    ASSERT_GE(rows.size(), 30u) << shape;  // 48 draws lose up to a third to the gates
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

const std::vector<std::string> kLargeShapes = {"16x16x512x64", "4x16x2048x64"};

// The suites' genomes (about 40 a shape, mostly good ones): the model orders them like the card
// (0.86-0.95; the model before the block chain: -0.11-0.81), and its pick is within 5 % of the
// measured best.
TEST(ModelCalibration, RanksTheSuitesGenomesLikeTheCard) {
  expect_agreement(estimated_by_shape("h200_measured_fitness.csv"), kSmallShapes, 0.8, 1.05);
}

// Random genomes, fitted too: 0.95-0.96 (0.75-0.80 before tiles without SWIZZLE were charged
// their bank conflicts; 0.47-0.69 before the block chain).
TEST(ModelCalibration, RanksARandomSampleLikeTheCard) {
  expect_agreement(estimated_by_shape("h200_random_genomes.csv"), kSmallShapes, 0.9, 1.15);
}

// At the large shapes: 0.98 and 0.97 (0.91 and 0.85 before the bank conflicts), picks 1.00x
// (4x16x2048x64: 1.26x before each step had a fixed latency, when the model put 32-key tiles,
// four blocks an SM, first; they ran 1.26x the best).
TEST(ModelCalibration, RanksARandomSampleAtTheLargeShapesLikeTheCard) {
  expect_agreement(estimated_by_shape("h200_random_genomes_large.csv"), kLargeShapes, 0.9, 1.05);
}

// The held-out check: random genomes drawn and measured before the fit, which never saw them.
// Small shapes 0.92-0.96, picks within 2 % of the best (the constants before the fit that first
// saw them: 0.88-0.92).
TEST(ModelCalibration, RanksHeldOutGenomesLikeTheCard) {
  expect_agreement(estimated_by_shape("h200_held_out_small.csv"), kSmallShapes, 0.85, 1.05);
}

// Large shapes 0.98 and 0.95, picks 1.00x. Without the bank-conflict term the order was 0.66 and
// 0.47 (every tile without SWIZZLE ran 3-5x slower than the model said); without the step's fixed
// latency the picks were 1.09x and 1.25x. This sample was looked at when that term was added, so
// it is no longer a clean check of it; the second held-out sample is.
TEST(ModelCalibration, RanksHeldOutGenomesAtTheLargeShapesLikeTheCard) {
  expect_agreement(estimated_by_shape("h200_held_out_large.csv"), kLargeShapes, 0.9, 1.05);
}

// The second held-out sample, drawn after the last fit: small shapes 0.94-0.95, picks 1.00-1.01x
// but 1.09x at 1x8x512x64:causal; large 0.98 and 0.93, picks 1.00x. (The constants before that
// fit read the same within 0.02: the sample holds none of the 32-key tiles it was about.)
TEST(ModelCalibration, RanksASecondHeldOutSampleLikeTheCard) {
  expect_agreement(estimated_by_shape("h200_held_out_2_small.csv"), kSmallShapes, 0.85, 1.15);
  expect_agreement(estimated_by_shape("h200_held_out_2_large.csv"), kLargeShapes, 0.85, 1.05);
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

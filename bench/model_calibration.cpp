#include "model_calibration.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>

#include "errors.h"
#include "search_space.h"

namespace evo {

std::vector<MeasuredGenome> load_measured_genomes(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError("cannot read " + path);
  const SearchSpace& space = SearchSpace::for_template("fa_s512_v3");
  std::vector<MeasuredGenome> out;
  std::string line;
  std::getline(in, line);  // the header
  for (int number = 2; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    const auto bad = [&](const std::string& why) {
      return InputError(path + ":" + std::to_string(number) + ": " + why + ": " + line);
    };
    const size_t q1 = line.find('"'), q2 = line.find('"', q1 + 1);
    if (q1 == std::string::npos || q1 == 0 || q2 == std::string::npos)
      throw bad("expected shape,\"genome\",registers,static_smem_bytes,median_us");
    MeasuredGenome m;
    m.shape = line.substr(0, q1 - 1);
    try {
      space.family().parse(m.shape, {});
      m.genome = space.parse(line.substr(q1 + 1, q2 - q1 - 1));
    } catch (const std::exception& e) {
      throw bad(e.what());
    }
    char rest = 0;
    if (std::sscanf(line.c_str() + q2 + 1, ",%d,%d,%lf%c", &m.registers, &m.static_smem_bytes,
                    &m.median_us, &rest) != 3 ||
        m.median_us <= 0)
      throw bad("expected registers, static shared memory and a positive median after the genome");
    out.push_back(std::move(m));
  }
  return out;
}

void estimate_measured(std::vector<MeasuredGenome>& rows, const DeviceModel& dev,
                       const attention::ChainConstants& chain) {
  const SearchSpace& space = SearchSpace::for_template("fa_s512_v3");
  const auto wave_seconds = [&chain](const ModelInput& in) { return attention::wave_seconds(in, chain); };
  for (auto& m : rows) {
    v1::ResourceReport r;
    r.set_registers(m.registers);
    r.set_static_smem_bytes(m.static_smem_bytes);
    m.model_us = estimate_kernel(dev, space, m.genome, space.family().parse(m.shape, {}), r, wave_seconds).us;
  }
}

std::map<std::string, std::vector<MeasuredGenome>> group_by_shape(
    std::vector<MeasuredGenome> rows) {
  std::map<std::string, std::vector<MeasuredGenome>> by_shape;
  for (auto& m : rows) by_shape[m.shape].push_back(std::move(m));
  return by_shape;
}

namespace {
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
}  // namespace

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.size() < 2) return 0;
  const auto ra = ranks(a), rb = ranks(b);
  const double mean = (static_cast<double>(a.size()) - 1) / 2.0;
  double cov = 0, va = 0, vb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    cov += (ra[i] - mean) * (rb[i] - mean);
    va += (ra[i] - mean) * (ra[i] - mean);
    vb += (rb[i] - mean) * (rb[i] - mean);
  }
  return va > 0 && vb > 0 ? cov / std::sqrt(va * vb) : 0;
}

Agreement agreement(const std::vector<MeasuredGenome>& rows) {
  Agreement a;
  a.genomes = rows.size();
  if (rows.empty()) return a;
  std::vector<double> measured, model;
  for (const auto& m : rows) {
    measured.push_back(m.median_us);
    model.push_back(m.model_us);
  }
  const auto pick = std::min_element(rows.begin(), rows.end(), [](const auto& x, const auto& y) {
    return x.model_us < y.model_us;
  });
  a.rho = spearman(measured, model);
  a.picked_over_best = pick->median_us / *std::min_element(measured.begin(), measured.end());
  return a;
}

}  // namespace evo

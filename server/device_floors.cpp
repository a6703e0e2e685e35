#include "device_floors.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <spdlog/fmt/fmt.h>

#include "resident_time.h"
#include "run_lifecycle.h"

namespace evo {

namespace {

// The one table. Peaks from NVIDIA's data sheets (dense, without sparsity). The empty call is
// measured where a card of the row was at hand (bench/NOTES.md: by graph replay, 1.01 µs on an
// H200 and 1.1 µs on an H100); a card never measured gets half the H200's, so that a card quicker
// to launch than any measured one still clears its floor.
constexpr double kUnmeasuredEmptyCallUs = 0.5;
const DeviceFloor kFloors[] = {
    {"H200", 989, 4800, 1.01, "NVIDIA H200 Tensor Core GPU data sheet (SXM); empty call measured on an H200"},
    {"H100", 989, 3350, 1.1,
     "NVIDIA H100 Tensor Core GPU data sheet (SXM; the PCIe card is slower); empty call measured on an H100"},
    {"A100", 312, 2039, kUnmeasuredEmptyCallUs,
     "NVIDIA A100 Tensor Core GPU data sheet (80GB SXM); empty call not measured"},
    {"L40S", 366, 864, kUnmeasuredEmptyCallUs, "NVIDIA L40S GPU data sheet; empty call not measured"},
    // Any other card: the fastest NVIDIA lists (B200), so that the floor stays below it.
    {"", 2250, 8000, kUnmeasuredEmptyCallUs,
     "NVIDIA HGX B200 data sheet, per GPU (the fastest card listed); empty call not measured"},
};

// The floor is this fraction of the data sheets' limit: far below any honest time.
constexpr double kFloorMargin = 0.5;

double floor_us(const DeviceFloor& d, const Problem& p, bool resident) {
  const double compute_us = p.flops() / (d.peak_tflops * 1e12) * 1e6;
  const double memory_us = resident ? 0 : p.bytes_moved() / (d.memory_gbps * 1e9) * 1e6;
  return kFloorMargin * std::max({compute_us, memory_us, d.empty_call_us});
}

std::string below(const char* what, double us, double floor, const DeviceFloor& d) {
  return fmt::format("{} {:.6g} µs is below the physical floor {:.3g} µs of the device (half of what {} "
                     "allows: {:g} TFLOP/s, {:g} GB/s, {:g} µs per empty call)",
                     what, us, floor, d.source, d.peak_tflops, d.memory_gbps, d.empty_call_us);
}

}  // namespace

const DeviceFloor& device_floor(const v1::DeviceInfo& device) {
  for (const auto& row : kFloors)
    if (*row.gpu && device.gpu_name().find(row.gpu) != std::string::npos) return row;
  return kFloors[sizeof kFloors / sizeof kFloors[0] - 1];
}

std::string implausible_time(const v1::Evaluation& e, const RunRecord& run, const v1::DeviceInfo& device) {
  if (e.status() != v1::OK) return "";
  const DeviceFloor& d = device_floor(device);
  const std::vector<Problem> shapes = shapes_of(run);
  // The fitness is a geometric mean over the run's shapes: so is its floor.
  auto geomean_floor = [&](bool resident) {
    double log_sum = 0;
    for (const auto& p : shapes) log_sum += std::log(floor_us(d, p, resident));
    return shapes.empty() ? kFloorMargin * d.empty_call_us : std::exp(log_sum / double(shapes.size()));
  };
  if (const double f = geomean_floor(false); e.fitness_us() < f) return below("fitness", e.fitness_us(), f, d);
  const bool resident = ranks_by_resident(run.fitness_inputs, e);
  if (const double f = geomean_floor(resident), ranked = ranked_fitness_us(run.fitness_inputs, e); ranked < f)
    return below("the ranked fitness", ranked, f, d);
  if (e.shapes_size() != static_cast<int>(shapes.size())) return "";  // the fitness was checked above
  for (int i = 0; i < e.shapes_size(); ++i) {
    const auto& s = e.shapes(i);
    const std::string name = shapes[i].text();
    if (s.median_us() > 0 && s.median_us() < floor_us(d, shapes[i], false))
      return below(("shape " + name + ": median").c_str(), s.median_us(), floor_us(d, shapes[i], false), d);
    if (s.resident_us() > 0 && s.resident_us() < floor_us(d, shapes[i], true))
      return below(("shape " + name + ": resident time").c_str(), s.resident_us(), floor_us(d, shapes[i], true), d);
  }
  return "";
}

}  // namespace evo

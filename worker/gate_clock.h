#pragma once
// Wall time per gate, so that an evaluation says where its seconds went (GateVerdict.elapsed_ms,
// Evaluation.wall_ms): a search that measures a few candidates a minute is slow somewhere, and
// the gates are where a user can act (a slower sanitizer, a cold compile cache, a big shape).
#include <chrono>

namespace evo {

class GateClock {
 public:
  // Milliseconds since the previous lap (or since construction), and starts the next lap.
  double lap_ms() {
    const auto now = std::chrono::steady_clock::now();
    const double ms = std::chrono::duration<double, std::milli>(now - lap_start_).count();
    lap_start_ = now;
    return ms;
  }
  // Milliseconds since construction.
  double total_ms() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point lap_start_ = start_;
};

}  // namespace evo

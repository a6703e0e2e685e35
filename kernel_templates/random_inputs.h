#pragma once
// The counter-based generator the families' runtimes draw the gates' inputs with: element i of a
// tensor depends on (seed, i) alone, so a tensor is the same on every host whatever its core count,
// and drawing it parallelises. Host code only.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

namespace evo {

// SplitMix64's finaliser.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// U(-1, 1), 2^24 levels, never exactly 0.
inline float uniform_pm1(uint64_t seed, size_t i) {
  const uint64_t z = mix64(seed + 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(i) + 1));
  return (static_cast<float>(z >> 40) + 0.5f) * (2.f / 16777216.f) - 1.f;
}

// Runs fn(i) for i in [0, n) on every core. Drawn one by one from a sequential generator on one
// core, the inputs of the large shapes took most of the correctness gate's time
// (bench/NOTES.md, 2026-11-28).
template <class Fn>
void parallel_for(size_t n, Fn fn) {
  const size_t threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 64);
  const size_t chunk = std::max<size_t>(size_t(1) << 16, (n + threads - 1) / threads);
  std::vector<std::thread> pool;
  for (size_t begin = chunk; begin < n; begin += chunk)
    pool.emplace_back([=] {
      for (size_t i = begin; i < std::min(n, begin + chunk); ++i) fn(i);
    });
  for (size_t i = 0; i < std::min(n, chunk); ++i) fn(i);
  for (auto& t : pool) t.join();
}

}  // namespace evo

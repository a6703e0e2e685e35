#pragma once
// The strategies' random numbers, identical on every platform and standard library: the raw
// std::mt19937_64 sequence is fixed by the standard, but std::uniform_int_distribution's mapping
// of it is not, so bounded draws are done here by rejection.
#include <cstdint>
#include <random>

namespace evo {

class DeterministicRng {
 public:
  // Mixes the run's seed with the generation so that each generation draws a fresh, reproducible
  // stream (splitmix64 finalizer: nearby seeds give unrelated streams).
  DeterministicRng(uint64_t seed, uint64_t stream) : engine_(mix(mix(seed) ^ mix(stream + 0x9e37))) {}

  // Uniform in [0, n); n must be > 0.
  uint64_t below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;  // draws at or above this would bias
    uint64_t x;
    do x = engine_();
    while (x >= limit);
    return x % n;
  }
  // True with probability 1/n.
  bool one_in(uint64_t n) { return below(n) == 0; }

 private:
  static uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::mt19937_64 engine_;
};

}  // namespace evo

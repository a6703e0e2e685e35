// libFuzzer target: the genome parser of the fa_s512_v3 search space on arbitrary bytes. Bad text
// must end in InputError only; an accepted genome must have every gene in its domain and parse
// back to itself from its canonical text, with the same hash.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "attention/problem.h"
#include "device_limits.h"
#include "errors.h"
#include "search_space.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const evo::SearchSpace& space = evo::SearchSpace::for_template("fa_s512_v3");
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  evo::Genome genome;
  try {
    genome = space.parse(text);
  } catch (const evo::InputError&) {
    return 0;
  }
  if (genome.genes().size() != space.genes().size()) std::abort();
  for (size_t i = 0; i < space.genes().size(); ++i) {
    const auto& domain = space.genes()[i].values;
    if (std::find(domain.begin(), domain.end(), genome.genes()[i].second) == domain.end()) std::abort();
  }
  const evo::Genome again = space.parse(genome.text());
  if (again != genome || again.hash() != genome.hash()) std::abort();
  // Validity checks on a parsed genome must not throw anything but InputError either.
  try {
    (void)space.violated_constraint(genome, evo::attention::to_problem({}), evo::kDefaultSmemLimit);
  } catch (const evo::InputError&) {
  }
  return 0;
}

// The families' CUDA sides (family_runtime.h), one line each: a family whose kernels the worker
// gates needs its runtime here as well as its KernelFamily in template_registry.cpp.
#include <stdexcept>
#include <string>

#include "attention/runtime.h"
#include "family.h"
#include "family_runtime.h"

namespace evo {

const std::vector<const FamilyRuntime*>& family_runtimes() {
  static const std::vector<const FamilyRuntime*> all = {
      &attention::runtime(),
  };
  return all;
}

const FamilyRuntime* find_family_runtime(std::string_view family) {
  for (const FamilyRuntime* r : family_runtimes())
    if (r->family() == family) return r;
  return nullptr;
}

const FamilyRuntime& runtime_for(const RuntimeProblem& p) {
  const std::string_view family = p.family().id;
  const FamilyRuntime* r = find_family_runtime(family);
  if (!r) throw std::invalid_argument("no runtime for the kernel family '" + std::string(family) + "'");
  return *r;
}

}  // namespace evo

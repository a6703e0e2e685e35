// make_evaluator (declared in evaluator.h): picks the backend by name.
#include "errors.h"
#include "evaluator.h"
#include "model_evaluator.h"
#ifdef EVO_HAVE_CUDA_EVALUATOR
#include "cuda/cuda_evaluator.h"
#endif

namespace evo {

std::unique_ptr<Evaluator> make_evaluator(const EvaluatorOptions& options) {
  if (options.backend == "model") return make_model_evaluator(options);
  if (options.backend == "cuda") {
#ifdef EVO_HAVE_CUDA_EVALUATOR
    return make_cuda_evaluator(options);
#else
    throw std::runtime_error("this build has no cuda evaluator; use --backend model");
#endif
  }
  throw InputError("unknown backend '" + options.backend + "' (known: cuda, model)");
}

}  // namespace evo

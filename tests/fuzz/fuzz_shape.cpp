// libFuzzer target: the attention problem grammar (attention::parse_shape) on arbitrary bytes. A malformed shape must end in InputError and
// nothing else (no crash, no other exception, no sanitizer report); an accepted one must satisfy
// the documented bounds and survive a round trip through its canonical text and through the
// Problem core code holds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "attention/problem.h"
#include "errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (bool causal_default : {false, true}) {
    evo::attention::Shape shape;
    try {
      shape = evo::attention::parse_shape(text, causal_default, causal_default ? evo::DType::kBF16 : evo::DType::kF16);
    } catch (const evo::InputError&) {
      continue;  // refused with a message: the expected outcome for most inputs
    }
    const int64_t limit = int64_t{1} << 20;
    for (int64_t d : {shape.batch, shape.heads, shape.seq_q, shape.seq_k, shape.head_dim})
      if (d < 1 || d > limit) std::abort();
    const int64_t longest = shape.seq_q > shape.seq_k ? shape.seq_q : shape.seq_k;
    if (static_cast<double>(shape.batch) * shape.heads * longest * shape.head_dim >= 2147483648.0) std::abort();
    if (shape.dtype != evo::DType::kF16 && shape.dtype != evo::DType::kBF16) std::abort();
    if (!(evo::attention::parse_shape(shape.text()) == shape)) std::abort();
    const evo::Problem problem = evo::attention::to_problem(shape);
    if (!(evo::attention::shape_of(problem) == shape) || problem.text() != shape.text()) std::abort();
  }
  return 0;
}

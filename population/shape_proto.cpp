#include "shape_proto.h"

#include <string>

#include "errors.h"

namespace evo {

v1::Shape shape_to_proto(const ProblemShape& p) {
  v1::Shape s;
  s.set_batch(p.batch);
  s.set_heads(p.heads);
  s.set_seq_q(p.seq_q);
  s.set_seq_k(p.seq_k);
  s.set_head_dim(p.head_dim);
  s.set_causal(p.causal);
  s.set_dtype(dtype_to_proto(p.dtype));
  return s;
}

ProblemShape shape_from_proto(const v1::Shape& s) {
  ProblemShape p;
  p.batch = s.batch();
  p.heads = s.heads();
  p.seq_q = s.seq_q();
  p.seq_k = s.seq_k();
  p.head_dim = s.head_dim();
  p.causal = s.causal();
  p.dtype = dtype_from_proto(s.dtype());
  return p;
}

v1::DType dtype_to_proto(DType d) { return d == DType::kBF16 ? v1::DTYPE_BF16 : v1::DTYPE_FP16; }

DType dtype_from_proto(v1::DType d) {
  switch (d) {
    case v1::DTYPE_FP16:
      return DType::kF16;
    case v1::DTYPE_BF16:
      return DType::kBF16;
    default:
      // An enum value from a newer peer: proto3 keeps it, and guessing fp16 would tune, time or
      // export the wrong kernel.
      throw InputError("unknown dtype " + std::to_string(static_cast<int>(d)) + ": expected fp16 or bf16");
  }
}

}  // namespace evo

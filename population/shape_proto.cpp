#include "shape_proto.h"

namespace evo {

v1::Shape shape_to_proto(const ProblemShape& p) {
  v1::Shape s;
  s.set_batch(p.batch);
  s.set_heads(p.heads);
  s.set_seq_q(p.seq_q);
  s.set_seq_k(p.seq_k);
  s.set_head_dim(p.head_dim);
  s.set_causal(p.causal);
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
  return p;
}

}  // namespace evo

#pragma once
// The attention family's problem: [batch, heads, seq, head_dim], causal or not, in fp16 or bf16.
// attention::Shape is its typed view, for the family's own code (the grammar here, the worker's
// gates, the export, the model); code outside the family holds an evo::Problem and converts at
// the family's edge (to_problem, shape_of).
#include <string>
#include <string_view>

#include "attention/dtype.h"
#include "evo/evo.pb.h"
#include "family.h"

namespace evo::attention {

struct Shape {
  int batch = 1;
  int heads = 8;
  int seq_q = 512;
  int seq_k = 512;
  int head_dim = 64;
  bool causal = false;
  DType dtype = DType::kF16;

  // "1x8x512x64" (seq_k = seq_q), "1x8x512x1024x64" (seq_q, seq_k), then ":causal" if causal and
  // ":bf16" if bf16: fp16 prints no suffix, so texts from before bf16 are still canonical.
  std::string text() const;
  double flops() const;  // 4*B*H*Sq*Sk*D, halved for causal
  // Q, K and V read and O written once: 2*B*H*D*(Sq + Sk) elements of the dtype's size.
  double bytes_moved() const;
  friend bool operator==(const Shape& a, const Shape& b) {
    return a.batch == b.batch && a.heads == b.heads && a.seq_q == b.seq_q && a.seq_k == b.seq_k &&
           a.head_dim == b.head_dim && a.causal == b.causal && a.dtype == b.dtype;
  }
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }
};

// The family (family.cpp), and a Shape as the Problem core code holds, and back. shape_of throws
// std::invalid_argument for a problem of another family.
const KernelFamily& family();
Problem to_problem(const Shape& s);
Shape shape_of(const Problem& p);

// "fp16", "bf16".
std::string_view dtype_name(DType d);
// The inverse of dtype_name; throws InputError "unknown dtype 'fp8': expected fp16 or bf16".
DType parse_dtype(std::string_view name);

// Throws InputError naming the problem: "malformed shape '1x8x512': expected BxHxSxD".
// Every dimension must be in 1..2^20 and the tensor under 2^31 elements. Suffixes, in either
// order and each at most once: ":causal" or ":nc", and a dtype (":fp16", ":bf16"); the defaults
// apply where the text has none. A suffix ending in a digit names a dtype, and an unknown one is
// "unknown dtype 'fp8' in shape '1x8x512x64:fp8': expected fp16 or bf16".
Shape parse_shape(std::string_view text, bool causal_default = false, DType dtype_default = DType::kF16);

// For a shape to tune or evaluate: throws InputError when it is causal with seq_q != seq_k. The
// kernel's mask aligns query i with key i, where libraries differ once the lengths differ, so the
// exported kernel refuses such calls and a run must not tune for them. (parse_shape accepts them:
// runs stored before this check still load.)
void require_square_if_causal(const Shape& shape, std::string_view text);

// The wire form (evo.v1.Shape, the attention case of evo.v1.Problem). shape_from_proto throws
// InputError for a dtype this build does not know (a newer peer's enum value).
v1::Shape shape_to_proto(const Shape& s);
Shape shape_from_proto(const v1::Shape& s);
v1::DType dtype_to_proto(DType d);
DType dtype_from_proto(v1::DType d);

}  // namespace evo::attention

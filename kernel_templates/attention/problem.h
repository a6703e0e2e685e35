#pragma once
// The attention family's problem: Q and O [batch, heads, seq_q, head_dim], K and V [batch,
// heads_kv, seq_k, head_dim] (grouped-query attention: query head h reads K/V head
// h / (heads / heads_kv)), causal or not, in fp16, bf16 or e4m3 (FP8 Q/K/V, bf16 O); or a packed batch of sequences of
// their own lengths (FlashAttention's varlen): Q and O [total_q, heads, head_dim], K and V
// [total_k, heads_kv, head_dim], sequence i at rows cu_seqlens[i] .. cu_seqlens[i + 1].
// attention::Shape is its typed view, for the family's own code (the grammar here, the worker's
// gates, the export, the model); code outside the family holds an evo::Problem and converts at
// the family's edge (to_problem, shape_of).
#include <string>
#include <string_view>
#include <vector>

#include "attention/dtype.h"
#include "evo/evo.pb.h"
#include "family.h"

namespace evo::attention {

struct Shape {
  int batch = 1;
  int heads = 8;
  // K/V heads, a divisor of heads; 0 (the default): as many as heads. Read it through kv_heads(),
  // so that a shape whose heads are set and its K/V heads not is not grouped by accident.
  int heads_kv = 0;
  int seq_q = 512;
  int seq_k = 512;
  int head_dim = 64;
  bool causal = false;
  DType dtype = DType::kF16;
  // A packed batch: sequence i has lens_q[i] queries and lens_k[i] keys (batch of each); empty for
  // a dense one. batch, seq_q and seq_k then hold the count and the longest lengths (pack() sets
  // them), which is what the search space and the launch grid read.
  std::vector<int> lens_q, lens_k;

  bool varlen() const { return !lens_q.empty(); }
  // Sets the lengths and, from them, batch, seq_q and seq_k.
  void pack(std::vector<int> queries, std::vector<int> keys);
  // Every query row and key row of the call (batch * seq for a dense batch).
  long long total_q() const;
  long long total_k() const;

  // "1x8x512x64" (seq_k = seq_q), "1x8x512x1024x64" (seq_q, seq_k), "17+300/4096x32x128" (a
  // packed batch: each sequence's length, or queries/keys), then ":kv2" if heads_kv != heads,
  // ":causal" if causal and ":bf16" if bf16: fp16 and equal heads print no suffix, so texts from
  // before grouped queries and bf16 are still canonical.
  std::string text() const;
  // 4*H*D times the (query, key) pairs computed, summed over the sequences: Sq*Sk, or, causal,
  // Sq*Sk - Sq*Sq/2 (half of the square for Sq == Sk, the convention FlashAttention's figures use;
  // bottom-right for Sq < Sk).
  double flops() const;
  // Q and O of `heads` heads, K and V of `heads_kv`, each read or written once, in the dtype's
  // bytes (e4m3: one byte in, a bf16 out).
  double bytes_moved() const;
  // Bottom-right causal alignment: query row i sees keys 0 .. i + causal_shift().
  int causal_shift() const { return seq_k - seq_q; }
  int kv_heads() const { return heads_kv > 0 ? heads_kv : heads; }
  friend bool operator==(const Shape& a, const Shape& b) {
    return a.batch == b.batch && a.heads == b.heads && a.kv_heads() == b.kv_heads() && a.seq_q == b.seq_q && a.seq_k == b.seq_k &&
           a.head_dim == b.head_dim && a.causal == b.causal && a.dtype == b.dtype && a.lens_q == b.lens_q &&
           a.lens_k == b.lens_k;
  }
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }
};

// The family (family.cpp), and a Shape as the Problem core code holds, and back. shape_of throws
// std::invalid_argument for a problem of another family.
const KernelFamily& family();
Problem to_problem(const Shape& s);
Shape shape_of(const Problem& p);

// "fp16", "bf16", "e4m3".
std::string_view dtype_name(DType d);
// The inverse of dtype_name; throws InputError "unknown dtype 'fp8': expected fp16, bf16 or e4m3".
DType parse_dtype(std::string_view name);

// Throws InputError naming the problem: "malformed shape '1x8x512': expected BxHxSxD".
// Every dimension must be in 1..2^20 and the tensor under 2^31 elements. A packed batch is
// "LENSxHxD", LENS a '+'-separated list of at most 4096 sequences, each "L" or "Lq/Lk". Suffixes, in any order
// and each at most once: ":causal" or ":nc", a dtype (":fp16", ":bf16", ":e4m3") and ":kvN" (N K/V heads,
// dividing the query heads; the query heads where it is absent); the defaults apply where the
// text has none. A suffix ending in a digit names a dtype, and an unknown one is
// "unknown dtype 'fp8' in shape '1x8x512x64:fp8': expected fp16, bf16 or e4m3".
Shape parse_shape(std::string_view text, bool causal_default = false, DType dtype_default = DType::kF16);

// For a shape to tune or evaluate: throws InputError when it is causal with seq_q > seq_k (for a
// packed batch: any sequence's). Causal
// aligns the diagonal bottom-right (query i sees keys up to i + seq_k - seq_q, as a KV cache
// needs); with more queries than keys the first rows would see no key at all, which the exported
// kernel refuses rather than answer with rows of nothing. (parse_shape accepts them: runs stored
// before this check still load.)
void require_servable_causal(const Shape& shape, std::string_view text);

// A decode step: at most this many query rows (a few speculated tokens) against a cache.
constexpr int kDecodeMaxQueries = 16;
// Shapes one tuned kernel may serve: the same heads, head dim, causality, dtype and phase
// (prefill, a chunk over a cache, or decode). "heads 32/8, head dim 128, causal, bf16, chunk".
std::string workload_group(const Shape& s);
// |ln| of the ratios of batch, seq_q and seq_k, summed: how far apart two shapes of a group are
// (packed batches by their longest lengths).
// The exported dispatch table (export_entry.cpp) picks the nearest bucket by the same sum.
double shape_distance(const Shape& a, const Shape& b);

// The wire form (evo.v1.Shape, the attention case of evo.v1.Problem). shape_from_proto throws
// InputError for a dtype this build does not know (a newer peer's enum value).
v1::Shape shape_to_proto(const Shape& s);
Shape shape_from_proto(const v1::Shape& s);
v1::DType dtype_to_proto(DType d);
DType dtype_from_proto(v1::DType d);

}  // namespace evo::attention

#pragma once
// The attention family's one kernel parameter, passed by value (__grid_constant__): the ABI
// between a kernel and whoever launches it. The kernel text NVRTC compiles inlines this file (see
// cmake/EmbedText.cmake), and the worker, the exported entry point and the planted test kernels
// include it, so there is one layout; tests/unit/worker/params_layout_test.cpp checks that the host
// compiler and NVRTC agree on it. Plain C++ that includes nothing: no CUDA header is needed on the
// host. Q, K, V and O are untyped; the kernel casts them to its element type (its DTYPE).
#include "dtype.h"

namespace evo {

struct FaParams {
  // Q and O [batch, heads, seq_q, head_dim], K and V [batch, heads_kv, seq_k, head_dim],
  // contiguous, of the kernel's element type; VARLEN kernels (a packed batch): Q and O
  // [total_q, heads, head_dim], K and V [total_k, heads_kv, head_dim]. DTYPE e4m3: V is V^T,
  // [batch, heads_kv, head_dim, seq_k rounded up to 16], and O is bf16 (dtype.h).
  const void* q;
  const void* k;
  const void* v;
  void* o;
  int batch, heads, seq_q, seq_k;
  float softmax_scale;  // multiplies q.k before the softmax
  // K/V heads: query head h reads K/V head h / (heads / heads_kv). 0 (a caller that sets none,
  // value-initialised) is read as `heads`.
  int heads_kv;
  // Scratch for kernels whose space asks for it ("workspace_bytes"), zeroed once by the caller;
  // nullptr when the launch needs none.
  void* workspace;
  // VARLEN kernels only: sequence b's queries are rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1] of
  // Q and O, its keys rows cu_seqlens_k[b] .. cu_seqlens_k[b + 1] of K and V (device arrays of
  // batch + 1 offsets, the first 0); seq_q and seq_k are then the longest sequence's lengths and
  // total_q and total_k the rows of the tensors. Null and 0 for a dense batch.
  const int* cu_seqlens_q;
  const int* cu_seqlens_k;
  int total_q, total_k;
  // DTYPE e4m3 only: device arrays of float scales, Q's per (batch, head) and K's and V's per
  // (batch, K/V head), each element of a tensor standing for element * scale; null otherwise.
  const float* q_scale;
  const float* k_scale;
  const float* v_scale;
  // TMA instantiations only: CUtensorMap descriptors of q, k, v and o, filled on the host by
  // evo::encode_attention_tensor_maps (attention_tensor_maps.h) before the launch; zeros otherwise.
  struct alignas(64) TensorMap {
    unsigned long long opaque[16];
  };
  TensorMap q_map, k_map, v_map, o_map;
};

}  // namespace evo

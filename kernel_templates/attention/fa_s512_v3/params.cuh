#pragma once
// fa_s512_v3's one kernel parameter, passed by value (__grid_constant__).
// worker/cuda/loaded_kernel.h mirrors it byte for byte on the host, which has no CUDA headers.

namespace evo {

struct FaParams {
  // [batch, heads, seq, head_dim] of the kernel's element type (its DTYPE).
  const void* q;
  const void* k;
  const void* v;
  void* o;
  int batch, heads, seq_q, seq_k;
  float softmax_scale;  // multiplies q.k before the softmax
  // Scratch for kernels whose space asks for it ("workspace_bytes"); fa_s512_v3 needs none
  // (its split-KV merges through distributed shared memory) and is passed nullptr.
  void* workspace;
  // TMA instantiations only: CUtensorMap descriptors of q, k, v and o, filled on the host by
  // evo::encode_attention_tensor_maps (attention_tensor_maps.h) before the launch.
  struct alignas(64) TensorMap {
    unsigned long long opaque[16];
  };
  TensorMap q_map, k_map, v_map, o_map;
};

}  // namespace evo

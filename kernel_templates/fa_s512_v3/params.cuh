#pragma once
// fa_s512_v3's one kernel parameter, passed by value (__grid_constant__).
// worker/cuda/loaded_kernel.h mirrors it byte for byte on the host, which has no CUDA headers.
#include <cuda_fp16.h>

namespace evo {

struct FaParams {
  const __half* q;
  const __half* k;
  const __half* v;
  __half* o;
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

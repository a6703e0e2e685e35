// One build's launcher: PDL launch attribute as the export launches, smem from the traits.
#include <cuda_runtime.h>
template <class Traits, class Kernel>
static int launch_one(Kernel kernel, const void* q, const void* k, const void* v, void* o, int b,
                      int h, int s, int d, int tma, int box, int bm, int bn, int split, int warps,
                      cudaStream_t st) {
  NS::FaParams p{};
  p.q = (decltype(p.q))q; p.k = (decltype(p.k))k; p.v = (decltype(p.v))v; p.o = (decltype(p.o))o;
  p.batch = b; p.heads = h; p.seq_q = s; p.seq_k = s; p.softmax_scale = 1.0f / sqrtf((float)d);
  if (tma) {
    int kv_box = box < bn ? box : bn, q_box = box < bm ? box : bm;
    cudaError_t e = NS::encode_attention_tensor_maps(p, d, kv_box, q_box);
    if (e != cudaSuccess) return (int)e;
  }
  const int smem = Traits::kSmemBytes;
  static bool set = false;
  if (!set) { cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem); set = true; }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3((s + bm - 1) / bm, b * h, split);
  cfg.blockDim = dim3(warps * 32);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = st;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr; cfg.numAttrs = 1;
  return (int)cudaLaunchKernelEx(&cfg, kernel, p);
}

// A/B of two builds of fa_s512_v3 in one process: the old build (evo_old) and the new (evo),
// fp16, and the new build's bf16; same genomes, same inputs; rel-L2 against a float32 reference,
// old-vs-new bitwise agreement, and per-call time by graph replay (20 programmatic launches per
// graph), old and new alternating over rounds.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "cases.h"

extern "C" int launch_old(int, const void*, const void*, const void*, void*, int, int, int, cudaStream_t);
extern "C" int launch_new16(int, const void*, const void*, const void*, void*, int, int, int, cudaStream_t);
extern "C" int launch_newbf(int, const void*, const void*, const void*, void*, int, int, int, cudaStream_t);
using LaunchFn = int (*)(int, const void*, const void*, const void*, void*, int, int, int, cudaStream_t);

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s line %d: %s\n", #x, __LINE__, cudaGetErrorString(e_)); exit(1);} } while (0)

template <class E>
__global__ void reference(const E* q, const E* k, const E* v, float* o, int s, int d, float scale, int causal) {
  const int row = blockIdx.x * blockDim.y + threadIdx.y, bh = blockIdx.y, lane = threadIdx.x;
  if (row >= s) return;
  const E* qr = q + ((long long)bh * s + row) * d;
  const E* kb = k + (long long)bh * s * d; const E* vb = v + (long long)bh * s * d;
  float m = -INFINITY, l = 0.f, acc[4] = {0, 0, 0, 0};
  const int last = causal ? row : s - 1;
  for (int j = 0; j <= last; ++j) {
    float dot = 0.f;
    for (int i = lane; i < d; i += 32) dot += (float)qr[i] * (float)kb[(long long)j * d + i];
    for (int off = 16; off; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
    dot *= scale;
    const float nm = fmaxf(m, dot), a = expf(m - nm), pj = expf(dot - nm);
    l = l * a + pj;
    for (int t = 0; t < d / 32; ++t) acc[t] = acc[t] * a + pj * (float)vb[(long long)j * d + lane + 32 * t];
    m = nm;
  }
  for (int t = 0; t < d / 32; ++t) o[((long long)bh * s + row) * d + lane + 32 * t] = acc[t] / l;
}

template <class E> static float to_f(E x) { return (float)x; }

struct Buffers { void* q; void* k; void* v; void* o; float* ref; size_t n; };

template <class E>
static double rel_l2(const Buffers& b) {
  std::vector<E> o(b.n); std::vector<float> r(b.n);
  CK(cudaMemcpy(o.data(), b.o, b.n * sizeof(E), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(r.data(), b.ref, b.n * sizeof(float), cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  for (size_t i = 0; i < b.n; ++i) { double x = to_f(o[i]); if (!std::isfinite(x)) return INFINITY; num += (x - r[i]) * (x - r[i]); den += (double)r[i] * r[i]; }
  return std::sqrt(num / den);
}

static float graph_us(LaunchFn f, int c, const Buffers& b, int B, int H, int S) {
  cudaStream_t st; CK(cudaStreamCreate(&st));
  cudaGraph_t g; cudaGraphExec_t ex;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < 20; ++i) if (f(c, b.q, b.k, b.v, b.o, B, H, S, st)) { printf("launch failed\n"); exit(1); }
  CK(cudaStreamEndCapture(st, &g)); CK(cudaGraphInstantiate(&ex, g, 0));
  CK(cudaGraphLaunch(ex, st)); CK(cudaStreamSynchronize(st));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  std::vector<float> us;
  for (int r = 0; r < 30; ++r) {
    CK(cudaEventRecord(e0, st)); CK(cudaGraphLaunch(ex, st)); CK(cudaEventRecord(e1, st)); CK(cudaEventSynchronize(e1));
    float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); us.push_back(ms * 1000 / 20);
  }
  std::sort(us.begin(), us.end());
  cudaGraphExecDestroy(ex); cudaGraphDestroy(g); cudaStreamDestroy(st);
  return us[us.size() / 2];
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 5;
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  printf("gpu: %s, %d SMs; rounds %d; graph of 20 programmatic launches, median of 30 replays per round, median over rounds\n", prop.name, prop.multiProcessorCount, rounds);
  printf("%-15s %-16s %9s %9s %7s %9s %9s %9s %9s %s\n", "case", "shape", "old_us", "new_us", "new/old", "bf16_us", "rel_old", "rel_new", "rel_bf16", "old==new");
  std::mt19937 rng(7);
  for (int c = 0; c < kNumCases; ++c) {
    const Case& cs = kCases[c];
    for (int si = 0; si < cs.nshapes; ++si) {
      const int B = cs.shapes[si][0], H = cs.shapes[si][1], S = cs.shapes[si][2], D = cs.d;
      const size_t n = (size_t)B * H * S * D;
      std::vector<float> hq(n), hk(n), hv(n);
      std::normal_distribution<float> nd(0.f, 1.f);
      for (size_t i = 0; i < n; ++i) { hq[i] = nd(rng); hk[i] = nd(rng); hv[i] = nd(rng); }
      Buffers h16{}, hbf{};
      std::vector<__half> a16(n); std::vector<__nv_bfloat16> abf(n);
      auto upload = [&](Buffers& bb, bool bf) {
        CK(cudaMalloc(&bb.q, n * 2)); CK(cudaMalloc(&bb.k, n * 2)); CK(cudaMalloc(&bb.v, n * 2)); CK(cudaMalloc(&bb.o, n * 2)); CK(cudaMalloc(&bb.ref, n * 4)); bb.n = n;
        std::vector<float>* src[3] = {&hq, &hk, &hv}; void* dst[3] = {bb.q, bb.k, bb.v};
        for (int t = 0; t < 3; ++t) {
          if (bf) { for (size_t i = 0; i < n; ++i) abf[i] = __float2bfloat16((*src[t])[i]); CK(cudaMemcpy(dst[t], abf.data(), n * 2, cudaMemcpyHostToDevice)); }
          else { for (size_t i = 0; i < n; ++i) a16[i] = __float2half((*src[t])[i]); CK(cudaMemcpy(dst[t], a16.data(), n * 2, cudaMemcpyHostToDevice)); }
        }
        dim3 grid((S + 7) / 8, B * H), block(32, 8);
        if (bf) reference<__nv_bfloat16><<<grid, block>>>((const __nv_bfloat16*)bb.q, (const __nv_bfloat16*)bb.k, (const __nv_bfloat16*)bb.v, bb.ref, S, D, 1.f / sqrtf((float)D), cs.causal);
        else reference<__half><<<grid, block>>>((const __half*)bb.q, (const __half*)bb.k, (const __half*)bb.v, bb.ref, S, D, 1.f / sqrtf((float)D), cs.causal);
        CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
      };
      upload(h16, false); upload(hbf, true);
      auto run_once = [&](LaunchFn f, const Buffers& bb) {
        CK(cudaMemset(bb.o, 0xff, n * 2));
        int e = f(c, bb.q, bb.k, bb.v, bb.o, B, H, S, 0);
        if (e) { printf("launch error %d in %s\n", e, cs.name); exit(1); }
        CK(cudaDeviceSynchronize());
      };
      run_once(launch_old, h16); double rel_old = rel_l2<__half>(h16);
      std::vector<__half> o_old(n); CK(cudaMemcpy(o_old.data(), h16.o, n * 2, cudaMemcpyDeviceToHost));
      run_once(launch_new16, h16); double rel_new = rel_l2<__half>(h16);
      std::vector<__half> o_new(n); CK(cudaMemcpy(o_new.data(), h16.o, n * 2, cudaMemcpyDeviceToHost));
      const bool same = std::memcmp(o_old.data(), o_new.data(), n * 2) == 0;
      run_once(launch_newbf, hbf); double rel_bf = rel_l2<__nv_bfloat16>(hbf);
      // repeated launches must stay correct
      for (int i = 0; i < 50; ++i) launch_new16(c, h16.q, h16.k, h16.v, h16.o, B, H, S, 0);
      CK(cudaDeviceSynchronize()); double rel_new_again = rel_l2<__half>(h16);
      std::vector<float> t_old, t_new, t_bf;
      for (int r = 0; r < rounds; ++r) {
        if (r % 2 == 0) { t_old.push_back(graph_us(launch_old, c, h16, B, H, S)); t_new.push_back(graph_us(launch_new16, c, h16, B, H, S)); }
        else { t_new.push_back(graph_us(launch_new16, c, h16, B, H, S)); t_old.push_back(graph_us(launch_old, c, h16, B, H, S)); }
        t_bf.push_back(graph_us(launch_newbf, c, hbf, B, H, S));
      }
      auto med = [](std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
      char shape[64]; snprintf(shape, sizeof shape, "%d,%d,%d,%d%s", B, H, S, D, cs.causal ? "c" : "");
      printf("%-15s %-16s %9.2f %9.2f %7.3f %9.2f %9.2e %9.2e %9.2e %s%s\n", cs.name, shape, med(t_old), med(t_new), med(t_new) / med(t_old), med(t_bf), rel_old, rel_new, rel_bf, same ? "bitwise" : "DIFFER", rel_new_again == rel_new ? "" : " REPEAT-DIFFERS");
      fflush(stdout);
      for (Buffers* bb : {&h16, &hbf}) { cudaFree(bb->q); cudaFree(bb->k); cudaFree(bb->v); cudaFree(bb->o); cudaFree(bb->ref); }
    }
  }
  return 0;
}

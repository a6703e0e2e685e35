// variant_sweep: correctness and timing of hand-picked fa_s512_v3 instantiations, outside the
// service, for kernel work: one line per (variant, shape, causal) with registers, the relative L2
// error against the float32 reference kernel, the per-launch event median and the per-call time
// by CUDA-graph replay (20 calls per graph). The evolutionary runs are the way to pick genomes;
// this is the way to see what a kernel change does to a few of them in one short GPU session.
//
//   nvcc -arch=sm_90a -std=c++17 -O3 -I kernel_templates lab/variant_sweep.cu -o variant_sweep
//   ./variant_sweep          # every case;  ./variant_sweep N  one case;  ./variant_sweep 999 count
//   VARIANT_SWEEP_CHECK_ONLY=1 ./variant_sweep N   # one checked launch per shape, no timing
//                                                  # (for compute-sanitizer)
//   VARIANT_SWEEP_ONLY=4x16x2048x64:noncausal ./variant_sweep N   # one problem only (for ncu)
//   VARIANT_SWEEP_SMEM=57344 ./variant_sweep N     # launch with that much dynamic shared memory
//   VARIANT_SWEEP_PDL=1 ./variant_sweep N          # programmatic dependent launch, as exported
//   VARIANT_SWEEP_GROWING_K=1 ./variant_sweep N    # K's rows scaled x1..x16 along the sequence
//
// A case is one instantiation run over a shape group; V: bit 0 WGMMA, bit 1 PV_ASYNC, bit 2 TMA,
// bit 3 STAGE_RELEASE, bit 4 PINGPONG, bit 5 TMA_BOX_ROWS=32 instead of 64, bit 6 QK_AHEAD,
// bit 7 TMA_BOX_ROWS=256 (each tile one box per 64 columns), bit 8 LAZY_RESCALE, bit 9
// CAUSAL_FOLD (CP_ASYNC=1, SWIZZLE=1 throughout). Each case is meant to run in its own process, so that a kernel that breaks the
// CUDA context stops only its own case.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "attention/fa_s512_v3/kernel.cuh"
#include "attention/reference.cuh"
#include "attention/tensor_maps.h"
#include "gpu_timing.cuh"

struct Shape {
  int b, h, s, d;
};

// VARIANT_SWEEP_ONLY=BxHxSxD[:causal|:noncausal] runs a case on that one problem (for ncu).
bool selected(const Shape& sh, int causal) {
  const char* only = std::getenv("VARIANT_SWEEP_ONLY");
  if (only == nullptr || *only == 0) return true;
  char want[64];
  std::snprintf(want, sizeof want, "%dx%dx%dx", sh.b, sh.h, sh.s);
  const std::string o(only), prefix(want);
  if (o.compare(0, prefix.size(), prefix) != 0) return false;
  if (o.find(":causal") != std::string::npos) return causal == 1;
  if (o.find(":noncausal") != std::string::npos) return causal == 0;
  return true;
}

template <int C, int D, int BM, int BN, int W, int ST, int SPLIT, int V>
void run(const Shape& sh, const char* name) {
  if (!selected(sh, C)) return;
  constexpr int kWgmma = V & 1, kPvAsync = (V >> 1) & 1, kTma = (V >> 2) & 1, kRelease = (V >> 3) & 1,
                kPingPong = (V >> 4) & 1, kBoxRows = (V >> 5) & 1 ? 32 : (V >> 7) & 1 ? 256 : 64,
                kQkAhead = (V >> 6) & 1, kLazy = (V >> 8) & 1, kFold = (V >> 9) & 1;
  // The bits as the SCHEDULE code that replaced those booleans (cp.async throughout).
  constexpr int kSchedule = !kTma       ? (kPvAsync ? 2 : 1)
                            : kQkAhead  ? (kRelease ? 9 : 8)
                            : kPingPong ? 7
                            : kRelease  ? (kPvAsync ? 6 : 5)
                                        : (kPvAsync ? 4 : 3);
  using T = evo::fa::KernelTraits<0, C, D, BM, BN, W, ST, kSchedule, 1, SPLIT, kWgmma, kBoxRows,
                                  kLazy, kFold, 0, 0, 0>;
  auto kernel = evo::fa_s512_v3_kernel<0, C, D, BM, BN, W, ST, kSchedule, 1, SPLIT, kWgmma,
                                       kBoxRows, kLazy, kFold, 0, 0, 0>;
  const size_t n = size_t(sh.b) * sh.h * sh.s * D;
  std::vector<__half> host[3] = {std::vector<__half>(n), std::vector<__half>(n),
                                 std::vector<__half>(n)};
  std::mt19937 rng(123);
  std::normal_distribution<float> normal(0, 1);
  for (auto& h : host)
    for (auto& x : h) x = __float2half(normal(rng));
  // VARIANT_SWEEP_GROWING_K=1 scales K's rows from x1 at the first key to x16 at the last, as the
  // worker's correctness gate does: every row's max keeps rising, so the rescale paths run.
  if (const char* g = std::getenv("VARIANT_SWEEP_GROWING_K"); g != nullptr && std::atoi(g) != 0)
    for (size_t i = 0; i < n; ++i) {
      const int key = static_cast<int>((i / D) % sh.s);
      const float growth = 1.f + 15.f * key / std::max(1, sh.s - 1);
      host[1][i] = __float2half(__half2float(host[1][i]) * growth);
    }
  __half* dev[4];
  float* ref;
  for (auto& p : dev) CHECK(cudaMalloc(&p, n * 2));
  CHECK(cudaMalloc(&ref, n * 4));
  for (int i = 0; i < 3; ++i)
    CHECK(cudaMemcpy(dev[i], host[i].data(), n * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(dev[3], 0xff, n * 2));  // NaN: an element the kernel never writes shows
  const float scale = 1.f / std::sqrt(float(D));
  evo_reference_attention_fp16<<<dim3((sh.s + 3) / 4, sh.b * sh.h), 128>>>(
      dev[0], dev[1], dev[2], ref, nullptr, nullptr, sh.b, sh.h, sh.h, sh.s, sh.s, D, scale, C);
  CHECK(cudaGetLastError());

  // VARIANT_SWEEP_SMEM=N launches with N bytes of dynamic shared memory instead of the kernel's
  // own need (when larger): fewer blocks then share an SM, all else equal.
  const char* smem_env = std::getenv("VARIANT_SWEEP_SMEM");
  const int smem = std::max<int>(T::kSmemBytes, smem_env ? std::atoi(smem_env) : 0);
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaFuncAttributes attr;
  CHECK(cudaFuncGetAttributes(&attr, kernel));
  evo::FaParams params{};  // value-initialised: equal heads, no workspace, a dense batch
  params.q = dev[0];
  params.k = dev[1];
  params.v = dev[2];
  params.o = dev[3];
  params.batch = sh.b;
  params.heads = params.heads_kv = sh.h;
  params.seq_q = params.seq_k = sh.s;
  params.softmax_scale = scale;
  if (kTma)
    CHECK(evo::encode_attention_tensor_maps(params, evo::DType::kF16, D, std::min(kBoxRows, BN), std::min(kBoxRows, BM)));
  const dim3 grid((sh.s + BM - 1) / BM, sh.b * sh.h, SPLIT);
  // VARIANT_SWEEP_PDL=1 launches as the export does by default: with programmatic stream
  // serialization, so that each call's start overlaps the previous call's tail.
  const char* pdl_env = std::getenv("VARIANT_SWEEP_PDL");
  cudaLaunchAttribute pdl{};
  pdl.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  pdl.val.programmaticStreamSerializationAllowed = 1;
  const bool with_pdl = pdl_env != nullptr && std::atoi(pdl_env) != 0;
  auto launch = [&](cudaStream_t st) {
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = dim3(T::kThreads);
    config.dynamicSmemBytes = static_cast<size_t>(smem);
    config.stream = st;
    config.attrs = with_pdl ? &pdl : nullptr;
    config.numAttrs = with_pdl ? 1 : 0;
    CHECK(cudaLaunchKernelEx(&config, kernel, params));
  };
  launch(cudaStream_t{});
  const cudaError_t launched = cudaGetLastError(), finished = cudaDeviceSynchronize();
  if (launched != cudaSuccess || finished != cudaSuccess) {
    std::printf("%-34s %dx%dx%dx%d c=%d LAUNCH FAILED %s / %s\n", name, sh.b, sh.h, sh.s, D, C,
                cudaGetErrorString(launched), cudaGetErrorString(finished));
    std::exit(1);
  }
  std::vector<__half> out(n);
  std::vector<float> expect(n);
  CHECK(cudaMemcpy(out.data(), dev[3], n * 2, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(expect.data(), ref, n * 4, cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  long nonfinite = 0;
  for (size_t i = 0; i < n; ++i) {
    const float a = __half2float(out[i]);
    if (!std::isfinite(a)) {
      ++nonfinite;
      continue;
    }
    num += double(a - expect[i]) * (a - expect[i]);
    den += double(expect[i]) * expect[i];
  }

  if (std::getenv("VARIANT_SWEEP_CHECK_ONLY") != nullptr) {
    std::printf("%-34s %dx%dx%dx%d c=%d regs=%d relL2=%.2e nonfinite=%ld (checked, not timed)\n",
                name, sh.b, sh.h, sh.s, D, C, attr.numRegs, std::sqrt(num / den), nonfinite);
    for (auto* p : dev) CHECK(cudaFree(p));
    CHECK(cudaFree(ref));
    return;
  }
  for (int i = 0; i < 20; ++i) launch(cudaStream_t{});  // warm-up
  const float launch_us = median_us(cudaStream_t{}, launch, 60, 1);
  const float graph_us = median_graph_us(launch, 20, 20);
  CHECK(cudaGetLastError());
  const double flops = 4.0 * sh.b * sh.h * double(sh.s) * sh.s * D / (C ? 2 : 1);
  std::printf(
      "%-34s %dx%dx%dx%d c=%d pdl=%d regs=%d relL2=%.2e nonfinite=%ld launch=%.2fus "
      "graph=%.2fus tflops=%.0f\n",
      name, sh.b, sh.h, sh.s, D, C, int(with_pdl), attr.numRegs, std::sqrt(num / den), nonfinite,
      launch_us, graph_us, flops / graph_us * 1e-6);
  std::fflush(stdout);
  for (auto* p : dev) CHECK(cudaFree(p));
  CHECK(cudaFree(ref));
}

#define NAME(BM, BN, W, ST, SP, V) ("v" #V " " #BM "x" #BN "x" #W "x" #ST " split" #SP)
// One instantiation (both causal settings) over a group of shapes of one head dim.
#define OVER(D, SHAPES, BM, BN, W, ST, SP, V)                        \
  for (auto sh : SHAPES) {                                           \
    run<0, D, BM, BN, W, ST, SP, V>(sh, NAME(BM, BN, W, ST, SP, V)); \
    run<1, D, BM, BN, W, ST, SP, V>(sh, NAME(BM, BN, W, ST, SP, V)); \
  }
#define SMALL_SHAPES                                                     \
  {                                                                      \
    Shape{1, 8, 512, 64}, Shape{2, 8, 512, 64}, Shape { 1, 4, 1000, 64 } \
  }
#define MID_SHAPES                                    \
  {                                                   \
    Shape{16, 16, 512, 64}, Shape { 4, 16, 2048, 64 } \
  }
#define BIG_SHAPES                                     \
  {                                                    \
    Shape{2, 16, 4096, 128}, Shape { 1, 4, 1000, 128 } \
  }
// One (batch, head) to eight at sequence 512: the same blocks, 16 to 128 of them at once. If the
// time grows with the count, the blocks contend for L2; if not, each block's own chain sets it.
#define SCALING_SHAPES                                                                     \
  {                                                                                        \
    Shape{1, 1, 512, 64}, Shape{1, 2, 512, 64}, Shape{1, 4, 512, 64}, Shape { 1, 8, 512, 64 } \
  }
#define SMALL(...) OVER(64, SMALL_SHAPES, __VA_ARGS__)
#define SCALING(...) OVER(64, SCALING_SHAPES, __VA_ARGS__)
#define MID(...) OVER(64, MID_SHAPES, __VA_ARGS__)
#define BIG(...) OVER(128, BIG_SHAPES, __VA_ARGS__)

int main(int argc, char** argv) {
  const int want = argc > 1 ? atoi(argv[1]) : -1;
  int idx = 0;
#define CASE(X)                  \
  if (want < 0 || want == idx) { \
    X                            \
  }                              \
  ++idx;
  // The best of each shape group in bench/NOTES.md's sweeps, and their nearest neighbours.
  CASE(SMALL(32, 128, 8, 4, 1, 0))
  CASE(SMALL(32, 128, 8, 2, 1, 0))
  CASE(SMALL(64, 128, 4, 2, 1, 1))
  CASE(SMALL(64, 256, 8, 2, 1, 1))
  CASE(SMALL(64, 256, 8, 3, 1, 3))
  CASE(SMALL(64, 128, 8, 3, 2, 1))
  CASE(MID(64, 128, 4, 2, 1, 1))
  CASE(MID(64, 128, 4, 3, 1, 3))
  CASE(MID(128, 64, 8, 3, 1, 3))
  CASE(BIG(128, 128, 8, 2, 1, 1))
  CASE(BIG(128, 128, 8, 3, 1, 3))
  CASE(BIG(64, 64, 4, 1, 1, 1))
  // Two warpgroups, PV_ASYNC and a cluster of 4: the last P*V raced the cluster partials (NaNs at
  // 2,8,512,64 causal) until a barrier separated them.
  CASE(SMALL(128, 64, 8, 2, 4, 3))
  // TMA copies (bit 2) beside the same instantiations with cp.async, for each shape group.
  CASE(SMALL(64, 128, 4, 2, 1, 5))
  CASE(SMALL(64, 128, 4, 3, 1, 7))
  CASE(SMALL(64, 128, 8, 3, 2, 5))
  CASE(MID(64, 128, 4, 2, 1, 5))
  CASE(MID(64, 64, 4, 2, 1, 5))
  CASE(MID(64, 64, 4, 2, 1, 1))
  CASE(MID(128, 128, 8, 2, 1, 5))
  CASE(MID(128, 128, 8, 3, 1, 7))
  CASE(BIG(128, 128, 8, 2, 1, 5))
  CASE(BIG(128, 128, 8, 3, 1, 7))
  CASE(BIG(128, 64, 8, 3, 1, 7))
  CASE(SMALL(128, 64, 8, 2, 4, 7))
  // STAGE_RELEASE (bit 3): the TMA cases above without the block-wide barrier per tile.
  CASE(SMALL(64, 128, 4, 3, 1, 15))
  CASE(MID(64, 128, 4, 2, 1, 13))
  CASE(MID(64, 64, 4, 2, 1, 13))
  CASE(MID(128, 128, 8, 2, 1, 13))
  CASE(MID(128, 128, 8, 3, 1, 15))
  CASE(BIG(128, 128, 8, 2, 1, 13))
  CASE(BIG(128, 128, 8, 3, 1, 15))
  CASE(BIG(128, 64, 8, 3, 1, 15))
  CASE(SMALL(128, 64, 8, 2, 4, 15))
  // Small shapes with less L2 traffic: 128-row blocks split four ways read a quarter of K/V each.
  // Measured slower than 32-row blocks (bench/NOTES.md): the small shapes are latency-bound.
  CASE(SMALL(32, 128, 4, 3, 1, 0))
  CASE(SMALL(128, 128, 8, 2, 4, 1))
  CASE(SMALL(128, 64, 8, 2, 4, 1))
  CASE(SMALL(128, 64, 8, 2, 4, 0))
  CASE(SMALL(128, 64, 16, 2, 4, 1))
  CASE(SMALL(64, 64, 4, 2, 4, 1))
  CASE(SMALL(64, 128, 4, 2, 2, 1))
  CASE(SMALL(64, 64, 8, 2, 2, 1))
  // Block count against time at the small shapes' block shapes (cases 42-43).
  CASE(SCALING(32, 128, 8, 4, 1, 0))
  CASE(SCALING(64, 128, 4, 2, 1, 5))
  // PINGPONG (bit 4) beside the same instantiation without it (cases 44-55).
  CASE(SMALL(64, 128, 8, 4, 1, 31))
  CASE(SMALL(64, 128, 8, 4, 1, 15))
  CASE(MID(128, 128, 8, 3, 1, 31))
  CASE(MID(128, 128, 8, 3, 1, 15))
  CASE(MID(128, 128, 8, 4, 1, 31))
  CASE(MID(128, 64, 8, 4, 1, 31))
  CASE(MID(128, 64, 8, 4, 1, 15))
  CASE(BIG(128, 128, 8, 3, 1, 31))
  CASE(BIG(128, 64, 8, 4, 1, 31))
  CASE(BIG(128, 64, 8, 4, 1, 15))
  CASE(SMALL(128, 64, 8, 4, 1, 31))
  CASE(MID(128, 128, 8, 4, 1, 15))
  // TMA_BOX_ROWS (bit 5): the suites' TMA winners with 32-row boxes beside 64-row ones (56-67).
  CASE(SMALL(64, 128, 8, 4, 1, 15))
  CASE(SMALL(64, 128, 8, 4, 1, 47))
  CASE(SMALL(64, 128, 4, 4, 1, 7))
  CASE(SMALL(64, 128, 4, 4, 1, 39))
  CASE(SMALL(64, 64, 4, 3, 1, 7))
  CASE(SMALL(64, 64, 4, 3, 1, 39))
  CASE(MID(64, 64, 4, 2, 1, 5))
  CASE(MID(64, 64, 4, 2, 1, 37))
  CASE(MID(64, 128, 4, 2, 1, 5))
  CASE(MID(64, 128, 4, 2, 1, 37))
  CASE(BIG(128, 128, 8, 3, 1, 5))
  CASE(BIG(128, 128, 8, 3, 1, 37))
  // STAGE_RELEASE with PV_ASYNC in single-warpgroup blocks that still fit three or four to an SM:
  // the refill follows the last P*V, so two stages keep a copy in flight (68-71).
  CASE(MID(64, 128, 4, 2, 1, 15))
  CASE(MID(64, 64, 4, 3, 1, 15))
  CASE(MID(64, 64, 4, 4, 1, 15))
  CASE(MID(64, 128, 4, 2, 1, 13))
  // The mid shapes' 2048 blocks are 5.2 waves of three per SM (ncu): clusters that split each
  // row tile's keys two or four ways make 10.3 or 20.7 waves, a smaller last one (72-75).
  CASE(MID(64, 128, 4, 2, 2, 5))
  CASE(MID(64, 128, 4, 2, 4, 5))
  CASE(MID(64, 64, 4, 2, 2, 5))
  CASE(MID(64, 64, 4, 2, 4, 5))
  // TMA with one stage: K and V refilled apart, each under the other's GEMM (76-80), so that
  // four 64x128 blocks fit on an SM by shared memory (40 KB each) where two stages fit three.
  CASE(MID(64, 128, 4, 1, 1, 5))
  CASE(MID(64, 64, 4, 1, 1, 5))
  CASE(SMALL(64, 128, 4, 1, 1, 5))
  CASE(BIG(64, 128, 4, 1, 1, 5))
  CASE(SMALL(128, 64, 8, 1, 2, 5))
  // The dispatch table's winners at 1,8 and 2,8 (suite 7), for launch-overlap A/B (81-82).
  CASE(SMALL(32, 256, 8, 3, 1, 0))
  CASE(SMALL(64, 128, 8, 4, 1, 63))
  // TMA under mma.sync (bit 2 without bit 0: 32-row boxes, 83-84) and the wgmma TMA block without
  // STAGE_RELEASE, whose four stages hold every tile at sequence 512 (85).
  CASE(SMALL(32, 256, 8, 3, 1, 36))
  CASE(SMALL(32, 128, 8, 4, 1, 36))
  CASE(SMALL(64, 128, 8, 4, 1, 39))
  // QK_AHEAD (bit 6): the next tile's scores issued beside this tile's P*V (86-89), with stages
  // refilled behind a barrier (three stages at 1,4,1000) and by the last warp out.
  CASE(SMALL(64, 128, 8, 4, 1, 103))
  CASE(SMALL(64, 128, 8, 3, 1, 103))
  CASE(SMALL(64, 64, 4, 4, 1, 103))
  CASE(SMALL(64, 128, 8, 4, 1, 111))
  // Whole-tile boxes (bit 7): each tile one box per 64 columns, Q's box at most BLOCK_M rows; and
  // 64-row K/V boxes under a 32-row Q tile (90-95).
  CASE(SMALL(32, 256, 8, 2, 1, 132))
  CASE(SMALL(32, 256, 8, 2, 1, 4))
  CASE(SMALL(64, 128, 8, 4, 1, 135))
  CASE(SMALL(64, 128, 8, 4, 1, 231))
  CASE(MID(64, 128, 4, 1, 1, 133))
  CASE(BIG(128, 128, 8, 3, 1, 159))
  // LAZY_RESCALE (bit 8) on the dispatch table's winners (96-100): mma.sync 32x256 at 1,8, the
  // 2,8 wgmma block, PINGPONG with whole-tile boxes at head dim 128, the one-stage block.
  CASE(SMALL(32, 256, 8, 2, 1, 292))
  CASE(SMALL(64, 128, 8, 4, 1, 295))
  CASE(BIG(128, 128, 8, 3, 1, 415))
  CASE(MID(64, 128, 4, 1, 1, 261))
  CASE(SMALL(64, 128, 8, 4, 1, 287))
  // CAUSAL_FOLD (bit 9) beside the 1,8 winner it folds (101-102); with three stages, whose
  // refills at 1,4,1000 put a block-wide barrier in the loop (103); through cp.async (104); with
  // LAZY_RESCALE (105); 64-row mma.sync blocks, four row warps (106-107).
  CASE(SMALL(32, 256, 8, 2, 1, 36))
  CASE(SMALL(32, 256, 8, 2, 1, 548))
  CASE(SMALL(32, 256, 8, 3, 1, 548))
  CASE(SMALL(32, 128, 8, 4, 1, 512))
  CASE(SMALL(32, 256, 8, 2, 1, 804))
  CASE(SMALL(64, 128, 8, 4, 1, 516))
  CASE(SMALL(64, 256, 8, 2, 1, 548))
  // 2,8's 64-row wgmma block with each warpgroup taking 128 keys of a 256-key tile, so half as
  // many steps (108-109).
  CASE(SMALL(64, 256, 8, 3, 1, 39))
  CASE(SMALL(64, 256, 8, 2, 1, 37))
  if (want < 0 || want >= idx) printf("%d cases\n", idx);
}

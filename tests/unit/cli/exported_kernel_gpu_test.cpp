// The exported kernel on a real GPU: built by the ExportedKernel fixture's nvcc step, called through
// evo_attention_forward, compared with a float32 attention on the CPU. Skips without a GPU.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "attention/problem.h"
#include "exported_kernel_fixture.h"

namespace evo {
namespace {

// o = softmax(q k^T * scale) v per (batch, head), in float, from the same fp16 inputs.
std::vector<float> cpu_attention(const std::vector<__half>& q, const std::vector<__half>& k,
                                 const std::vector<__half>& v, int bh, int s, int d, bool causal, float scale) {
  std::vector<float> o(static_cast<size_t>(bh) * s * d), row(s);
  for (int b = 0; b < bh; ++b)
    for (int i = 0; i < s; ++i) {
      const size_t qi = (static_cast<size_t>(b) * s + i) * d;
      float m = -INFINITY;
      const int last = causal ? i : s - 1;
      for (int j = 0; j <= last; ++j) {
        const size_t kj = (static_cast<size_t>(b) * s + j) * d;
        float dot = 0;
        for (int x = 0; x < d; ++x) dot += __half2float(q[qi + x]) * __half2float(k[kj + x]);
        row[j] = dot * scale;
        m = std::max(m, row[j]);
      }
      float sum = 0;
      for (int j = 0; j <= last; ++j) sum += row[j] = std::exp(row[j] - m);
      for (int j = 0; j <= last; ++j) {
        const size_t vj = (static_cast<size_t>(b) * s + j) * d;
        for (int x = 0; x < d; ++x) o[qi + x] += row[j] / sum * __half2float(v[vj + x]);
      }
    }
  return o;
}

// Relative L2 distance of `out` from `ref`; infinite if any output is not finite.
double rel_l2(const std::vector<__half>& out, const std::vector<float>& ref) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const double o = __half2float(out[i]);
    if (!std::isfinite(o)) return INFINITY;
    err += (o - ref[i]) * (o - ref[i]);
    norm += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(err / norm);
}

// Relative L2 error of one call of `f` at (1, heads, s, s, d) against the CPU, over two calls in a
// row (a split-KV workspace must be left clean for the next call). `f` is an entry point, or
// evo_attention_forward_ex with its launch mode bound.
template <class Entry>
double relative_error(Entry f, int heads, int s, int d, bool causal) {
  const size_t n = static_cast<size_t>(heads) * s * d;
  std::mt19937 rng(1234 + s + d + causal);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<__half> q(n), k(n), v(n);
  for (auto* t : {&q, &k, &v})
    for (auto& x : *t) x = __float2half(normal(rng));
  __half *dq, *dk, *dv, *dout;
  for (__half** p : {&dq, &dk, &dv, &dout}) EXPECT_EQ(cudaMalloc(p, n * sizeof(__half)), cudaSuccess);
  cudaMemcpy(dq, q.data(), n * sizeof(__half), cudaMemcpyHostToDevice);
  cudaMemcpy(dk, k.data(), n * sizeof(__half), cudaMemcpyHostToDevice);
  cudaMemcpy(dv, v.data(), n * sizeof(__half), cudaMemcpyHostToDevice);
  const float scale = 1.f / std::sqrt(static_cast<float>(d));
  std::vector<__half> out(n);
  for (int call = 0; call < 2; ++call) {
    cudaMemset(dout, 0xff, n * sizeof(__half));  // NaN poison: every element must be written
    EXPECT_EQ(f(dq, dk, dv, dout, 1, heads, s, s, d, scale, causal ? 1 : 0, nullptr), 0);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  cudaMemcpy(out.data(), dout, n * sizeof(__half), cudaMemcpyDeviceToHost);
  for (__half* p : {dq, dk, dv, dout}) cudaFree(p);
  return rel_l2(out, cpu_attention(q, k, v, heads, s, d, causal, scale));
}

constexpr double kFp16Tolerance = 2e-3;  // relative L2, as the correctness gate

// Two calls in a row on one stream, the second taking the first's output as its Q. Launched
// programmatically, the second may start while the first still runs; a read issued before its
// griddepcontrol.wait would see the NaN poison that the first has not yet overwritten. Relative L2
// of the second output against the CPU's attention of the first output, worst over `chains`.
double chained_error(EntryPoint f, int heads, int s, int d, int chains) {
  const size_t n = static_cast<size_t>(heads) * s * d;
  std::mt19937 rng(99 + s + d);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<__half> q(n), k(n), v(n);
  for (auto* t : {&q, &k, &v})
    for (auto& x : *t) x = __float2half(normal(rng));
  __half *dq, *dk, *dv, *first, *second;
  for (__half** p : {&dq, &dk, &dv, &first, &second}) EXPECT_EQ(cudaMalloc(p, n * sizeof(__half)), cudaSuccess);
  cudaMemcpy(dq, q.data(), n * sizeof(__half), cudaMemcpyHostToDevice);
  cudaMemcpy(dk, k.data(), n * sizeof(__half), cudaMemcpyHostToDevice);
  cudaMemcpy(dv, v.data(), n * sizeof(__half), cudaMemcpyHostToDevice);
  const float scale = 1.f / std::sqrt(static_cast<float>(d));
  cudaStream_t stream = nullptr;  // a stream of its own: the legacy default stream synchronises more
  EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  double worst = 0;
  std::vector<__half> x(n), y(n);
  for (int chain = 0; chain < chains; ++chain) {
    cudaMemset(first, 0xff, n * sizeof(__half));
    cudaMemset(second, 0xff, n * sizeof(__half));
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(f(dq, dk, dv, first, 1, heads, s, s, d, scale, 0, stream), 0);
    EXPECT_EQ(f(first, dk, dv, second, 1, heads, s, s, d, scale, 0, stream), 0);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    cudaMemcpy(x.data(), first, n * sizeof(__half), cudaMemcpyDeviceToHost);
    cudaMemcpy(y.data(), second, n * sizeof(__half), cudaMemcpyDeviceToHost);
    worst = std::max(worst, rel_l2(y, cpu_attention(x, k, v, heads, s, d, false, scale)));
  }
  cudaStreamDestroy(stream);
  for (__half* p : {dq, dk, dv, first, second}) cudaFree(p);
  return worst;
}

class ExportedKernelOnGpu : public ExportedKernel {
 protected:
  static bool has_gpu() {
    int count = 0;
    return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  }
  // Without a GPU every test skips: the exports are not built for nothing.
  static void SetUpTestSuite() {
    if (has_gpu()) ExportedKernel::SetUpTestSuite();
  }
  void SetUp() override {
    if (!has_gpu()) GTEST_SKIP() << "no GPU: the exported kernel's numbers need one";
    ExportedKernel::SetUp();
  }
};

TEST_F(ExportedKernelOnGpu, StandaloneMatchesTheFloatReference) {
  const EntryPoint f = entry_of(standalone_);
  ASSERT_NE(f, nullptr);
  EXPECT_LE(relative_error(f, 2, 256, 64, false), kFp16Tolerance);
  EXPECT_LE(relative_error(f, 2, 1000, 64, true), kFp16Tolerance) << "ragged, causal";
  EXPECT_LE(relative_error(f, 2, 200, 128, false), kFp16Tolerance) << "head_dim 128";
}

// Tensor maps encoded per call, in the genome's whole-tile boxes (128 rows of K and V, 64 of Q and
// O): ragged and causal lengths land as zeros past the end, and the head_dim 128 instantiation
// reads two 64-column panels per row.
TEST_F(ExportedKernelOnGpu, TmaGenomeMatchesTheFloatReference) {
  const EntryPoint f = entry_of(tma_);
  ASSERT_NE(f, nullptr);
  int major = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  if (major != 9) GTEST_SKIP() << "the TMA genome is built for sm_90a";
  EXPECT_LE(relative_error(f, 2, 256, 64, false), kFp16Tolerance);
  EXPECT_LE(relative_error(f, 2, 1000, 64, true), kFp16Tolerance) << "ragged, causal";
  EXPECT_LE(relative_error(f, 2, 200, 128, false), kFp16Tolerance) << "head_dim 128";
}

// evo_attention_forward launches programmatically; each kernel must still wait for the previous
// one before it reads its inputs. The first call lets the second's blocks in as soon as all of its
// own have started, so a read before the wait would meet the poison.
TEST_F(ExportedKernelOnGpu, ProgrammaticLaunchReadsThePreviousCallsFinishedOutput) {
  const EntryPoint standalone = entry_of(standalone_);
  ASSERT_NE(standalone, nullptr);
  EXPECT_LE(chained_error(standalone, 8, 1024, 64, 2), kFp16Tolerance) << "mma.sync, cp.async";
  int major = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  if (major != 9) return;  // the TMA genome is built for sm_90a
  const EntryPoint tma = entry_of(tma_);
  ASSERT_NE(tma, nullptr);
  EXPECT_LE(chained_error(tma, 8, 1024, 64, 2), kFp16Tolerance) << "wgmma, TMA";
}

// The plain launch (evo_attention_forward_ex(..., 0)) computes the same.
TEST_F(ExportedKernelOnGpu, PlainLaunchMatchesTheFloatReference) {
  const EntryPointEx ex = entry_ex_of(standalone_);
  ASSERT_NE(ex, nullptr);
  const auto plain = [ex](const void* q, const void* k, const void* v, void* o, int b, int h, int sq, int sk,
                          int d, float scale, int causal, void* stream) {
    return ex(q, k, v, o, b, h, sq, sk, d, scale, causal, stream, 0);
  };
  EXPECT_LE(relative_error(plain, 2, 256, 64, true), kFp16Tolerance);
}

TEST_F(ExportedKernelOnGpu, DispatchTableMatchesTheFloatReferenceInBothBuckets) {
  const EntryPoint f = entry_of(dispatch_);
  ASSERT_NE(f, nullptr);
  const attention::Shape split = split_bucket();
  EXPECT_LE(relative_error(f, split.heads, split.seq_q, split.head_dim, false), kFp16Tolerance) << "split-KV bucket";
  EXPECT_LE(relative_error(f, 8, 512, 64, false), kFp16Tolerance) << "seed bucket";
  EXPECT_LE(relative_error(f, 2, 500, 64, true), kFp16Tolerance) << "causal: no causal bucket, so the first variant";
}

}  // namespace
}  // namespace evo

// The exported kernel on a real GPU: built by the ExportedKernel fixture's nvcc step, called through
// evo_attention_forward, compared with a float32 attention on the CPU. Skips without a GPU.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <tuple>
#include <vector>

#include "attention/element_bits.h"
#include "attention/fp8.h"
#include "attention/problem.h"
#include "attention/tolerances.h"
#include "exported_kernel_fixture.h"

namespace evo {
namespace {

// o = softmax(q k^T * scale) v per head, in float, from float inputs [heads][s][d].
std::vector<float> cpu_attention_f32(const std::vector<float>& q, const std::vector<float>& k,
                                     const std::vector<float>& v, int heads, int s, int d, bool causal, float scale) {
  std::vector<float> o(q.size()), row(static_cast<size_t>(s));
  for (int b = 0; b < heads; ++b)
    for (int i = 0; i < s; ++i) {
      const size_t qi = (size_t(b) * s + i) * d;
      float m = -INFINITY;
      const int last = causal ? i : s - 1;
      for (int j = 0; j <= last; ++j) {
        const size_t kj = (size_t(b) * s + j) * d;
        float dot = 0;
        for (int x = 0; x < d; ++x) dot += q[qi + x] * k[kj + x];
        row[size_t(j)] = dot * scale;
        m = std::max(m, row[size_t(j)]);
      }
      float sum = 0;
      for (int j = 0; j <= last; ++j) sum += row[size_t(j)] = std::exp(row[size_t(j)] - m);
      for (int j = 0; j <= last; ++j) {
        const size_t vj = (size_t(b) * s + j) * d;
        for (int x = 0; x < d; ++x) o[qi + x] += row[size_t(j)] / sum * v[vj + x];
      }
    }
  return o;
}

// The same from fp16 inputs, each converted once (a conversion per product made the larger
// calls' reference take tens of seconds).
std::vector<float> cpu_attention(const std::vector<__half>& q, const std::vector<__half>& k,
                                 const std::vector<__half>& v, int bh, int s, int d, bool causal, float scale) {
  const auto to_float = [](const std::vector<__half>& x) {
    std::vector<float> out(x.size());
    for (size_t i = 0; i < x.size(); ++i) out[i] = __half2float(x[i]);
    return out;
  };
  return cpu_attention_f32(to_float(q), to_float(k), to_float(v), bh, s, d, causal, scale);
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

// Random fp16 Q, K and V of n elements each (normal, from `seed`), on the host and copied to the
// device, beside a device output of n elements.
struct Inputs {
  std::vector<__half> q, k, v;
  __half *dq = nullptr, *dk = nullptr, *dv = nullptr, *dout = nullptr;
  Inputs(size_t n, unsigned seed) : q(n), k(n), v(n) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.f, 1.f);
    for (auto* t : {&q, &k, &v})
      for (auto& x : *t) x = __float2half(normal(rng));
    for (__half** p : {&dq, &dk, &dv, &dout}) EXPECT_EQ(cudaMalloc(p, n * sizeof(__half)), cudaSuccess);
    cudaMemcpy(dq, q.data(), n * sizeof(__half), cudaMemcpyHostToDevice);
    cudaMemcpy(dk, k.data(), n * sizeof(__half), cudaMemcpyHostToDevice);
    cudaMemcpy(dv, v.data(), n * sizeof(__half), cudaMemcpyHostToDevice);
  }
  Inputs(const Inputs&) = delete;
  Inputs& operator=(const Inputs&) = delete;
  ~Inputs() {
    for (__half* p : {dq, dk, dv, dout}) cudaFree(p);
  }
};

// Relative L2 error of one call of `f` at (1, heads, s, s, d) against the CPU, over two calls in a
// row (a split-KV workspace must be left clean for the next call). `f` is an entry point, or
// evo_attention_forward_ex with its launch mode bound.
template <class Entry>
double relative_error(Entry f, int heads, int s, int d, bool causal) {
  const size_t n = static_cast<size_t>(heads) * s * d;
  const Inputs in(n, 1234 + s + d + causal);
  const float scale = 1.f / std::sqrt(static_cast<float>(d));
  std::vector<__half> out(n);
  for (int call = 0; call < 2; ++call) {
    cudaMemset(in.dout, 0xff, n * sizeof(__half));  // NaN poison: every element must be written
    EXPECT_EQ(f(in.dq, in.dk, in.dv, in.dout, 1, heads, s, s, d, scale, causal ? 1 : 0, nullptr), 0);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  cudaMemcpy(out.data(), in.dout, n * sizeof(__half), cudaMemcpyDeviceToHost);
  return rel_l2(out, cpu_attention(in.q, in.k, in.v, heads, s, d, causal, scale));
}

constexpr double kFp16Tolerance = 2e-3;  // relative L2, as the correctness gate

// Two calls in a row on one stream, the second taking the first's output as its Q. Launched
// programmatically, the second may start while the first still runs; a read issued before its
// griddepcontrol.wait would see the NaN poison that the first has not yet overwritten. Relative L2
// of the second output against the CPU's attention of the first output, worst over `chains`.
double chained_error(EntryPoint f, int heads, int s, int d, int chains) {
  const size_t n = static_cast<size_t>(heads) * s * d;
  const Inputs in(n, 99 + s + d);
  __half* const first = in.dout;
  __half* second = nullptr;
  EXPECT_EQ(cudaMalloc(&second, n * sizeof(__half)), cudaSuccess);
  const float scale = 1.f / std::sqrt(static_cast<float>(d));
  cudaStream_t stream = nullptr;  // a stream of its own: the legacy default stream synchronises more
  EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  double worst = 0;
  std::vector<__half> x(n), y(n);
  for (int chain = 0; chain < chains; ++chain) {
    cudaMemset(first, 0xff, n * sizeof(__half));
    cudaMemset(second, 0xff, n * sizeof(__half));
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(f(in.dq, in.dk, in.dv, first, 1, heads, s, s, d, scale, 0, stream), 0);
    EXPECT_EQ(f(first, in.dk, in.dv, second, 1, heads, s, s, d, scale, 0, stream), 0);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    cudaMemcpy(x.data(), first, n * sizeof(__half), cudaMemcpyDeviceToHost);
    cudaMemcpy(y.data(), second, n * sizeof(__half), cudaMemcpyDeviceToHost);
    worst = std::max(worst, rel_l2(y, cpu_attention(x, in.k, in.v, heads, s, d, false, scale)));
  }
  cudaStreamDestroy(stream);
  cudaFree(second);
  return worst;
}

// A call captured into a CUDA graph on a stream of its own, the graph replayed twice, then the same
// call outside the graph on that stream (as a server that captures decode steps does): relative
// L2 of the worst of those outputs against the CPU. A captured call's workspace is the graph's own;
// had the capture left its buffer in the stream's place, the last call would use memory that is
// valid only while the graph runs.
double captured_error(EntryPoint f, int heads, int s, int d) {
  const size_t n = static_cast<size_t>(heads) * s * d;
  const Inputs in(n, 7 + s + d);
  const float scale = 1.f / std::sqrt(static_cast<float>(d));
  const std::vector<float> ref = cpu_attention(in.q, in.k, in.v, heads, s, d, false, scale);
  cudaStream_t stream = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(f(in.dq, in.dk, in.dv, in.dout, 1, heads, s, s, d, scale, 0, stream), 0);
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  EXPECT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  double worst = 0;
  std::vector<__half> out(n);
  for (int call = 0; call < 3; ++call) {
    cudaMemset(in.dout, 0xff, n * sizeof(__half));
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    if (call < 2)
      EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    else
      EXPECT_EQ(f(in.dq, in.dk, in.dv, in.dout, 1, heads, s, s, d, scale, 0, stream), 0);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    cudaMemcpy(out.data(), in.dout, n * sizeof(__half), cudaMemcpyDeviceToHost);
    worst = std::max(worst, rel_l2(out, ref));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  return worst;
}

// evo_attention_quantize_fp8: x, x_dtype, out, scales, batch, heads, seq, head_dim, transpose, stream.
using QuantizeFp8 = int (*)(const void*, int, void*, float*, int, int, int, int, int, void*);
// evo_attention_forward_fp8: q, k, v_t, o, q_scale, k_scale, v_scale, batch, heads, heads_kv, seq_q,
// seq_k, head_dim, scale, causal, stream, programmatic_launch.
using ForwardFp8 = int (*)(const void*, const void*, const void*, void*, const float*, const float*, const float*,
                           int, int, int, int, int, int, float, int, void*, int);

// One fp16 tensor [heads, s, d] quantized on the GPU by the exported quantizer, against the rule
// on the host (fp8.h, element_bits.h): bytes and scales must be identical. Returns the values the
// bytes stand for, [heads][s][d], and leaves the bytes on the device in *bytes and the scales in
// *scales.
std::vector<float> quantize_on_gpu(QuantizeFp8 quantize, const std::vector<__half>& x, int heads, int s, int d,
                                   bool transpose, void** bytes, float** scales) {
  const size_t n = x.size();
  const size_t pitch = static_cast<size_t>(e4m3_vt_pitch(s));
  const size_t out_bytes = transpose ? size_t(heads) * d * pitch : n;
  void* dx = nullptr;
  EXPECT_EQ(cudaMalloc(&dx, n * sizeof(__half)), cudaSuccess);
  EXPECT_EQ(cudaMalloc(bytes, out_bytes), cudaSuccess);
  EXPECT_EQ(cudaMalloc(scales, heads * sizeof(float)), cudaSuccess);
  cudaMemcpy(dx, x.data(), n * sizeof(__half), cudaMemcpyHostToDevice);
  cudaMemset(*bytes, 0x7F, out_bytes);  // NaN: the pad must be written too
  EXPECT_EQ(quantize(dx, 0, *bytes, *scales, 1, heads, s, d, transpose ? 1 : 0, nullptr), 0);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaFree(dx);
  std::vector<uint8_t> got(out_bytes);
  std::vector<float> got_scales(static_cast<size_t>(heads));
  cudaMemcpy(got.data(), *bytes, out_bytes, cudaMemcpyDeviceToHost);
  cudaMemcpy(got_scales.data(), *scales, heads * sizeof(float), cudaMemcpyDeviceToHost);
  std::vector<float> values(n);
  int wrong = 0;
  for (int h = 0; h < heads; ++h) {
    float absmax = 0;
    for (size_t i = 0; i < size_t(s) * d; ++i) {
      const float a = std::fabs(__half2float(x[h * size_t(s) * d + i]));
      if (!(a <= absmax) && !std::isnan(absmax)) absmax = a;  // a NaN sticks
    }
    const float scale = e4m3_scale(absmax);
    if (std::isnan(scale)) {
      EXPECT_TRUE(std::isnan(got_scales[size_t(h)])) << "head " << h;
    } else {
      EXPECT_EQ(got_scales[size_t(h)], scale) << "head " << h;
    }
    for (int r = 0; r < s; ++r)
      for (int c = 0; c < d; ++c) {
        const size_t i = (size_t(h) * s + r) * d + c;
        const uint8_t want = attention::float_to_e4m3_bits(__half2float(x[i]) / scale);
        const size_t column = static_cast<size_t>(e4m3_vt_column(r));  // the key order of V^T (fp8.h)
        const uint8_t b = got[transpose ? (size_t(h) * d + c) * pitch + column : i];
        // (NaN is 0x7F or 0xFF, either sign)
        wrong += std::isnan(scale) ? (b & 0x7F) != 0x7F : b != want;
        values[i] = attention::e4m3_bits_to_float(want) * scale;
      }
    if (transpose)
      for (int c = 0; c < d; ++c)
        for (size_t key = size_t(s); key < pitch; ++key)  // the pad: keys past s, wherever their column lies
          wrong += got[(size_t(h) * d + c) * pitch + size_t(e4m3_vt_column(static_cast<long long>(key)))] != 0;
  }
  EXPECT_EQ(wrong, 0) << "bytes that differ from the host rule";
  return values;
}


class ExportedKernelOnGpu : public ExportedKernel {
 protected:
  static bool has_gpu() {
    int count = 0;
    return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  }
  // Without a GPU every test skips: the exports are not built for nothing. An FP8 genome is
  // built here only: its instantiations need sm_90a's wgmma.
  static void SetUpTestSuite() {
    if (!has_gpu()) return;
    ExportedKernel::SetUpTestSuite();
    if (nvcc_.empty()) return;
    Genome fp8 = testing::default_genome();
    for (const auto& [gene, value] : std::vector<std::pair<std::string, int64_t>>{
             {"BLOCK_M", 128}, {"BLOCK_N", 128}, {"WARPS", 8}, {"STAGES", 2}, {"WGMMA", 1},
             {"SCHEDULE", 4 /* tma_pv */}, {"TMA_BOX_ROWS", 64}})
      fp8.set(gene, value);
    fp8_ = build("fp8", export_standalone(fp8, {testing::shape_1x8x512x64(false, DType::kE4M3)},
                                          testing::measured_evaluation(false)));
  }
  static void TearDownTestSuite() {
    if (fp8_.handle) dlclose(fp8_.handle);
    ExportedKernel::TearDownTestSuite();
  }
  static inline Built fp8_;

  static bool on_sm90() {
    int major = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    return major == 9;
  }
  // An entry point of the FP8 export (null, and a failure, where it did not build).
  template <class Entry>
  static Entry fp8_entry(const char* name) {
    EXPECT_EQ(fp8_.status, 0) << fp8_.log;
    return fp8_.handle ? reinterpret_cast<Entry>(dlsym(fp8_.handle, name)) : nullptr;
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

// The split bucket (16 blocks merging in the workspace) captured into a CUDA graph, replayed, and
// called again outside it on the capturing stream.
// Calls of the split bucket's variant with 2, then 8, then 2 heads share the stream's workspace:
// each call's partials cover more or fewer bytes than the last one's, and its counters must still
// read zero (they have the workspace's start to themselves).
TEST_F(ExportedKernelOnGpu, SplitCallsOfOtherShapesShareTheWorkspace) {
  const EntryPoint f = entry_of(dispatch_);
  ASSERT_NE(f, nullptr);
  const attention::Shape split = split_bucket();
  for (int heads : {2, 8, 2, 8})
    EXPECT_LE(relative_error(f, heads, split.seq_q, split.head_dim, false), kFp16Tolerance) << heads << " heads";
}

TEST_F(ExportedKernelOnGpu, ASplitCapturedIntoAGraphMatchesTheFloatReference) {
  const EntryPoint f = entry_of(dispatch_);
  ASSERT_NE(f, nullptr);
  const attention::Shape split = split_bucket();
  EXPECT_LE(captured_error(f, split.heads, split.seq_q, split.head_dim), kFp16Tolerance);
}

// A workspace the caller binds to the capturing stream: the captured split call adds the kernel
// alone to the graph (no allocation, memset or free of the library's), the graph replays match the
// reference and leave the workspace's counters zero for the next, and a call that needs more than
// the bound bytes is refused. Unbinding hands the stream back to the library's own buffer.
TEST_F(ExportedKernelOnGpu, ABoundWorkspaceLeavesACapturedSplitCallOneKernelNode) {
  const EntryPoint f = entry_of(dispatch_);
  const auto bytes_of = reinterpret_cast<long long (*)(int, int, int, int, int, int, int, int, int)>(
      dlsym(dispatch_.handle, "evo_attention_workspace_bytes"));
  const auto bind = reinterpret_cast<int (*)(void*, void*, long long)>(
      dlsym(dispatch_.handle, "evo_attention_bind_workspace"));
  ASSERT_NE(f, nullptr);
  ASSERT_NE(bytes_of, nullptr);
  ASSERT_NE(bind, nullptr);
  const attention::Shape split = split_bucket();
  const int heads = split.heads, s = split.seq_q, d = split.head_dim;
  const long long bytes = bytes_of(1, heads, heads, s, s, d, 0, 0, 0);
  ASSERT_GT(bytes, 0);
  void* workspace = nullptr;
  ASSERT_EQ(cudaMalloc(&workspace, static_cast<size_t>(bytes)), cudaSuccess);
  ASSERT_EQ(cudaMemset(workspace, 0, static_cast<size_t>(bytes)), cudaSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(bind(stream, workspace, bytes), 0);

  const size_t n = static_cast<size_t>(heads) * s * d;
  const Inputs in(n, 11 + s + d);
  const float scale = 1.f / std::sqrt(static_cast<float>(d));
  const std::vector<float> ref = cpu_attention(in.q, in.k, in.v, heads, s, d, false, scale);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(f(in.dq, in.dk, in.dv, in.dout, 1, heads, s, s, d, scale, 0, stream), 0);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  size_t nodes = 0;
  EXPECT_EQ(cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
  EXPECT_EQ(nodes, 1u) << "the captured call holds nodes besides its kernel";
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  std::vector<__half> out(n);
  for (int replay = 0; replay < 3; ++replay) {
    cudaMemset(in.dout, 0xff, n * sizeof(__half));
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    cudaMemcpy(out.data(), in.dout, n * sizeof(__half), cudaMemcpyDeviceToHost);
    EXPECT_LE(rel_l2(out, ref), kFp16Tolerance) << "replay " << replay;
  }
  // Bound bytes short of the call's: refused. Unbound: the library's own buffer serves it.
  EXPECT_EQ(bind(stream, workspace, bytes - 1), 0);
  EXPECT_EQ(f(in.dq, in.dk, in.dv, in.dout, 1, heads, s, s, d, scale, 0, stream), kCudaErrorInvalidValue);
  EXPECT_EQ(bind(stream, nullptr, 0), 0);
  cudaMemset(in.dout, 0xff, n * sizeof(__half));
  EXPECT_EQ(f(in.dq, in.dk, in.dv, in.dout, 1, heads, s, s, d, scale, 0, stream), 0);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaMemcpy(out.data(), in.dout, n * sizeof(__half), cudaMemcpyDeviceToHost);
  EXPECT_LE(rel_l2(out, ref), kFp16Tolerance) << "unbound";
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  cudaFree(workspace);
}

// FP8 in two calls, as a caller with fp16 tensors makes them: the exported quantizer (bytes and
// scales identical to the rule on the host; V transposed with its pad zeroed), then the e4m3 kernel,
// within the family's e4m3 tolerance of the float32 attention of the values the bytes stand for,
// at a ragged causal length and head dims 64 and 128. Its distance from the fp16 inputs'
// attention is printed, not judged. Bad calls are refused.
TEST_F(ExportedKernelOnGpu, Fp8QuantizerAndKernelMatchTheReferenceOfTheQuantizedInputs) {
  if (!on_sm90()) GTEST_SKIP() << "the e4m3 genome is built for sm_90a";
  const auto quantize = fp8_entry<QuantizeFp8>("evo_attention_quantize_fp8");
  const auto forward = fp8_entry<ForwardFp8>("evo_attention_forward_fp8");
  ASSERT_NE(quantize, nullptr);
  ASSERT_NE(forward, nullptr);
  for (const auto& [s, d, causal] : std::vector<std::tuple<int, int, bool>>{{1000, 64, true}, {777, 128, false}}) {
    const int heads = 4;
    const size_t n = size_t(heads) * s * d;
    std::mt19937 rng(77 + s + d);
    std::normal_distribution<float> normal(0.f, 1.f);
    std::vector<__half> q(n), k(n), v(n);
    for (auto* t : {&q, &k, &v})
      for (size_t i = 0; i < n; ++i) (*t)[i] = __float2half(normal(rng) * (1 + i / (size_t(s) * d)));  // per-head amplitude
    void *dq, *dk, *dv, *dout;
    float *sq, *sk, *sv;
    const std::vector<float> qf = quantize_on_gpu(quantize, q, heads, s, d, false, &dq, &sq);
    const std::vector<float> kf = quantize_on_gpu(quantize, k, heads, s, d, false, &dk, &sk);
    const std::vector<float> vf = quantize_on_gpu(quantize, v, heads, s, d, true, &dv, &sv);
    ASSERT_EQ(cudaMalloc(&dout, n * 2), cudaSuccess);
    cudaMemset(dout, 0xff, n * 2);  // NaN poison
    const float scale = 1.f / std::sqrt(static_cast<float>(d));
    EXPECT_EQ(forward(dq, dk, dv, dout, sq, sk, sv, 1, heads, heads, s, s, d, scale, causal ? 1 : 0, nullptr, 1), 0);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint16_t> out(n);
    cudaMemcpy(out.data(), dout, n * 2, cudaMemcpyDeviceToHost);
    const std::vector<float> ref = cpu_attention_f32(qf, kf, vf, heads, s, d, causal, scale);
    double err = 0, norm = 0, err16 = 0, norm16 = 0;
    const std::vector<float> ref16 = cpu_attention(q, k, v, heads, s, d, causal, scale);
    for (size_t i = 0; i < n; ++i) {
      const double o = attention::bf16_bits_to_float(out[i]);
      err += (o - ref[i]) * (o - ref[i]);
      norm += double(ref[i]) * ref[i];
      err16 += (o - ref16[i]) * (o - ref16[i]);
      norm16 += double(ref16[i]) * ref16[i];
    }
    const double rel = std::sqrt(err / norm), rel16 = std::sqrt(err16 / norm16);
    std::printf("e4m3 %dx%d%s: rel L2 %.3e against the quantized inputs, %.3e against the fp16 ones\n", s, d,
                causal ? " causal" : "", rel, rel16);
    EXPECT_LE(rel, attention::kE4m3Tolerance.max_rel_l2_error) << s << "x" << d;
    // Refused: no scales, a causal call with more queries than keys, an unknown quantizer dtype.
    EXPECT_EQ(forward(dq, dk, dv, dout, nullptr, sk, sv, 1, heads, heads, s, s, d, scale, 0, nullptr, 1),
              kCudaErrorInvalidValue);
    EXPECT_EQ(forward(dq, dk, dv, dout, sq, sk, sv, 1, heads, heads, s, s - 1, d, scale, 1, nullptr, 1),
              kCudaErrorInvalidValue);
    EXPECT_EQ(quantize(dq, 5, dk, sk, 1, heads, s, d, 0, nullptr), kCudaErrorInvalidValue);
    for (void* p : {dq, dk, dv, dout, static_cast<void*>(sq), static_cast<void*>(sk), static_cast<void*>(sv)}) cudaFree(p);
  }
}

// The quantizer's edge cases on the GPU, each against the host rule: an all-zero head (scale 1,
// zeros), a head of fp16 subnormals, one huge outlier among ones (the ones flatten to e4m3's
// smallest steps or zero), a head holding NaN and one holding an infinity (NaN scale, NaN bytes).
TEST_F(ExportedKernelOnGpu, Fp8QuantizerEdgeCasesFollowTheDocumentedRule) {
  if (!on_sm90()) GTEST_SKIP() << "the e4m3 export is built for sm_90a";
  const auto quantize = fp8_entry<QuantizeFp8>("evo_attention_quantize_fp8");
  ASSERT_NE(quantize, nullptr);
  const int heads = 5, s = 33, d = 64;
  const size_t per_head = size_t(s) * d;
  std::vector<__half> x(heads * per_head, __float2half(1.f));
  for (size_t i = 0; i < per_head; ++i) {
    x[0 * per_head + i] = __float2half(0.f);
    x[1 * per_head + i] = __float2half(i % 2 ? 3e-7f : -1e-7f);  // fp16 subnormals
  }
  x[2 * per_head + 7] = __float2half(60000.f);
  x[3 * per_head + 100] = __float2half(NAN);
  x[4 * per_head + 5] = __float2half(INFINITY);
  for (bool transpose : {false, true}) {
    void* bytes = nullptr;
    float* scales = nullptr;
    const std::vector<float> values = quantize_on_gpu(quantize, x, heads, s, d, transpose, &bytes, &scales);
    std::vector<float> got(heads);
    cudaMemcpy(got.data(), scales, heads * sizeof(float), cudaMemcpyDeviceToHost);
    EXPECT_EQ(got[0], 1.f) << "an all-zero head";
    EXPECT_EQ(values[0], 0.f);
    EXPECT_GT(got[1], 0.f) << "subnormal inputs, a normal scale";
    EXPECT_EQ(got[2], 60000.f / 448.f);
    EXPECT_TRUE(std::isnan(got[3]));
    EXPECT_TRUE(std::isnan(got[4]));
    cudaFree(bytes);
    cudaFree(scales);
  }
}

}  // namespace
}  // namespace evo

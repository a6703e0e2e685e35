#include "runtime.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "../cuda_error.h"
#include "../random_inputs.h"
#include "element_bits.h"
#include "params.h"
#include "problem.h"
#include "tensor_maps.h"
#include "tolerances.h"

namespace evo::attention {
namespace {

size_t q_elems(const Shape& s) { return size_t(s.total_q()) * s.heads * s.head_dim; }
size_t kv_elems(const Shape& s) { return size_t(s.total_k()) * s.heads_kv * s.head_dim; }
constexpr size_t kElementBytes = 2;  // fp16 and bf16 alike

// The reference kernel gives each query row one warp, four rows to a block.
constexpr int kReferenceThreads = 128;

constexpr const char* kGrowingScores = "on scores that grow along the keys";

// U(-1, 1) in the problem's element type: never all zeros, never all-equal, so a kernel that
// ignores an input shows.
std::vector<uint16_t> random_elements(size_t n, uint64_t seed, DType dtype) {
  std::vector<uint16_t> out(n);
  parallel_for(n, [&](size_t i) { out[i] = float_to_bits(dtype, uniform_pm1(seed, i)); });
  return out;
}

// K's rows scaled from x1 at the first key to x16 at the last, so that each row's running max
// keeps rising from tile to tile and the online softmax must shrink what it has accumulated. On
// uniform inputs every later tile's max stays within 2^8 of the first's, and a kernel whose
// rescale is wrong (or, with LAZY_RESCALE, never runs) would pass.
// (A packed batch's keys grow along each sequence's own.)
std::vector<uint16_t> growing_keys(const Shape& s, uint64_t seed) {
  std::vector<uint16_t> out(kv_elems(s));
  // Each key row's growth: [batch][heads_kv][seq_k] rows, or [tokens][heads_kv] for a packed batch.
  std::vector<float> growth;
  growth.reserve(out.size() / s.head_dim);
  auto grow = [&](int key, int keys) {
    growth.push_back(static_cast<float>(1.0 + 15.0 * key / std::max(1, keys - 1)));
  };
  if (s.varlen()) {
    for (int keys : s.lens_k)
      for (int key = 0; key < keys; ++key)
        for (int h = 0; h < s.heads_kv; ++h) grow(key, keys);
  } else {
    for (int bh = 0; bh < s.batch * s.heads_kv; ++bh)
      for (int key = 0; key < s.seq_k; ++key) grow(key, s.seq_k);
  }
  parallel_for(out.size(), [&](size_t i) {
    out[i] = float_to_bits(s.dtype, uniform_pm1(seed, i) * growth[i / s.head_dim]);
  });
  return out;
}

// A packed batch's cumulative offsets: 0, then each sequence's end.
std::vector<int> offsets(const std::vector<int>& lengths) {
  std::vector<int> out = {0};
  for (int l : lengths) out.push_back(out.back() + l);
  return out;
}

// One check's Q, K or V: a seed of its own, so that the three never share their values.
uint64_t tensor_seed(uint64_t check, char tensor) {
  return mix64(check ^ (0xD1B54A32D192ED03ull * static_cast<uint64_t>(tensor)));
}

// draw_tensor's and output_as_floats' work, on the attention view.
std::vector<uint16_t> draw_bits(const Shape& s, uint64_t seed, char tensor, int draw) {
  if (tensor != 'q' && tensor != 'k' && tensor != 'v')
    throw std::invalid_argument(std::string("attention inputs are q, k and v, not '") + tensor + "'");
  if (draw < 0 || draw > 1) throw std::invalid_argument("attention has no input draw " + std::to_string(draw));
  const uint64_t tseed = tensor_seed(seed, tensor);
  if (tensor == 'q') return random_elements(q_elems(s), tseed, s.dtype);
  if (tensor == 'k' && draw == 1) return growing_keys(s, tseed);
  return random_elements(kv_elems(s), tseed, s.dtype);
}

std::vector<float> widen(DType dtype, const std::vector<uint16_t>& bits) {
  constexpr uint16_t kPoison = static_cast<uint16_t>(kPoisonByte << 8 | kPoisonByte);
  std::vector<float> out(bits.size());
  parallel_for(bits.size(), [&](size_t i) {
    out[i] = bits[i] == kPoison ? unwritten_output() : bits_to_float(dtype, bits[i]);
  });
  return out;
}

struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
using DevicePtr = std::unique_ptr<void, DeviceFree>;

DevicePtr device_alloc(size_t bytes) {
  void* p = nullptr;
  EVO_CUDA_CHECK(cudaMalloc(&p, bytes));
  return DevicePtr(p);
}

// One problem's sets, each tensor's sets in one allocation (set i at element offset i * size).
class AttentionProblem : public ProblemRuntime {
 public:
  AttentionProblem(const Shape& s, int sets, bool with_reference, const LaunchValues& launch)
      : s_(s), sets_(sets), nq_(q_elems(s)), nkv_(kv_elems(s)) {
    q_ = device_alloc(nq_ * kElementBytes * sets_);
    k_ = device_alloc(nkv_ * kElementBytes * sets_);
    v_ = device_alloc(nkv_ * kElementBytes * sets_);
    o_ = device_alloc(nq_ * kElementBytes * sets_);
    if (with_reference) reference_ = device_alloc(nq_ * sizeof(float));
    if (s.varlen()) {
      cu_q_ = upload_offsets(s.lens_q);
      cu_k_ = upload_offsets(s.lens_k);
    }
    for (int i = 0; i < sets_; ++i) params_.push_back(params_for(i, launch));
  }

  void draw_inputs(uint64_t seed, int draw) override {
    upload(q_.get(), nq_, draw_bits(s_, seed, 'q', draw));
    upload(k_.get(), nkv_, draw_bits(s_, seed, 'k', draw));
    upload(v_.get(), nkv_, draw_bits(s_, seed, 'v', draw));
  }

  void poison_output() override { EVO_CUDA_CHECK(cudaMemset(o_.get(), kPoisonByte, nq_ * kElementBytes)); }

  KernelParams params(int set) const override { return {&params_.at(static_cast<size_t>(set)), sizeof(FaParams)}; }

  void launch_reference(cudaKernel_t reference, cudaStream_t stream) const override {
    if (!reference_) throw std::logic_error("prepared without the reference's output");
    const FaParams& p = params_.front();
    const void *q = p.q, *k = p.k, *v = p.v;
    const int *cu_q = p.cu_seqlens_q, *cu_k = p.cu_seqlens_k;
    float* o = static_cast<float*>(reference_.get());
    int batch = p.batch, heads = p.heads, heads_kv = p.heads_kv, seq_q = p.seq_q, seq_k = p.seq_k;
    int head_dim = s_.head_dim, causal = s_.causal ? 1 : 0;
    float scale = p.softmax_scale;
    void* args[] = {&q,     &k,        &v,     &o,     &cu_q,     &cu_k,  &batch,
                    &heads, &heads_kv, &seq_q, &seq_k, &head_dim, &scale, &causal};
    constexpr int kRowsPerBlock = kReferenceThreads / 32;
    const dim3 grid(static_cast<unsigned>((seq_q + kRowsPerBlock - 1) / kRowsPerBlock),
                    static_cast<unsigned>(batch * heads));
    // A cudaKernel_t from cudaLibraryGetKernel stands in for the function symbol here.
    EVO_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(reference), grid, dim3(kReferenceThreads),
                                    args, 0, stream));
  }

  std::vector<float> read_output() const override {
    std::vector<uint16_t> bits(nq_);
    EVO_CUDA_CHECK(cudaMemcpy(bits.data(), o_.get(), nq_ * kElementBytes, cudaMemcpyDeviceToHost));
    return widen(s_.dtype, bits);
  }

  std::vector<float> read_reference() const override {
    if (!reference_) throw std::logic_error("prepared without the reference's output");
    std::vector<float> out(nq_);
    EVO_CUDA_CHECK(cudaMemcpy(out.data(), reference_.get(), nq_ * sizeof(float), cudaMemcpyDeviceToHost));
    return out;
  }

 private:
  FaParams params_for(int set, const LaunchValues& launch) const {
    FaParams p{};
    p.q = static_cast<uint16_t*>(q_.get()) + nq_ * set;
    p.k = static_cast<uint16_t*>(k_.get()) + nkv_ * set;
    p.v = static_cast<uint16_t*>(v_.get()) + nkv_ * set;
    p.o = static_cast<uint16_t*>(o_.get()) + nq_ * set;
    p.batch = s_.batch;
    p.heads = s_.heads;
    p.heads_kv = s_.heads_kv;
    p.seq_q = s_.seq_q;
    p.seq_k = s_.seq_k;
    p.softmax_scale = 1.f / std::sqrt(static_cast<float>(s_.head_dim));
    p.workspace = launch.workspace;
    if (s_.varlen()) {
      p.cu_seqlens_q = static_cast<const int*>(cu_q_.get());
      p.cu_seqlens_k = static_cast<const int*>(cu_k_.get());
      p.total_q = static_cast<int>(s_.total_q());
      p.total_k = static_cast<int>(s_.total_k());
    }
    if (launch.tensor_map_box_rows > 0)
      EVO_CUDA_CHECK(encode_attention_tensor_maps(p, s_.dtype, s_.head_dim, launch.tensor_map_box_rows,
                                                  launch.tensor_map_q_box_rows));
    return p;
  }

  static DevicePtr upload_offsets(const std::vector<int>& lengths) {
    const std::vector<int> cu = offsets(lengths);
    DevicePtr out = device_alloc(cu.size() * sizeof(int));
    EVO_CUDA_CHECK(cudaMemcpy(out.get(), cu.data(), cu.size() * sizeof(int), cudaMemcpyHostToDevice));
    return out;
  }

  // The same values into every set.
  void upload(void* base, size_t elems, const std::vector<uint16_t>& values) const {
    for (int i = 0; i < sets_; ++i)
      EVO_CUDA_CHECK(cudaMemcpy(static_cast<uint16_t*>(base) + elems * i, values.data(), elems * kElementBytes,
                                cudaMemcpyHostToDevice));
  }

  Shape s_;
  int sets_;
  size_t nq_, nkv_;
  DevicePtr q_, k_, v_, o_, reference_;
  DevicePtr cu_q_, cu_k_;  // a packed batch's offsets, shared by every set
  std::vector<FaParams> params_;
};

class AttentionRuntime : public FamilyRuntime {
 public:
  std::string_view family() const override { return "attention"; }

  std::vector<std::string_view> reference_kernels() const override {
    return {"evo_reference_attention_fp16", "evo_reference_attention_bf16"};
  }

  std::string_view reference_kernel(const RuntimeProblem& p) const override {
    return shape_of(p).dtype == DType::kBF16 ? "evo_reference_attention_bf16" : "evo_reference_attention_fp16";
  }

  Tolerance tolerance(const RuntimeProblem& p) const override { return tolerance_for(shape_of(p).dtype); }

  std::vector<std::string> hard_inputs() const override { return {kGrowingScores}; }

  // Not the dtype: an fp16 and a bf16 check of one shape draw the same values, each rounded to its
  // type (and the seeds of the shapes stored before bf16 stay what they were). K/V heads only
  // where they differ, for the same reason.
  std::vector<int64_t> seed_words(const RuntimeProblem& p) const override {
    const Shape s = shape_of(p);
    std::vector<int64_t> words = {s.batch, s.heads, s.seq_q, s.seq_k, s.head_dim, int64_t(s.causal)};
    if (s.heads_kv != s.heads) words.push_back(s.heads_kv);
    if (s.varlen()) {
      words.push_back(-1);  // no dense shape's words hold a negative value
      words.insert(words.end(), s.lens_q.begin(), s.lens_q.end());
      words.insert(words.end(), s.lens_k.begin(), s.lens_k.end());
    }
    return words;
  }

  int64_t input_set_bytes(const RuntimeProblem& p) const override {
    const Shape s = shape_of(p);
    return static_cast<int64_t>((2 * q_elems(s) + 2 * kv_elems(s)) * kElementBytes);
  }

  double elements(const RuntimeProblem& p) const override {
    const Shape s = shape_of(p);
    return 2.0 * double(q_elems(s)) + 2.0 * double(kv_elems(s));
  }

  // A round length and a ragged one, for the (head_dim, causal, dtype) of p: the template
  // arguments its kernel is compiled for. Small in batch and heads, not in keys: every block steps
  // through several K/V tiles (1152 keys are nine 128-key tiles, four and a half of 256), so the
  // loop's later steps, the stages' refills and LAZY_RESCALE's rescale run under the tools too.
  // With 128 keys a 128-key block ran its first tile alone, and synccheck never saw the steps
  // where a warp-uniform branch can split a warpgroup. Two K/V heads with p's group of query
  // heads each, and, where p has fewer queries than keys (a KV cache), as few queries as p up to
  // the keys (the shifted diagonal).
  // A packed batch gets one small packed batch of such lengths, and a sequence of 17 (a block
  // whose rows run past its sequence's end into the next one's).
  std::vector<RuntimeProblem> sanitizer_problems(const RuntimeProblem& p) const override {
    const Shape s = shape_of(p);
    std::vector<RuntimeProblem> out;
    const int group = std::min(s.heads / s.heads_kv, 8);
    if (s.varlen()) {
      Shape small = s;
      small.heads_kv = std::min(2, s.heads_kv);
      small.heads = small.heads_kv * group;
      std::vector<int> queries, keys;
      const bool chunks = s.lens_q != s.lens_k;
      for (int seq : {1152, 17, 300}) {
        keys.push_back(seq);
        queries.push_back(chunks ? std::min(seq, std::max(1, s.seq_q / 4)) : seq);
      }
      small.pack(queries, keys);
      out.push_back(to_problem(small));
      return out;
    }
    for (int seq : {1152, 300}) {
      Shape small;
      small.batch = 1;
      small.heads_kv = std::min(2, s.heads_kv);
      small.heads = small.heads_kv * group;
      small.seq_k = seq;
      small.seq_q = s.seq_q < s.seq_k ? std::min(s.seq_q, seq) : seq;
      small.head_dim = s.head_dim;
      small.causal = s.causal;
      small.dtype = s.dtype;
      out.push_back(to_problem(small));
    }
    return out;
  }

  std::unique_ptr<ProblemRuntime> prepare(const RuntimeProblem& p, int sets, bool with_reference,
                                          const LaunchValues& launch) const override {
    return std::make_unique<AttentionProblem>(shape_of(p), std::max(1, sets), with_reference, launch);
  }
};

}  // namespace

const FamilyRuntime& runtime() {
  static const AttentionRuntime instance;
  return instance;
}

std::vector<uint16_t> draw_tensor(const RuntimeProblem& p, uint64_t seed, char tensor, int draw) {
  return draw_bits(shape_of(p), seed, tensor, draw);
}

std::vector<float> output_as_floats(const RuntimeProblem& p, const std::vector<uint16_t>& bits) {
  return widen(shape_of(p).dtype, bits);
}

}  // namespace evo::attention

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
size_t kv_elems(const Shape& s) { return size_t(s.total_k()) * s.kv_heads() * s.head_dim; }
bool is_e4m3(const Shape& s) { return s.dtype == DType::kE4M3; }
size_t in_bytes(const Shape& s) { return static_cast<size_t>(input_bytes(s.dtype)); }
constexpr size_t kOutBytes = 2;  // fp16 or bf16
// V's bytes: e4m3's V^T rows are padded to 16 bytes (fp8.h).
size_t v_bytes(const Shape& s) {
  if (!is_e4m3(s)) return kv_elems(s) * in_bytes(s);
  return size_t(s.batch) * s.kv_heads() * s.head_dim * size_t(e4m3_vt_pitch(s.seq_k));
}

// The reference kernel gives each query row one warp, four rows to a block.
constexpr int kReferenceThreads = 128;

constexpr const char* kGrowingScores = "on scores that grow along the keys";

// U(-1, 1): never all zeros, never all-equal, so a kernel that ignores an input shows.
std::vector<float> uniform_values(size_t n, uint64_t seed) {
  std::vector<float> out(n);
  parallel_for(n, [&](size_t i) { out[i] = uniform_pm1(seed, i); });
  return out;
}

// K's rows scaled from x1 at the first key to x16 at the last, so that each row's running max
// keeps rising from tile to tile and the online softmax must shrink what it has accumulated. On
// uniform inputs every later tile's max stays within 2^8 of the first's, and a kernel whose
// rescale is wrong (or, with LAZY_RESCALE, never runs) would pass.
// (A packed batch's keys grow along each sequence's own.)
std::vector<float> growing_keys(const Shape& s, uint64_t seed) {
  std::vector<float> out(kv_elems(s));
  // Each key row's growth: [batch][heads_kv][seq_k] rows, or [tokens][heads_kv] for a packed batch.
  std::vector<float> growth;
  growth.reserve(out.size() / s.head_dim);
  auto grow = [&](int key, int keys) {
    growth.push_back(static_cast<float>(1.0 + 15.0 * key / std::max(1, keys - 1)));
  };
  if (s.varlen()) {
    for (int keys : s.lens_k)
      for (int key = 0; key < keys; ++key)
        for (int h = 0; h < s.kv_heads(); ++h) grow(key, keys);
  } else {
    for (int bh = 0; bh < s.batch * s.kv_heads(); ++bh)
      for (int key = 0; key < s.seq_k; ++key) grow(key, s.seq_k);
  }
  parallel_for(out.size(), [&](size_t i) { out[i] = uniform_pm1(seed, i) * growth[i / s.head_dim]; });
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

// One check's values of Q, K or V before they are rounded to the dtype.
std::vector<float> draw_values(const Shape& s, uint64_t seed, char tensor, int draw) {
  if (tensor != 'q' && tensor != 'k' && tensor != 'v')
    throw std::invalid_argument(std::string("attention inputs are q, k and v, not '") + tensor + "'");
  if (draw < 0 || draw > 1) throw std::invalid_argument("attention has no input draw " + std::to_string(draw));
  const uint64_t tseed = tensor_seed(seed, tensor);
  if (tensor == 'q') return uniform_values(q_elems(s), tseed);
  if (tensor == 'k' && draw == 1) return growing_keys(s, tseed);
  return uniform_values(kv_elems(s), tseed);
}

// draw_tensor's and output_as_floats' work, on the attention view (16-bit dtypes).
std::vector<uint16_t> draw_bits(const Shape& s, uint64_t seed, char tensor, int draw) {
  if (is_e4m3(s)) throw std::invalid_argument("e4m3 inputs are bytes with scales: see e4m3_inputs");
  const std::vector<float> values = draw_values(s, seed, tensor, draw);
  std::vector<uint16_t> out(values.size());
  parallel_for(out.size(), [&](size_t i) { out[i] = float_to_bits(s.dtype, values[i]); });
  return out;
}

// An e4m3 check's tensor: its bytes as the kernel reads them (V transposed), each (batch, head)'s
// scale, and the values they stand for (bytes times scale, in the untransposed layout), which the
// float32 reference reads. Each (batch, head) is drawn at an amplitude of its own, x0.5 to x2, so
// that the heads' scales differ and a kernel that reads another head's scale fails the check.
Fp8Tensor quantize_drawn(const Shape& s, uint64_t seed, char tensor, int draw) {
  std::vector<float> values = draw_values(s, seed, tensor, draw);
  const int heads = tensor == 'q' ? s.heads : s.kv_heads();
  const int rows = tensor == 'q' ? s.seq_q : s.seq_k;
  const size_t slice_elems = size_t(rows) * s.head_dim;
  parallel_for(values.size(), [&](size_t i) { values[i] *= 0.5f * float(1 + (i / slice_elems) % 4); });
  return quantize_e4m3(values, s.batch * heads, rows, s.head_dim, tensor == 'v');
}

}  // namespace

Fp8Tensor quantize_e4m3(const std::vector<float>& values, int slices, int rows, int cols, bool transpose) {
  const size_t slice_elems = size_t(rows) * cols;
  if (values.size() != slice_elems * size_t(slices)) throw std::invalid_argument("quantize_e4m3: not slices x rows x cols");
  Fp8Tensor t;
  t.scales.resize(size_t(slices));
  for (int sl = 0; sl < slices; ++sl) {
    float absmax = 0.f;
    for (size_t i = 0; i < slice_elems; ++i) {
      const float a = std::fabs(values[sl * slice_elems + i]);
      if (!(a <= absmax) && !std::isnan(absmax)) absmax = a;  // NaN sticks, as the GPU's bit maximum keeps it
    }
    t.scales[size_t(sl)] = e4m3_scale(absmax);
  }
  const size_t pitch = transpose ? size_t(e4m3_vt_pitch(rows)) : 0;
  t.bytes.assign(transpose ? size_t(slices) * cols * pitch : values.size(), 0);
  t.values.resize(values.size());
  parallel_for(values.size(), [&](size_t i) {
    const size_t sl = i / slice_elems, row = (i % slice_elems) / cols, col = i % cols;
    const uint8_t b = float_to_e4m3_bits(values[i] / t.scales[sl]);
    t.bytes[transpose ? (sl * cols + col) * pitch + size_t(e4m3_vt_column(static_cast<long long>(row))) : i] = b;
    t.values[i] = e4m3_bits_to_float(b) * t.scales[sl];
  });
  return t;
}

namespace {

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
    q_bytes_ = nq_ * in_bytes(s);
    k_bytes_ = nkv_ * in_bytes(s);
    v_bytes_ = v_bytes(s);
    q_ = device_alloc(q_bytes_ * sets_);
    k_ = device_alloc(k_bytes_ * sets_);
    v_ = device_alloc(v_bytes_ * sets_);
    o_ = device_alloc(nq_ * kOutBytes * sets_);
    if (with_reference) reference_ = device_alloc(nq_ * sizeof(float));
    if (is_e4m3(s)) {
      // The scales (shared by every set), and the values the bytes stand for, which the float32
      // reference reads.
      scales_ = device_alloc(sizeof(float) * size_t(s.batch) * (s.heads + 2 * s.kv_heads()));
      if (with_reference) {
        ref_q_ = device_alloc(nq_ * sizeof(float));
        ref_k_ = device_alloc(nkv_ * sizeof(float));
        ref_v_ = device_alloc(nkv_ * sizeof(float));
      }
    }
    if (s.varlen()) {
      cu_q_ = upload_offsets(s.lens_q);
      cu_k_ = upload_offsets(s.lens_k);
    }
    for (int i = 0; i < sets_; ++i) params_.push_back(params_for(i, launch));
  }

  void draw_inputs(uint64_t seed, int draw) override {
    if (is_e4m3(s_)) {
      float* scales = static_cast<float*>(scales_.get());
      const size_t q_slices = size_t(s_.batch) * s_.heads, kv_slices = size_t(s_.batch) * s_.kv_heads();
      upload_e4m3(quantize_drawn(s_, seed, 'q', draw), q_.get(), q_bytes_, scales, ref_q_.get());
      upload_e4m3(quantize_drawn(s_, seed, 'k', draw), k_.get(), k_bytes_, scales + q_slices, ref_k_.get());
      upload_e4m3(quantize_drawn(s_, seed, 'v', draw), v_.get(), v_bytes_, scales + q_slices + kv_slices,
                  ref_v_.get());
      return;
    }
    upload(q_.get(), q_bytes_, draw_bits(s_, seed, 'q', draw).data());
    upload(k_.get(), k_bytes_, draw_bits(s_, seed, 'k', draw).data());
    upload(v_.get(), v_bytes_, draw_bits(s_, seed, 'v', draw).data());
  }

  void poison_output() override { EVO_CUDA_CHECK(cudaMemset(o_.get(), kPoisonByte, nq_ * kOutBytes)); }

  KernelParams params(int set) const override { return {&params_.at(static_cast<size_t>(set)), sizeof(FaParams)}; }

  void launch_reference(cudaKernel_t reference, cudaStream_t stream) const override {
    if (!reference_) throw std::logic_error("prepared without the reference's output");
    const FaParams& p = params_.front();
    const void *q = p.q, *k = p.k, *v = p.v;
    if (is_e4m3(s_)) {  // the values the bytes stand for, untransposed
      q = ref_q_.get();
      k = ref_k_.get();
      v = ref_v_.get();
    }
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
    EVO_CUDA_CHECK(cudaMemcpy(bits.data(), o_.get(), nq_ * kOutBytes, cudaMemcpyDeviceToHost));
    return widen(output_dtype(s_.dtype), bits);
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
    p.q = static_cast<char*>(q_.get()) + q_bytes_ * set;
    p.k = static_cast<char*>(k_.get()) + k_bytes_ * set;
    p.v = static_cast<char*>(v_.get()) + v_bytes_ * set;
    p.o = static_cast<char*>(o_.get()) + nq_ * kOutBytes * set;
    if (is_e4m3(s_)) {
      const float* scales = static_cast<const float*>(scales_.get());
      p.q_scale = scales;
      p.k_scale = scales + size_t(s_.batch) * s_.heads;
      p.v_scale = p.k_scale + size_t(s_.batch) * s_.kv_heads();
    }
    p.batch = s_.batch;
    p.heads = s_.heads;
    p.heads_kv = s_.kv_heads();
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

  // The same bytes into every set.
  void upload(void* base, size_t bytes, const void* data) const {
    for (int i = 0; i < sets_; ++i)
      EVO_CUDA_CHECK(cudaMemcpy(static_cast<char*>(base) + bytes * i, data, bytes, cudaMemcpyHostToDevice));
  }
  // An e4m3 tensor's bytes into every set, its scales, and (with the reference) its values.
  void upload_e4m3(const Fp8Tensor& t, void* base, size_t bytes, float* scales, void* reference_values) const {
    upload(base, bytes, t.bytes.data());
    EVO_CUDA_CHECK(cudaMemcpy(scales, t.scales.data(), t.scales.size() * sizeof(float), cudaMemcpyHostToDevice));
    if (reference_values != nullptr)
      EVO_CUDA_CHECK(cudaMemcpy(reference_values, t.values.data(), t.values.size() * sizeof(float),
                                cudaMemcpyHostToDevice));
  }

  Shape s_;
  int sets_;
  size_t nq_, nkv_;
  size_t q_bytes_ = 0, k_bytes_ = 0, v_bytes_ = 0;
  DevicePtr q_, k_, v_, o_, reference_;
  DevicePtr scales_, ref_q_, ref_k_, ref_v_;  // e4m3 only
  DevicePtr cu_q_, cu_k_;  // a packed batch's offsets, shared by every set
  std::vector<FaParams> params_;
};

class AttentionRuntime : public FamilyRuntime {
 public:
  std::string_view family() const override { return "attention"; }

  std::vector<std::string_view> reference_kernels() const override {
    return {"evo_reference_attention_fp16", "evo_reference_attention_bf16", "evo_reference_attention_fp32"};
  }

  std::string_view reference_kernel(const RuntimeProblem& p) const override {
    switch (shape_of(p).dtype) {
      case DType::kBF16:
        return "evo_reference_attention_bf16";
      case DType::kE4M3:  // the values the bytes stand for, as floats
        return "evo_reference_attention_fp32";
      case DType::kF16:
        break;
    }
    return "evo_reference_attention_fp16";
  }

  Tolerance tolerance(const RuntimeProblem& p) const override { return tolerance_for(shape_of(p).dtype); }

  std::vector<std::string> hard_inputs() const override { return {kGrowingScores}; }

  // Not the dtype: an fp16 and a bf16 check of one shape draw the same values, each rounded to its
  // type (and the seeds of the shapes stored before bf16 stay what they were). K/V heads only
  // where they differ, for the same reason.
  std::vector<int64_t> seed_words(const RuntimeProblem& p) const override {
    const Shape s = shape_of(p);
    std::vector<int64_t> words = {s.batch, s.heads, s.seq_q, s.seq_k, s.head_dim, int64_t(s.causal)};
    if (s.kv_heads() != s.heads) words.push_back(s.kv_heads());
    if (s.varlen()) {
      words.push_back(-1);  // no dense shape's words hold a negative value
      words.insert(words.end(), s.lens_q.begin(), s.lens_q.end());
      words.insert(words.end(), s.lens_k.begin(), s.lens_k.end());
    }
    return words;
  }

  int64_t input_set_bytes(const RuntimeProblem& p) const override {
    const Shape s = shape_of(p);
    return static_cast<int64_t>(q_elems(s) * (in_bytes(s) + kOutBytes) + kv_elems(s) * in_bytes(s) + v_bytes(s));
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
    const int group = std::min(s.heads / s.kv_heads(), 8);
    if (s.varlen()) {
      Shape small = s;
      small.heads_kv = std::min(2, s.kv_heads());
      small.heads = small.kv_heads() * group;
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
      small.heads_kv = std::min(2, s.kv_heads());
      small.heads = small.kv_heads() * group;
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

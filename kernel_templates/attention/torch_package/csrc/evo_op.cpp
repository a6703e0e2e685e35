// torch.ops.evo.attention and torch.ops.evo.attention_varlen: evo's exported attention kernel as
// PyTorch operators, on dense [batch, heads, seq, head_dim] tensors and on packed batches
// (FlashAttention's varlen layout: [tokens, heads, head_dim] with cumulative sequence offsets).
//
// Each op's CUDA kernel checks its tensors in PyTorch's terms, allocates the output and calls the
// exported C entry point (evo_attention_forward_gqa, evo_attention_forward_varlen) of the library
// bound to the tensors' device, on the current stream; it never synchronizes, so CUDA graphs
// capture it. Its AutogradCUDA kernel refuses inputs that need a gradient (there is no backward
// pass) and calls the CUDA kernel directly for plain CUDA tensors. evo::_bench times the op against the raw entry point in C++.
// The libraries are separate shared objects, one per architecture, each built from its own
// export (their symbols are the same), so they are loaded with dlopen and bound per device by
// evo_kernels at import (torch.ops.evo._bind_library).
#include <Python.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/cuda/EmptyTensor.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <torch/library.h>

namespace {

// The exported entry point (docs/exported-kernel.md): q, k, v, o, batch, heads, heads_kv, seq_q,
// seq_k, head_dim, softmax_scale, causal, dtype, stream, programmatic_launch.
using EntryPoint = int (*)(const void*, const void*, const void*, void*, int, int, int, int, int, int, float, int,
                           int, cudaStream_t, int);

// evo_attention_forward_varlen: q, k, v, o, cu_seqlens_q, cu_seqlens_k, batch, heads, heads_kv,
// max_seq_q, max_seq_k, total_q, total_k, head_dim, softmax_scale, causal, dtype, stream,
// programmatic_launch.
using VarlenEntryPoint = int (*)(const void*, const void*, const void*, void*, const int*, const int*, int, int, int,
                                 int, int, int, int, int, float, int, int, cudaStream_t, int);

constexpr int64_t kMaxDevices = 64;
std::array<std::atomic<EntryPoint>, kMaxDevices> g_entry_by_device{};  // static: all null at start
// Null where the bound library is an export from before packed batches.
std::array<std::atomic<VarlenEntryPoint>, kMaxDevices> g_varlen_by_device{};

void bind_library(int64_t device, std::string path) {
  TORCH_CHECK(device >= 0 && device < kMaxDevices, "evo: device index " + std::to_string(device) + " is out of range");
  // Never closed: a call may be in flight on any stream, and a graph may hold its kernel.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  TORCH_CHECK(handle != nullptr, "evo: cannot load ", path, ": ", dlerror());
  auto entry = reinterpret_cast<EntryPoint>(dlsym(handle, "evo_attention_forward_gqa"));
  TORCH_CHECK(entry != nullptr, "evo: " + path +
                                    " has no evo_attention_forward_gqa (not an evo export, or one from before "
                                    "grouped-query heads: export it again)");
  g_varlen_by_device[device].store(reinterpret_cast<VarlenEntryPoint>(dlsym(handle, "evo_attention_forward_varlen")),
                                   std::memory_order_release);
  g_entry_by_device[device].store(entry, std::memory_order_release);
}

// evo::DType's values: 0 fp16, 1 bf16.
int dtype_code(const at::Tensor& query, const char* op = "evo::attention") {
  if (query.scalar_type() == at::kHalf) return 0;
  TORCH_CHECK(query.scalar_type() == at::kBFloat16,
              std::string(op) + ": query is " + c10::toString(query.scalar_type()) +
                  "; evo serves float16 and bfloat16");
  return 1;
}

// "[1, 8, 512, 64]". Each refusal's message is built here as one string: on the GPU host (torch
// 2.11) the refusals whose TORCH_CHECK streamed sizes or integers died of SIGSEGV, while those of
// plain strings were raised as errors.
std::string dims(c10::IntArrayRef values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

// A dense call's tensors are [batch, heads, seq, head_dim]; a packed one's [tokens, heads, head_dim].
struct Layout {
  const char* op;  // "evo::attention"
  int64_t dim;
  const char* names;
};
constexpr Layout kDense{"evo::attention", 4, "4-D [batch, heads, seq, head_dim]"};
constexpr Layout kPacked{"evo::attention_varlen", 3, "3-D [tokens, heads, head_dim]"};

void check_tensor(const at::Tensor& t, const char* name, const at::Tensor& query, const Layout& layout = kDense) {
  // Built only for a refusal (TORCH_CHECK evaluates its message then): a passing call allocates nothing.
  const auto what = [&] { return std::string(layout.op) + ": " + name; };
  TORCH_CHECK(t.dim() == layout.dim, what() + " must be " + layout.names + ", got sizes " + dims(t.sizes()));
  TORCH_CHECK(t.is_cuda(), what() + " is on " + t.device().str() + "; evo's kernel runs on CUDA tensors");
  TORCH_CHECK(t.device() == query.device(), what() + " is on " + t.device().str() + ", query on " + query.device().str());
  TORCH_CHECK(t.scalar_type() == query.scalar_type(), what() + " is " + c10::toString(t.scalar_type()) + ", query " +
                                                          c10::toString(query.scalar_type()) +
                                                          "; all three must share a dtype");
  TORCH_CHECK(t.is_contiguous(), what() + " must be contiguous (sizes " + dims(t.sizes()) + ", strides " +
                                     dims(t.strides()) +
                                     "); call .contiguous() on it" +
                                     (layout.dim == 4 ? ", or use evo_kernels.scaled_dot_product_attention, which does"
                                                      : ""));
  TORCH_CHECK(reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0,
              what() + "'s data must be 16-byte aligned (a view at an odd storage offset?); call .clone() on it");
}

// What the exported entry point's error `err` says of a call. The error's number only: naming it
// would need the CUDA runtime, which this library does not link (the toolkit's may not be the one
// PyTorch was built with). `invalid_value`: what cudaErrorInvalidValue means for this op.
std::string refusal(const Layout& layout, int err, const at::Tensor& query, const at::Tensor& key, bool is_causal,
                    const char* invalid_value) {
  return std::string(layout.op) + ": the exported kernel refused " + dims(query.sizes()) + " x key " +
         dims(key.sizes()) + " " + c10::toString(query.scalar_type()) + (is_causal ? " causal" : " non-causal") +
         ": CUDA error " + std::to_string(err) +
         (err == cudaErrorInvalidValue ? std::string(" (cudaErrorInvalidValue: ") + invalid_value + ")"
                                       : std::string(" (the device could not launch it)"));
}

void check_shapes(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool is_causal) {
  TORCH_CHECK(k.sizes() == v.sizes(), "evo::attention: key ", dims(k.sizes()), " and value ", dims(v.sizes()),
              " must have one shape");
  TORCH_CHECK(k.size(0) == q.size(0) && k.size(3) == q.size(3), "evo::attention: key ", dims(k.sizes()),
              " must match query ", dims(q.sizes()), " in batch and head_dim");
  TORCH_CHECK(k.size(1) > 0 && q.size(1) % k.size(1) == 0,
              "evo::attention: " + std::to_string(k.size(1)) + " key/value heads do not divide the " +
                  std::to_string(q.size(1)) + " query heads (grouped-query attention needs a whole group each)");
  TORCH_CHECK(!is_causal || q.size(2) <= k.size(2), "evo::attention: is_causal needs seq_q <= seq_k, got " +
                                                       std::to_string(q.size(2)) + " and " + std::to_string(k.size(2)) +
                                                       " (evo aligns the causal diagonal bottom-right)");
  TORCH_CHECK(k.size(2) > 0 || q.numel() == 0, "evo::attention: key and value have no positions");
}

at::Tensor attention_cuda(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                          std::optional<double> scale, bool is_causal) {
  check_tensor(query, "query", query);
  check_tensor(key, "key", query);
  check_tensor(value, "value", query);
  check_shapes(query, key, value, is_causal);
  const int dtype = dtype_code(query);
  // CUDA's allocation itself, without the dispatcher: empty_like would go through it twice and
  // merge options. query is contiguous, so the result is the same.
  at::Tensor out = at::detail::empty_cuda(query.sizes(), query.scalar_type(), query.device(), std::nullopt);
  if (query.numel() == 0) return out;
  const int64_t device = query.get_device();
  const EntryPoint entry = device < kMaxDevices ? g_entry_by_device[device].load(std::memory_order_acquire) : nullptr;
  TORCH_CHECK(entry != nullptr, "evo::attention: no evo library is bound to " + query.device().str() +
              " (import evo_kernels first; evo_kernels.CHOICE_BY_DEVICE says why a device has none)");
  const int64_t head_dim = query.size(3);
  const double softmax_scale = scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
  const c10::cuda::CUDAGuard guard(query.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
  const int err = entry(query.data_ptr(), key.data_ptr(), value.data_ptr(), out.data_ptr(),
                        static_cast<int>(query.size(0)), static_cast<int>(query.size(1)),
                        static_cast<int>(key.size(1)), static_cast<int>(query.size(2)), static_cast<int>(key.size(2)), static_cast<int>(head_dim),
                        static_cast<float>(softmax_scale), is_causal ? 1 : 0, dtype, stream, 1);
  TORCH_CHECK(err == 0, refusal(kDense, err, query, key, is_causal,
                                "no exported genome serves this dtype and head_dim, or the shape breaks one's "
                                "constraints"));
  return out;
}

using AttentionFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, std::optional<double>, bool);

const c10::TypedOperatorHandle<AttentionFn>& attention_handle() {
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("evo::attention", "").typed<AttentionFn>();
  return op;
}

// Autograd (CUDA tensors): forward only. A call that would need a gradient is refused before any
// work. Otherwise, when the dispatcher's next kernel would be the CUDA one (plain CUDA tensors, no
// Python mode, fake or functional tensor below autograd), it is called directly: no second trip
// through the dispatcher, and an error it raises leaves from this frame, as the refusal above does.
// Anything else (FakeTensor under torch.compile, functionalization, a dispatch mode) is
// redispatched below autograd with the keys the dispatcher gave this kernel.
at::Tensor attention_autograd(c10::DispatchKeySet keys, const at::Tensor& query, const at::Tensor& key,
                              const at::Tensor& value, std::optional<double> scale, bool is_causal) {
  TORCH_CHECK(!(at::GradMode::is_enabled() && (query.requires_grad() || key.requires_grad() || value.requires_grad())),
              "evo::attention: inputs require grad, but evo provides no backward pass (forward only); run under "
              "torch.no_grad() or torch.inference_mode(), or use evo_kernels.scaled_dot_product_attention, which "
              "falls back to torch's SDPA for such calls");
  const c10::DispatchKeySet below = keys & c10::after_ADInplaceOrView_keyset;
  if (below.highestPriorityTypeId() == c10::DispatchKey::CUDA)
    return attention_cuda(query, key, value, scale, is_causal);
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return attention_handle().redispatch(below, query, key, value, scale, is_causal);
}

// The cumulative offsets of a packed batch: int32 CUDA tensors of batch + 1 on query's device.
// Their values stay on the device (reading them would synchronize): the kernel trusts them as
// FlashAttention's varlen API does, and max_seqlen_q/k bound its grid.
void check_offsets(const at::Tensor& cu, const char* name, const at::Tensor& query, int64_t batch_plus_one) {
  const auto what = [&] { return std::string("evo::attention_varlen: ") + name; };
  TORCH_CHECK(cu.dim() == 1 && cu.size(0) >= 2, what() + " must be 1-D with batch + 1 >= 2 offsets, got sizes " +
                                                   dims(cu.sizes()));
  TORCH_CHECK(cu.scalar_type() == at::kInt, what() + " is " + c10::toString(cu.scalar_type()) + "; offsets are int32");
  TORCH_CHECK(cu.device() == query.device(), what() + " is on " + cu.device().str() + ", query on " + query.device().str());
  TORCH_CHECK(cu.is_contiguous(), what() + " must be contiguous");
  TORCH_CHECK(cu.size(0) == batch_plus_one, what() + " has " + std::to_string(cu.size(0)) +
                                                " offsets, cu_seqlens_q " + std::to_string(batch_plus_one) +
                                                "; both have one per sequence, plus one");
}

at::Tensor attention_varlen_cuda(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                 const at::Tensor& cu_seqlens_q, const at::Tensor& cu_seqlens_k, int64_t max_seqlen_q,
                                 int64_t max_seqlen_k, std::optional<double> scale, bool is_causal) {
  check_tensor(query, "query", query, kPacked);
  check_tensor(key, "key", query, kPacked);
  check_tensor(value, "value", query, kPacked);
  TORCH_CHECK(key.sizes() == value.sizes(), "evo::attention_varlen: key " + dims(key.sizes()) + " and value " +
                                                dims(value.sizes()) + " must have one shape");
  TORCH_CHECK(key.size(2) == query.size(2), "evo::attention_varlen: key " + dims(key.sizes()) +
                                                " must match query " + dims(query.sizes()) + " in head_dim");
  TORCH_CHECK(key.size(1) > 0 && query.size(1) % key.size(1) == 0,
              "evo::attention_varlen: " + std::to_string(key.size(1)) + " key/value heads do not divide the " +
                  std::to_string(query.size(1)) + " query heads (grouped-query attention needs a whole group each)");
  check_offsets(cu_seqlens_q, "cu_seqlens_q", query, cu_seqlens_q.size(0));
  check_offsets(cu_seqlens_k, "cu_seqlens_k", query, cu_seqlens_q.size(0));
  TORCH_CHECK(max_seqlen_q >= 0 && max_seqlen_q <= query.size(0) && max_seqlen_k >= 0 && max_seqlen_k <= key.size(0),
              "evo::attention_varlen: max_seqlen_q " + std::to_string(max_seqlen_q) + " and max_seqlen_k " +
                  std::to_string(max_seqlen_k) + " must lie within the " + std::to_string(query.size(0)) +
                  " query and " + std::to_string(key.size(0)) + " key tokens");
  const int dtype = dtype_code(query, "evo::attention_varlen");
  at::Tensor out = at::detail::empty_cuda(query.sizes(), query.scalar_type(), query.device(), std::nullopt);
  if (query.numel() == 0 || max_seqlen_q == 0) return out.zero_();
  const int64_t device = query.get_device();
  const VarlenEntryPoint entry =
      device < kMaxDevices ? g_varlen_by_device[device].load(std::memory_order_acquire) : nullptr;
  TORCH_CHECK(entry != nullptr, "evo::attention_varlen: the evo library bound to " + query.device().str() +
                                    " has no evo_attention_forward_varlen (none is bound, or it is an export from "
                                    "before packed batches: export it again)");
  const int64_t head_dim = query.size(2);
  const double softmax_scale = scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
  const c10::cuda::CUDAGuard guard(query.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
  const int err = entry(query.data_ptr(), key.data_ptr(), value.data_ptr(), out.data_ptr(),
                        cu_seqlens_q.data_ptr<int>(), cu_seqlens_k.data_ptr<int>(),
                        static_cast<int>(cu_seqlens_q.size(0) - 1), static_cast<int>(query.size(1)),
                        static_cast<int>(key.size(1)), static_cast<int>(max_seqlen_q), static_cast<int>(max_seqlen_k),
                        static_cast<int>(query.size(0)), static_cast<int>(key.size(0)), static_cast<int>(head_dim),
                        static_cast<float>(softmax_scale), is_causal ? 1 : 0, dtype, stream, 1);
  TORCH_CHECK(err == 0, refusal(kPacked, err, query, key, is_causal,
                                "no exported genome was tuned on a packed batch of this dtype and head_dim, or the "
                                "call breaks one's constraints"));
  return out;
}

using VarlenFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                            const at::Tensor&, int64_t, int64_t, std::optional<double>, bool);

// As attention_autograd: forward only, the CUDA kernel called directly for plain CUDA tensors.
at::Tensor attention_varlen_autograd(c10::DispatchKeySet keys, const at::Tensor& query, const at::Tensor& key,
                                     const at::Tensor& value, const at::Tensor& cu_seqlens_q,
                                     const at::Tensor& cu_seqlens_k, int64_t max_seqlen_q, int64_t max_seqlen_k,
                                     std::optional<double> scale, bool is_causal) {
  TORCH_CHECK(!(at::GradMode::is_enabled() && (query.requires_grad() || key.requires_grad() || value.requires_grad())),
              "evo::attention_varlen: inputs require grad, but evo provides no backward pass (forward only); run "
              "under torch.no_grad() or torch.inference_mode()");
  const c10::DispatchKeySet below = keys & c10::after_ADInplaceOrView_keyset;
  if (below.highestPriorityTypeId() == c10::DispatchKey::CUDA)
    return attention_varlen_cuda(query, key, value, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, scale,
                                 is_causal);
  static const auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("evo::attention_varlen", "").typed<VarlenFn>();
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.redispatch(below, query, key, value, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, scale,
                       is_causal);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// evo::_bench: the op's host cost over the raw entry point measured in C++, without Python's call
// overhead: `rounds` rounds of `calls` calls each way, alternating, the stream drained before
// every round (so launches never wait on a full queue). Returns the medians of host µs per call:
// [raw entry point (arguments prepared once), the op through the dispatcher from its top (its
// AutogradCUDA kernel included, as a Python call meets it)]. Registered CompositeImplicitAutograd,
// so calling it leaves the dispatcher's thread-local keys as they were (an autograd fallback would
// exclude the autograd keys for the op calls inside). Run it under torch.no_grad() on contiguous
// CUDA inputs the op serves.
std::vector<double> bench(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, bool is_causal,
                          int64_t calls, int64_t rounds) {
  TORCH_CHECK(calls > 0 && rounds > 0, "evo::_bench: calls and rounds must be positive");
  at::Tensor out = attention_cuda(query, key, value, std::nullopt, is_causal);  // checks, warms up
  const int64_t device = query.get_device();
  const EntryPoint entry = g_entry_by_device[device].load(std::memory_order_acquire);
  const c10::cuda::CUDAGuard guard(query.device());
  const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device));
  const int b = static_cast<int>(query.size(0)), h = static_cast<int>(query.size(1));
  const int h_kv = static_cast<int>(key.size(1));
  const int sq = static_cast<int>(query.size(2)), sk = static_cast<int>(key.size(2));
  const int d = static_cast<int>(query.size(3));
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  const int dtype = dtype_code(query);
  const auto& op = attention_handle();
  const void* const q_ptr = query.data_ptr();
  const void* const k_ptr = key.data_ptr();
  const void* const v_ptr = value.data_ptr();
  void* const o_ptr = out.data_ptr();
  std::vector<double> raw_us, op_us;
  int failures = 0;
  for (int64_t r = -1; r < rounds; ++r) {  // round -1 warms both ways up, uncounted
    stream.synchronize();
    auto start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < calls; ++i)
      failures += entry(q_ptr, k_ptr, v_ptr, o_ptr, b, h, h_kv, sq, sk, d, scale, is_causal ? 1 : 0, dtype,
                        stream.stream(), 1) != 0;
    auto mid = std::chrono::steady_clock::now();
    stream.synchronize();
    auto op_start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < calls; ++i) op.call(query, key, value, std::nullopt, is_causal);
    auto end = std::chrono::steady_clock::now();
    if (r < 0) continue;
    raw_us.push_back(std::chrono::duration<double, std::micro>(mid - start).count() / calls);
    op_us.push_back(std::chrono::duration<double, std::micro>(end - op_start).count() / calls);
  }
  stream.synchronize();
  TORCH_CHECK(failures == 0, "evo::_bench: the entry point refused ", failures, " calls");
  return {median(raw_us), median(op_us)};
}

}  // namespace

TORCH_LIBRARY(evo, m) {
  m.def("attention(Tensor query, Tensor key, Tensor value, float? scale=None, bool is_causal=False) -> Tensor");
  m.def("attention_varlen(Tensor query, Tensor key, Tensor value, Tensor cu_seqlens_q, Tensor cu_seqlens_k, "
        "int max_seqlen_q, int max_seqlen_k, float? scale=None, bool is_causal=False) -> Tensor");
  m.def("_bind_library(int device, str path) -> ()");
  m.impl("_bind_library", &bind_library);
  m.def("_bench(Tensor query, Tensor key, Tensor value, bool is_causal, int calls, int rounds) -> float[]");
}

TORCH_LIBRARY_IMPL(evo, CUDA, m) {
  m.impl("attention", &attention_cuda);
  m.impl("attention_varlen", &attention_varlen_cuda);
}

TORCH_LIBRARY_IMPL(evo, CompositeImplicitAutograd, m) { m.impl("_bench", &bench); }

// AutogradCUDA only: CPU or Meta inputs go through torch's autograd fallback to their own key
// (Meta: the fake implementation; CPU: torch's "no kernel for CPU" error).
TORCH_LIBRARY_IMPL(evo, AutogradCUDA, m) {
  m.impl("attention", TORCH_FN(attention_autograd));
  m.impl("attention_varlen", TORCH_FN(attention_varlen_autograd));
}

// `import evo_kernels._C` loads this library, which registers the ops above; the module is empty.
PyMODINIT_FUNC PyInit__C(void) {
  static PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", "evo's torch ops (torch.ops.evo)", -1, nullptr};
  return PyModule_Create(&module);
}

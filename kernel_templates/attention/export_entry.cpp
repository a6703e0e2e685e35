#include "export_entry.h"

#include <algorithm>
#include <sstream>

#include <nlohmann/json.hpp>

#include "attention/problem.h"

namespace evo::attention {
namespace {

// bench/bench_dispatch.py's entry: the shape's text without causality and dtype ("1x8x512x64",
// "1x32x512x4096x128:kv8"), and those two apart.
std::string bench_fields(const Problem& problem, std::string*) {
  Shape s = shape_of(problem);
  const bool causal = s.causal;
  const DType dtype = s.dtype;
  s.causal = false;
  s.dtype = DType::kF16;
  return nlohmann::json{{"shape", s.text()}, {"causal", causal}, {"dtype", std::string(dtype_name(dtype))}}.dump();
}

std::string launch_arguments(const std::map<std::string, std::string>& launch) {
  const bool has_workspace = launch.count("workspace_bytes") > 0;
  const bool has_tensor_maps = launch.count("tensor_map_box_rows") > 0;
  std::ostringstream o;
  if (has_workspace || has_tensor_maps)
    o << "      evo::FaParams args = p;\n";
  else
    o << "      const evo::FaParams& args = p;\n";
  if (has_workspace)
    o << "      const long long workspace_bytes = " << launch.at("workspace_bytes") << ";\n"
      << "      const long long workspace_zeroed_bytes = "
      << (launch.count("workspace_zeroed_bytes") ? launch.at("workspace_zeroed_bytes") : "workspace_bytes") << ";\n"
      << "      WorkspaceLease workspace_lease;  // outlives the launch below\n"
      << "      if (workspace_bytes > 0) {\n"
      << "        const cudaError_t e =\n"
      << "            workspace_for(stream, workspace_bytes, workspace_zeroed_bytes, &args.workspace, workspace_lease);\n"
      << "        if (e != cudaSuccess) return e;\n"
      << "      }\n";
  if (has_tensor_maps) {
    // Q and O boxes are as tall as K and V ones where the space gives no formula of their own.
    const auto q_rows = launch.find("tensor_map_q_box_rows");
    o << "      const long long tensor_map_box_rows = " << launch.at("tensor_map_box_rows") << ";\n"
      << "      const long long tensor_map_q_box_rows = "
      << (q_rows != launch.end() ? q_rows->second : "tensor_map_box_rows") << ";\n"
      << "      if (tensor_map_box_rows > 0) {  // loads through TMA, in boxes of those heights\n"
      << "        const cudaError_t e = evo::encode_attention_tensor_maps(\n"
      << "            args, static_cast<evo::DType>(DTYPE_), HEAD_DIM_, static_cast<int>(tensor_map_box_rows),\n"
      << "            static_cast<int>(tensor_map_q_box_rows));\n"
      << "        if (e != cudaSuccess) return e;\n"
      << "      }\n";
  }
  return o.str();
}

// The dtypes a variant is instantiated for: those of the shapes it was tuned and checked on (fp16
// where it has none). A call of another dtype is refused rather than run on a genome whose
// correctness no gate saw in that dtype.
std::vector<DType> tuned_dtypes(const std::vector<Problem>& problems) {
  std::vector<DType> out;
  for (const auto& problem : problems) {
    const DType d = shape_of(problem).dtype;
    if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
  }
  if (out.empty()) out.push_back(DType::kF16);
  return out;
}

// Whether a variant serves packed batches (VARLEN 1) or dense ones (0): as the shapes it was tuned
// and checked on (dense where it has none), for the same reason as tuned_dtypes.
std::vector<int> tuned_layouts(const std::vector<Problem>& problems) {
  std::vector<int> out;
  for (const auto& problem : problems) {
    const int varlen = shape_of(problem).varlen() ? 1 : 0;
    if (std::find(out.begin(), out.end(), varlen) == out.end()) out.push_back(varlen);
  }
  if (out.empty()) out.push_back(0);
  return out;
}

// Every (variant, dtype, causal, head_dim, varlen) instantiation the table holds, as one `if` line
// each: `body` is what the line does with "VariantN<DTYPE, CAUSAL, HEAD_DIM, VARLEN>".
void emit_instantiations(std::ostringstream& o, const ExportTable& t, const std::string& body) {
  for (size_t v = 0; v < t.problems.size(); ++v)
    for (DType d : tuned_dtypes(t.problems[v]))
      for (int varlen : tuned_layouts(t.problems[v]))
        for (int64_t hd : t.space.served.at("HEAD_DIM"))
          for (int causal = 0; causal < 2; ++causal) {
            const int dtype = static_cast<int>(d);
            o << "  if (variant == " << v << " && dtype == " << dtype << " && causal == " << causal
              << " && head_dim == " << hd << " && varlen == " << varlen << ") return Variant" << v << "<"
              << dtype << ", " << causal << ", " << hd << ", " << varlen << ">::" << body << ";\n";
          }
}

// pick_variant() of a table of several genomes: the bucket of the call's exact shape, else the
// nearest (batch, seq_q, seq_k) among the buckets of its dtype, head_dim, causality and layout
// (the measure of attention::shape_distance, which plans a workload's buckets; a packed batch by
// its longest lengths), else the first variant that serves them.
void emit_buckets(std::ostringstream& o, const ExportTable& t) {
  const size_t n = t.problems.size();
  o << "// Shape buckets: each exported shape and the variant that won it (a packed batch: varlen 1,\n"
    << "// seq_q and seq_k its longest sequence's).\n"
    << "struct Bucket { int batch, heads, heads_kv, seq_q, seq_k, head_dim, causal, dtype, varlen, variant; };\n"
    << "static const Bucket kBuckets[] = {\n";
  for (size_t v = 0; v < n; ++v)
    for (const auto& problem : t.problems[v]) {
      const Shape sh = shape_of(problem);
      o << "  {" << sh.batch << ", " << sh.heads << ", " << sh.kv_heads() << ", " << sh.seq_q << ", " << sh.seq_k
        << ", " << sh.head_dim << ", " << (sh.causal ? 1 : 0) << ", " << static_cast<int>(sh.dtype) << ", "
        << (sh.varlen() ? 1 : 0) << ", " << v << "},\n";
    }
  o << "};\n\n"
    << "static int pick_variant(int batch, int heads, int heads_kv, int seq_q, int seq_k, int head_dim, int causal,\n"
    << "                        int dtype, int varlen) {\n"
    << "  int nearest = -1;\n"
    << "  double nearest_distance = 0.0;\n"
    << "  for (const Bucket& b : kBuckets) {\n"
    << "    if (b.head_dim != head_dim || b.causal != causal || b.dtype != dtype || b.varlen != varlen ||\n"
    << "        !serves(b.variant, dtype, causal, head_dim, varlen))\n"
    << "      continue;\n"
    << "    if (b.batch == batch && b.heads == heads && b.heads_kv == heads_kv && b.seq_q == seq_q &&\n"
    << "        b.seq_k == seq_k)\n"
    << "      return b.variant;\n"
    << "    // Nearest batch and lengths on a log scale, queries and keys alike: tiles that suit 512\n"
    << "    // suit 600 better than 4096, and a decode step (one query) is nearer another decode step\n"
    << "    // than a prefill of as many keys.\n"
    << "    const double distance = std::fabs(std::log(static_cast<double>(b.batch) / batch)) +\n"
    << "                            std::fabs(std::log(static_cast<double>(b.seq_q) / seq_q)) +\n"
    << "                            std::fabs(std::log(static_cast<double>(b.seq_k) / seq_k));\n"
    << "    if (nearest < 0 || distance < nearest_distance) {\n"
    << "      nearest = b.variant;\n"
    << "      nearest_distance = distance;\n"
    << "    }\n"
    << "  }\n"
    << "  if (nearest >= 0) return nearest;\n"
    << "  for (int v = 0; v < " << n << "; ++v)\n"
    << "    if (serves(v, dtype, causal, head_dim, varlen)) return v;\n"
    << "  return -1;\n}\n\n";
}

std::string dispatch(const ExportTable& t) {
  std::ostringstream o;
  // serves(): which (variant, dtype, causal, head_dim, varlen) instantiations exist.
  o << "static bool serves(int variant, int dtype, int causal, int head_dim, int varlen) {\n";
  emit_instantiations(o, t, "kValid");
  o << "  return false;\n}\n\n";

  o << "static int launch_variant(int variant, int dtype, int causal, int head_dim, int varlen,\n"
    << "                          const evo::FaParams& p, cudaStream_t stream, bool programmatic) {\n";
  emit_instantiations(o, t, "launch(p, stream, programmatic)");
  o << "  return cudaErrorInvalidValue;\n}\n\n";

  o << "static long long variant_workspace_bytes(int variant, int dtype, int causal, int head_dim, int varlen,\n"
    << "                                         const evo::FaParams& p) {\n";
  emit_instantiations(o, t, "workspace_bytes(p)");
  o << "  return -1;\n}\n\n";

  if (t.problems.size() == 1)
    o << "static int pick_variant(int, int, int, int, int, int head_dim, int causal, int dtype, int varlen) {\n"
      << "  return serves(0, dtype, causal, head_dim, varlen) ? 0 : -1;\n}\n\n";
  else
    emit_buckets(o, t);
  return o.str();
}

// The file-private helpers every entry point calls: plan_call (the checks on a call's scalars and
// the variant pick) and forward (the params, the workspace and the launch).
void emit_call_helpers(std::ostringstream& o) {
  o << "namespace evo_export {\n"
    << "// The checks on a call's scalars (no CUDA call: a bad call is refused even without a GPU), the\n"
    << "// variant pick and the params' scalars: the variant, or -1 for a call this file refuses.\n"
    << "static int plan_call(int batch, int heads, int heads_kv, int seq_q, int seq_k, int head_dim, int causal,\n"
    << "                     int dtype, int varlen, evo::FaParams* p) {\n"
    << "  if (batch <= 0 || heads <= 0 || heads_kv <= 0 || seq_q <= 0 || seq_k <= 0 || head_dim <= 0) return -1;\n"
    << "  if (heads % heads_kv != 0) return -1;\n"
    << "  if (causal != 0 && causal != 1) return -1;\n"
    << "  *p = evo::FaParams{};  // value-initialised: a field not set here (workspace) is null\n"
    << "  p->batch = batch;\n"
    << "  p->heads = heads;\n"
    << "  p->heads_kv = heads_kv;\n"
    << "  p->seq_q = seq_q;\n"
    << "  p->seq_k = seq_k;\n"
    << "  // (-1 where no exported genome serves this call's kind)\n"
    << "  return pick_variant(batch, heads, heads_kv, seq_q, seq_k, head_dim, causal, dtype, varlen);\n"
    << "}\n\n"
    << "// What every entry point shares: the checks, the params, the pick and the launch. A packed batch\n"
    << "// passes its offsets and totals; a dense one nulls and zeros.\n"
    << "static int forward(const void* q, const void* k, const void* v, void* o, int batch, int heads, int heads_kv,\n"
    << "                   int seq_q, int seq_k, int head_dim, float softmax_scale, int causal, int dtype,\n"
    << "                   const int* cu_seqlens_q, const int* cu_seqlens_k, int total_q, int total_k,\n"
    << "                   const float* q_scale, const float* k_scale, const float* v_scale,\n"
    << "                   cudaStream_t stream, int programmatic_launch) {\n"
    << "  if (q == nullptr || k == nullptr || v == nullptr || o == nullptr) return cudaErrorInvalidValue;\n"
    << "  // e4m3 takes its scales, and only e4m3 does.\n"
    << "  const bool scaled = q_scale != nullptr || k_scale != nullptr || v_scale != nullptr;\n"
    << "  if (dtype == 2 ? q_scale == nullptr || k_scale == nullptr || v_scale == nullptr : scaled)\n"
    << "    return cudaErrorInvalidValue;\n"
    << "  if (programmatic_launch != 0 && programmatic_launch != 1) return cudaErrorInvalidValue;\n"
    << "  if (!std::isfinite(softmax_scale)) return cudaErrorInvalidValue;\n"
    << "  const int varlen = cu_seqlens_q != nullptr ? 1 : 0;\n"
    << "  evo::FaParams p;\n"
    << "  const int variant = plan_call(batch, heads, heads_kv, seq_q, seq_k, head_dim, causal, dtype, varlen, &p);\n"
    << "  if (variant < 0) return cudaErrorInvalidValue;\n"
    << "  p.q = q;\n"
    << "  p.k = k;\n"
    << "  p.v = v;\n"
    << "  p.o = o;\n"
    << "  p.softmax_scale = softmax_scale;\n"
    << "  p.cu_seqlens_q = cu_seqlens_q;\n"
    << "  p.cu_seqlens_k = cu_seqlens_k;\n"
    << "  p.total_q = total_q;\n"
    << "  p.total_k = total_k;\n"
    << "  p.q_scale = q_scale;\n"
    << "  p.k_scale = k_scale;\n"
    << "  p.v_scale = v_scale;\n"
    << "  return launch_variant(variant, dtype, causal, head_dim, varlen, p, stream, programmatic_launch == 1);\n"
    << "}\n"
    << "}  // namespace evo_export\n\n";
}

// The dense entry points: 16-bit inputs with grouped heads, and FP8.
void emit_dense_entry_points(std::ostringstream& o) {
  o << "// q: [batch, heads, seq_q, head_dim], k and v: [batch, heads_kv, seq_k, head_dim], o: [batch, heads,\n"
    << "// seq_q, head_dim], contiguous, of `dtype`: 0 fp16 (__half), 1 bf16 (__nv_bfloat16), the values of\n"
    << "// evo::DType (2, e4m3, is evo_attention_forward_fp8's). Query head h reads K/V head h / (heads / heads_kv) (grouped-query attention;\n"
    << "// heads_kv == heads without it). causal 1 aligns the diagonal bottom-right: query row i sees keys\n"
    << "// 0 .. i + seq_k - seq_q (as FlashAttention and a KV cache do; for seq_q == seq_k the usual top-left\n"
    << "// mask), and needs seq_q <= seq_k.\n"
    << "// Returns 0 (cudaSuccess) or the CUDA error / cudaErrorInvalidValue for a shape or dtype this\n"
    << "// file cannot serve (a dtype none of its genomes was tuned for). Launches on `stream` and never\n"
    << "// synchronizes.\n"
    << "// programmatic_launch 1 (what evo_attention_forward does): a programmatic dependent launch, which\n"
    << "// may begin while the stream's previous kernel finishes, so that its start-up overlaps that\n"
    << "// kernel's tail; the kernel reads and writes nothing before the previous kernel has ended.\n"
    << "// 0: a plain launch, which starts only after the previous kernel has ended.\n"
    << "extern \"C\" int evo_attention_forward_gqa(const void* q, const void* k, const void* v, void* o,\n"
    << "                                         int batch, int heads, int heads_kv, int seq_q, int seq_k,\n"
    << "                                         int head_dim, float softmax_scale, int causal, int dtype,\n"
    << "                                         cudaStream_t stream, int programmatic_launch) {\n"
    << "  // Bottom-right with more queries than keys would leave the first rows no key to attend to.\n"
    << "  if (causal == 1 && seq_q > seq_k) return cudaErrorInvalidValue;\n"
    << "  // The kernel indexes with 32-bit integers.\n"
    << "  const long long longest = seq_q > seq_k ? seq_q : seq_k;\n"
    << "  if (static_cast<long long>(batch) * heads * longest * head_dim > 2147483647LL)\n"
    << "    return cudaErrorInvalidValue;\n"
    << "  // (e4m3 takes scales and a transposed V: evo_attention_forward_fp8.)\n"
    << "  if (dtype == 2) return cudaErrorInvalidValue;\n"
    << "  return evo_export::forward(q, k, v, o, batch, heads, heads_kv, seq_q, seq_k, head_dim, softmax_scale,\n"
    << "                             causal, dtype, nullptr, nullptr, 0, 0, nullptr, nullptr, nullptr, stream,\n"
    << "                             programmatic_launch);\n"
    << "}\n\n"
    << "// FP8: q [batch, heads, seq_q, head_dim] and k [batch, heads_kv, seq_k, head_dim] of e4m3 bytes, v\n"
    << "// transposed, [batch, heads_kv, head_dim, pitch] e4m3 bytes with pitch = seq_k rounded up to 16,\n"
    << "// the pad finite (zeros), each 16 keys in the order 0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7,\n"
    << "// 14, 15 (what evo_attention_quantize_fp8 writes with transpose 1); q_scale (batch * heads floats),\n"
    << "// k_scale and v_scale (batch * heads_kv), device memory: each element of a (batch, head) stands for\n"
    << "// element * its scale, so the scales apply once (to the scores and to the output). o: bf16\n"
    << "// [batch, heads, seq_q, head_dim]. Otherwise as evo_attention_forward_gqa; a file none of whose\n"
    << "// genomes was tuned on e4m3 refuses every call (cudaErrorInvalidValue).\n"
    << "extern \"C\" int evo_attention_forward_fp8(const void* q, const void* k, const void* v_t, void* o,\n"
    << "                                         const float* q_scale, const float* k_scale,\n"
    << "                                         const float* v_scale, int batch, int heads, int heads_kv,\n"
    << "                                         int seq_q, int seq_k, int head_dim, float softmax_scale,\n"
    << "                                         int causal, cudaStream_t stream, int programmatic_launch) {\n"
    << "  if (causal == 1 && seq_q > seq_k) return cudaErrorInvalidValue;\n"
    << "  const long long longest = seq_q > seq_k + 16 ? seq_q : seq_k + 16;\n"
    << "  if (static_cast<long long>(batch) * heads * longest * head_dim > 2147483647LL)\n"
    << "    return cudaErrorInvalidValue;\n"
    << "  if (q_scale == nullptr || k_scale == nullptr || v_scale == nullptr) return cudaErrorInvalidValue;\n"
    << "  return evo_export::forward(q, k, v_t, o, batch, heads, heads_kv, seq_q, seq_k, head_dim, softmax_scale,\n"
    << "                             causal, 2, nullptr, nullptr, 0, 0, q_scale, k_scale, v_scale, stream,\n"
    << "                             programmatic_launch);\n"
    << "}\n\n";
}

// The packed-batch entry point, the older dense ones, and the workspace size.
void emit_other_entry_points(std::ostringstream& o) {
  o << "// A packed batch of `batch` sequences of their own lengths (FlashAttention's varlen layout): q and o\n"
    << "// [total_q, heads, head_dim], k and v [total_k, heads_kv, head_dim], contiguous, of `dtype`; sequence b\n"
    << "// holds rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1] of q and o and rows cu_seqlens_k[b] ..\n"
    << "// cu_seqlens_k[b + 1] of k and v (device arrays of batch + 1 ints, the first 0, the last total_q and\n"
    << "// total_k). max_seq_q and max_seq_k: the longest sequence's lengths (the grid covers them). Causal is\n"
    << "// bottom-right within each sequence; a sequence with more queries than keys (which the host cannot\n"
    << "// see without reading cu_seqlens) gets zeros in the rows that see no key. Rows of o outside every\n"
    << "// sequence are not written. Otherwise as evo_attention_forward_gqa; a file none of whose genomes was\n"
    << "// tuned on a packed batch refuses every call (cudaErrorInvalidValue).\n"
    << "extern \"C\" int evo_attention_forward_varlen(const void* q, const void* k, const void* v, void* o,\n"
    << "                                            const int* cu_seqlens_q, const int* cu_seqlens_k, int batch,\n"
    << "                                            int heads, int heads_kv, int max_seq_q, int max_seq_k,\n"
    << "                                            int total_q, int total_k, int head_dim, float softmax_scale,\n"
    << "                                            int causal, int dtype, cudaStream_t stream,\n"
    << "                                            int programmatic_launch) {\n"
    << "  if (cu_seqlens_q == nullptr || cu_seqlens_k == nullptr || dtype == 2) return cudaErrorInvalidValue;\n"
    << "  if (total_q < max_seq_q || total_k < max_seq_k || heads_kv <= 0) return cudaErrorInvalidValue;\n"
    << "  // The kernel indexes with 32-bit integers.\n"
    << "  if (static_cast<long long>(total_q) * heads * head_dim > 2147483647LL ||\n"
    << "      static_cast<long long>(total_k) * heads_kv * head_dim > 2147483647LL)\n"
    << "    return cudaErrorInvalidValue;\n"
    << "  return evo_export::forward(q, k, v, o, batch, heads, heads_kv, max_seq_q, max_seq_k, head_dim,\n"
    << "                             softmax_scale, causal, dtype, cu_seqlens_q, cu_seqlens_k, total_q, total_k,\n"
    << "                             nullptr, nullptr, nullptr, stream, programmatic_launch);\n"
    << "}\n\n"
    << "// As many K/V heads as query heads; otherwise as evo_attention_forward_gqa.\n"
    << "extern \"C\" int evo_attention_forward_dtype(const void* q, const void* k, const void* v, void* o,\n"
    << "                                           int batch, int heads, int seq_q, int seq_k, int head_dim,\n"
    << "                                           float softmax_scale, int causal, int dtype,\n"
    << "                                           cudaStream_t stream, int programmatic_launch) {\n"
    << "  return evo_attention_forward_gqa(q, k, v, o, batch, heads, heads, seq_q, seq_k, head_dim, softmax_scale,\n"
    << "                                   causal, dtype, stream, programmatic_launch);\n"
    << "}\n\n"
    << "// fp16 q, k and v of equal heads; otherwise as evo_attention_forward_gqa.\n"
    << "extern \"C\" int evo_attention_forward_ex(const void* q, const void* k, const void* v, void* o,\n"
    << "                                        int batch, int heads, int seq_q, int seq_k, int head_dim,\n"
    << "                                        float softmax_scale, int causal, cudaStream_t stream,\n"
    << "                                        int programmatic_launch) {\n"
    << "  return evo_attention_forward_gqa(q, k, v, o, batch, heads, heads, seq_q, seq_k, head_dim, softmax_scale,\n"
    << "                                   causal, 0, stream, programmatic_launch);\n"
    << "}\n\n"
    << "// The bytes of workspace a call of this shape takes (0: none), to size a workspace for\n"
    << "// evo_attention_bind_workspace: dtype as evo_attention_forward_gqa's (2 for\n"
    << "// evo_attention_forward_fp8's calls), varlen 1 for evo_attention_forward_varlen's (seq_q and seq_k\n"
    << "// the longest sequence's). -1 for a call this file refuses. No CUDA call.\n"
    << "extern \"C\" long long evo_attention_workspace_bytes(int batch, int heads, int heads_kv, int seq_q, int seq_k,\n"
    << "                                                 int head_dim, int causal, int dtype, int varlen) {\n"
    << "  if (varlen != 0 && varlen != 1) return -1;\n"
    << "  if (varlen == 0 && causal == 1 && seq_q > seq_k) return -1;  // as the dense entry points refuse it\n"
    << "  evo::FaParams p;\n"
    << "  const int variant = evo_export::plan_call(batch, heads, heads_kv, seq_q, seq_k, head_dim, causal, dtype,\n"
    << "                                            varlen, &p);\n"
    << "  if (variant < 0) return -1;\n"
    << "  return evo_export::variant_workspace_bytes(variant, dtype, causal, head_dim, varlen, p);\n"
    << "}\n\n"
    << "// fp16, equal heads, programmatic launch: the entry point most callers of the first exports used.\n"
    << "extern \"C\" int evo_attention_forward(const void* q, const void* k, const void* v, void* o,\n"
    << "                                     int batch, int heads, int seq_q, int seq_k, int head_dim,\n"
    << "                                     float softmax_scale, int causal, cudaStream_t stream) {\n"
    << "  return evo_attention_forward_gqa(q, k, v, o, batch, heads, heads, seq_q, seq_k, head_dim, softmax_scale,\n"
    << "                                   causal, 0, stream, 1);\n"
    << "}\n";
}

// Argument checks first (no CUDA call, so a bad shape is refused even without a driver), then the
// variant pick, then the launch. It never synchronizes.
std::string entry_points(const ExportTable&) {
  std::ostringstream o;
  emit_call_helpers(o);
  emit_dense_entry_points(o);
  emit_other_entry_points(o);
  return o.str();
}

}  // namespace

const FamilyExport& export_entry() {
  static const FamilyExport e{
      "attention",
      "evo_attention_forward",
      "evo::FaParams",
      {"DTYPE", "CAUSAL", "HEAD_DIM", "VARLEN"},
      {{"BATCH", "p.batch"}, {"HEADS", "p.heads"}, {"HEADS_KV", "p.heads_kv"}, {"SEQ_Q", "p.seq_q"},
       {"SEQ_K", "p.seq_k"}},
      "Entry point: `int evo_attention_forward_gqa(q, k, v, o, batch, heads, heads_kv, seq_q, seq_k, "
      "head_dim, softmax_scale, causal, dtype, stream, programmatic_launch)`: K and V of heads_kv heads "
      "(grouped-query attention), causal aligned bottom-right (row i sees keys up to i + seq_k - seq_q). "
      "It returns cudaErrorInvalidValue for a call it cannot serve (a head_dim or dtype the genomes do "
      "not serve, heads_kv not dividing heads, causal with seq_q > seq_k, null pointers, non-positive "
      "dimensions) and never synchronizes. `evo_attention_forward(q, k, v, o, batch, heads, seq_q, "
      "seq_k, head_dim, softmax_scale, causal, stream)` is the fp16, equal-heads call, launched as a "
      "programmatic dependent launch (overlapping the previous kernel's tail); "
      "`evo_attention_forward_ex(..., programmatic_launch)` takes 0 for a plain launch and "
      "`evo_attention_forward_dtype(..., dtype, stream, programmatic_launch)` a dtype. "
      "`evo_attention_forward_varlen(q, k, v, o, cu_seqlens_q, cu_seqlens_k, batch, heads, heads_kv, "
      "max_seq_q, max_seq_k, total_q, total_k, head_dim, softmax_scale, causal, dtype, stream, "
      "programmatic_launch)` takes a packed batch (FlashAttention's varlen layout, [tokens, heads, "
      "head_dim] with cumulative offsets), served by the genomes tuned on packed batches. "
      "`evo_attention_forward_fp8(q, k, v_t, o, q_scale, k_scale, v_scale, batch, heads, heads_kv, "
      "seq_q, seq_k, head_dim, softmax_scale, causal, stream, programmatic_launch)` takes e4m3 Q and K, "
      "V transposed ([batch, heads_kv, head_dim, seq_k rounded up to 16], the pad zeros, each 16 keys "
      "in the order 0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15) and per-(batch, head) float "
      "scales, and writes a bf16 O; `evo_attention_quantize_fp8(x, x_dtype, out, scales, batch, heads, "
      "seq, head_dim, transpose, stream)` makes those from fp16 or bf16 tensors (scale = the head's "
      "largest magnitude / 448; 1 for an all-zero head; NaN for a head holding NaN or an infinity). "
      "`evo_attention_workspace_bytes(batch, heads, heads_kv, seq_q, seq_k, head_dim, causal, dtype, "
      "varlen)` gives the workspace a call takes, and `evo_attention_bind_workspace(stream, workspace, "
      "bytes)` makes every later launch on that stream use the caller's zeroed buffer instead of the "
      "library's, so that a call captured into a CUDA graph adds its kernel alone.",
      &bench_fields,
      &launch_arguments,
      &dispatch,
      &entry_points,
  };
  return e;
}

}  // namespace evo::attention

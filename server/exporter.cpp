// Source generation for the exported kernel. The layout of the emitted .cu:
//   1. a header comment: what it is, which genome(s), how to build it;
//   2. the kernel template's source, verbatim (it includes only CUDA toolkit headers);
//   3. per genome, a struct VariantN<DTYPE, CAUSAL, HEAD_DIM> holding the genes, the derived values and
//      the space's constraints as constexpr values, and a launch() that computes the grid, block
//      and shared memory from the space's launch formulas. An invalid (genome, head dim) pair is
//      never instantiated (if constexpr), so the kernel's own static checks never fire;
//   4. the C entry points (evo_attention_forward for fp16, evo_attention_forward_dtype for any
//      dtype of the table): argument checks first (no CUDA call, so a bad shape is refused even
//      without a driver), then the variant pick, then the launch. It never synchronizes.
#include "exporter.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "device_limits.h"
#include "errors.h"
#include "resident_time.h"
#include "search_space.h"
#include "template_registry.h"

namespace evo {
namespace {

// Names whose value is known only at the call; everything else is a compile-time constant.
const std::set<std::string> kRuntimeNames = {"BATCH", "HEADS", "SEQ_Q", "SEQ_K"};

// A space formula as C++ source (Expression::cxx).
struct CxxFormula {
  std::string name;
  std::string code;
  bool runtime = false;  // reads a runtime name, directly or through a derived value
};

// The parts of a space the exporter emits, read by SearchSpace (the one reader of a space JSON).
struct SpaceForExport {
  std::string id;
  std::vector<std::string> gene_names;
  std::vector<int> head_dims;
  std::vector<DType> dtypes;  // the space's "dtypes": those its kernel serves
  std::vector<CxxFormula> derived;
  std::vector<CxxFormula> constraints;
  std::map<std::string, CxxFormula> launch;  // threads, grid_x, grid_y, grid_z, smem_bytes, ...
  bool has_workspace = false;                 // launch.workspace_bytes: a per-stream scratch buffer
  bool has_tensor_maps = false;               // launch.tensor_map_box_rows: encode q/k/v/o maps first
  std::string kernel_pattern;
};

// Throws InputError ("bad search space: ...") for a space SearchSpace refuses.
SpaceForExport read_space(const KernelTemplate& t) {
  const SearchSpace space = SearchSpace::from_json(t.space_json);
  SpaceForExport s;
  s.id = std::string(t.id);
  std::set<std::string> runtime = kRuntimeNames;
  auto emitted = [&](const Formula& f) {
    CxxFormula out{f.name, f.expr.cxx(), false};
    for (const auto& name : f.expr.identifiers()) out.runtime = out.runtime || runtime.count(name) > 0;
    return out;
  };
  for (const auto& g : space.genes()) s.gene_names.push_back(g.name);
  s.head_dims = space.head_dims();
  s.dtypes = space.dtypes();
  for (const auto& d : space.derived()) {
    s.derived.push_back(emitted(d));
    if (s.derived.back().runtime) runtime.insert(d.name);
  }
  for (const auto& c : space.constraints()) s.constraints.push_back(emitted(c));
  for (const auto& l : space.launch_formulas()) s.launch.emplace(l.name, emitted(l));
  s.has_workspace = s.launch.count("workspace_bytes") > 0;
  s.has_tensor_maps = s.launch.count("tensor_map_box_rows") > 0;
  s.kernel_pattern = space.kernel_pattern();
  return s;
}

// "evo::fa_s512_v3_kernel<{DTYPE}, {CAUSAL}, {HEAD_DIM}, {BLOCK_M}, ...>" with the genes baked in;
// a derived value by its name, the variant's constant.
std::string kernel_name(const SpaceForExport& s, const Genome& g) {
  std::map<std::string, std::string> values = {
      {"DTYPE", "DTYPE_"}, {"CAUSAL", "CAUSAL_"}, {"HEAD_DIM", "HEAD_DIM_"}};
  for (const auto& d : s.derived)
    if (!d.runtime) values[d.name] = d.name;
  for (const auto& [name, value] : g.genes()) values[name] = std::to_string(value);
  std::string out;
  const std::string& p = s.kernel_pattern;
  for (size_t i = 0; i < p.size();) {
    if (p[i] != '{') {
      out += p[i++];
      continue;
    }
    const size_t close = p.find('}', i);
    if (close == std::string::npos) throw InputError("kernel name pattern '" + p + "' has an unclosed '{'");
    const std::string key = p.substr(i + 1, close - i - 1);
    auto it = values.find(key);
    if (it == values.end()) throw InputError("kernel name pattern '" + p + "' names unknown '" + key + "'");
    out += it->second;
    i = close + 1;
  }
  return out;
}

void check_genome(const SpaceForExport& s, const Genome& g) {
  if (g.template_id() != s.id)
    throw InputError("genome of template '" + g.template_id() + "' cannot be exported with '" + s.id + "'");
  std::set<std::string> have;
  for (const auto& [name, value] : g.genes()) {
    if (std::find(s.gene_names.begin(), s.gene_names.end(), name) == s.gene_names.end())
      throw InputError("genome has gene '" + name + "' that " + s.id + " does not know");
    have.insert(name);
  }
  for (const auto& name : s.gene_names)
    if (!have.count(name)) throw InputError("genome lacks gene '" + name + "' of " + s.id);
}

// A bucket's shapes must be of dtypes the kernel serves: the table has no instantiation for others.
void check_dtypes(const SpaceForExport& s, const ExportVariant& v) {
  for (const auto& shape : v.shapes) {
    if (std::find(s.dtypes.begin(), s.dtypes.end(), shape.dtype) != s.dtypes.end()) continue;
    std::string served;
    for (DType d : s.dtypes) served += (served.empty() ? "" : ", ") + std::string(dtype_name(d));
    throw InputError("cannot export shape '" + shape.text() + "'" + (v.run_id.empty() ? "" : " of " + v.run_id) +
                     ": dtype " + std::string(dtype_name(shape.dtype)) + " is not served by " + s.id +
                     " (it serves " + served + ")");
  }
}

// The scratch buffer of kernels whose space has a workspace_bytes formula (split-KV: blocks merge
// partial rows through it). The kernel leaves it as it found it (zeroed counters), so one buffer
// per (device, stream) serves every launch on that stream; allocation and zeroing are
// stream-ordered, so the entry point still never synchronizes.
void emit_workspace(std::ostringstream& o) {
  o << "struct Workspace {\n"
    << "  int device;\n"
    << "  cudaStream_t stream;\n"
    << "  void* ptr;\n"
    << "  long long bytes;\n"
    << "};\n"
    << "static std::mutex workspace_mutex;\n"
    << "static std::vector<Workspace> workspaces;\n\n"
    << "static cudaError_t workspace_for(cudaStream_t stream, long long bytes, void** out) {\n"
    << "  int device = 0;\n"
    << "  cudaError_t e = cudaGetDevice(&device);\n"
    << "  if (e != cudaSuccess) return e;\n"
    << "  std::lock_guard<std::mutex> lock(workspace_mutex);\n"
    << "  Workspace* w = nullptr;\n"
    << "  for (Workspace& x : workspaces)\n"
    << "    if (x.device == device && x.stream == stream) w = &x;\n"
    << "  if (w == nullptr) {\n"
    << "    workspaces.push_back(Workspace{device, stream, nullptr, 0});\n"
    << "    w = &workspaces.back();\n"
    << "  }\n"
    << "  if (w->bytes < bytes) {\n"
    << "    void* fresh = nullptr;\n"
    << "    e = cudaMallocAsync(&fresh, static_cast<size_t>(bytes), stream);\n"
    << "    if (e != cudaSuccess) return e;\n"
    << "    e = cudaMemsetAsync(fresh, 0, static_cast<size_t>(bytes), stream);\n"
    << "    if (e != cudaSuccess) {\n"
    << "      cudaFreeAsync(fresh, stream);\n"
    << "      return e;\n"
    << "    }\n"
    << "    // Launches already queued on this stream finish with the old buffer before it is freed.\n"
    << "    if (w->ptr != nullptr) cudaFreeAsync(w->ptr, stream);\n"
    << "    w->ptr = fresh;\n"
    << "    w->bytes = bytes;\n"
    << "  }\n"
    << "  *out = w->ptr;\n"
    << "  return cudaSuccess;\n"
    << "}\n\n";
}

// Everything a (genome, DTYPE, CAUSAL, HEAD_DIM) instantiation knows at compile time.
void emit_variant(std::ostringstream& o, const SpaceForExport& s, const Genome& g, size_t index,
                  int64_t smem_limit, int sm_arch) {
  o << "// Variant " << index << ": " << g.text() << "\n"
    << "template <int DTYPE_, int CAUSAL_, int HEAD_DIM_>\n"
    << "struct Variant" << index << " {\n"
    << "  static constexpr long long DTYPE = DTYPE_;\n"
    << "  static constexpr long long CAUSAL = CAUSAL_;\n"
    << "  static constexpr long long HEAD_DIM = HEAD_DIM_;\n"
    << "  static constexpr long long SMEM_LIMIT = " << smem_limit << "LL;\n"
    << "  static constexpr long long SM_ARCH = " << sm_arch << "LL;  // the target it was measured on\n";
  for (const auto& [name, value] : g.genes())
    o << "  static constexpr long long " << name << " = " << value << "LL;\n";
  for (const auto& d : s.derived)
    if (!d.runtime) o << "  static constexpr long long " << d.name << " = " << d.code << ";\n";
  o << "  // The search space's constraints that do not depend on the call's shape.\n"
    << "  static constexpr bool kValid = true";
  for (const auto& c : s.constraints)
    if (!c.runtime) o << "\n      && (" << c.code << ")  /* " << c.name << " */";
  o << ";\n\n"
    << "  static int launch(const evo::FaParams& p, cudaStream_t stream, bool programmatic) {\n"
    << "    if constexpr (!kValid) {\n"
    << "      (void)p; (void)stream; (void)programmatic;\n"
    << "      return cudaErrorInvalidValue;\n"
    << "    } else {\n"
    << "      const long long BATCH = p.batch, HEADS = p.heads, SEQ_Q = p.seq_q, SEQ_K = p.seq_k;\n"
    << "      (void)BATCH; (void)HEADS; (void)SEQ_Q; (void)SEQ_K;\n";
  for (const auto& d : s.derived)
    if (d.runtime) o << "      const long long " << d.name << " = " << d.code << ";\n";
  for (const auto& c : s.constraints)
    if (c.runtime)
      o << "      if (!(" << c.code << ")) return cudaErrorInvalidValue;  // " << c.name << "\n";
  o << "      const long long grid_x = " << s.launch.at("grid_x").code << ";\n"
    << "      const long long grid_y = " << s.launch.at("grid_y").code << ";\n"
    << "      const long long grid_z = " << s.launch.at("grid_z").code << ";\n"
    << "      const long long threads = " << s.launch.at("threads").code << ";\n"
    << "      const long long smem = " << s.launch.at("smem_bytes").code << ";\n"
    << "      if (grid_x < 1 || grid_x > 2147483647LL || grid_y < 1 || grid_y > 65535LL ||\n"
    << "          grid_z < 1 || grid_z > 65535LL || threads < 1 || threads > 1024LL || smem < 0 ||\n"
    << "          smem > SMEM_LIMIT)\n"
    << "        return cudaErrorInvalidValue;\n"
    << "      const auto kernel = " << kernel_name(s, g) << ";\n";
  if (s.has_workspace || s.has_tensor_maps)
    o << "      evo::FaParams args = p;\n";
  else
    o << "      const evo::FaParams& args = p;\n";
  if (s.has_workspace)
    o << "      const long long workspace_bytes = " << s.launch.at("workspace_bytes").code << ";\n"
      << "      if (workspace_bytes > 0) {\n"
      << "        const cudaError_t e = workspace_for(stream, workspace_bytes, &args.workspace);\n"
      << "        if (e != cudaSuccess) return e;\n"
      << "      }\n";
  if (s.has_tensor_maps) {
    // Q and O boxes are as tall as K and V ones where the space gives no formula of their own.
    const auto q_rows = s.launch.find("tensor_map_q_box_rows");
    o << "      const long long tensor_map_box_rows = "
      << s.launch.at("tensor_map_box_rows").code << ";\n"
      << "      const long long tensor_map_q_box_rows = "
      << (q_rows != s.launch.end() ? q_rows->second.code : "tensor_map_box_rows") << ";\n"
      << "      if (tensor_map_box_rows > 0) {  // loads through TMA, in boxes of those heights\n"
      << "        const cudaError_t e = evo::encode_attention_tensor_maps(\n"
      << "            args, static_cast<evo::DType>(DTYPE_), HEAD_DIM_, static_cast<int>(tensor_map_box_rows),\n"
      << "            static_cast<int>(tensor_map_q_box_rows));\n"
      << "        if (e != cudaSuccess) return e;\n"
      << "      }\n";
  }
  o
    << "      if (smem > " << kSmemPerBlockDefault << ") {\n"
    << "        // Above this a kernel must opt in to dynamic shared memory; once per size suffices.\n"
    << "        static std::atomic<long long> raised{0};\n"
    << "        if (raised.load() < smem) {\n"
    << "          const cudaError_t e = cudaFuncSetAttribute(\n"
    << "              kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));\n"
    << "          if (e != cudaSuccess) return e;\n"
    << "          raised.store(smem);\n"
    << "        }\n"
    << "      }\n"
    << "      // Programmatic: this launch may begin while the stream's previous kernel finishes; the\n"
    << "      // kernel waits for that kernel's end (griddepcontrol.wait) before it touches memory.\n"
    << "      cudaLaunchAttribute overlap{};\n"
    << "      overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;\n"
    << "      overlap.val.programmaticStreamSerializationAllowed = 1;\n"
    << "      cudaLaunchConfig_t config{};\n"
    << "      config.gridDim = dim3(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y),\n"
    << "                            static_cast<unsigned>(grid_z));\n"
    << "      config.blockDim = dim3(static_cast<unsigned>(threads));\n"
    << "      config.dynamicSmemBytes = static_cast<size_t>(smem);\n"
    << "      config.stream = stream;\n"
    << "      config.attrs = &overlap;\n"
    << "      config.numAttrs = programmatic ? 1 : 0;\n"
    << "      return cudaLaunchKernelEx(&config, kernel, args);\n"
    << "    }\n"
    << "  }\n"
    << "};\n\n";
}

// The dtypes a variant is instantiated for: those of the shapes it was tuned and checked on (fp16
// where it has none). A call of another dtype is refused rather than run on a genome whose
// correctness no gate saw in that dtype.
std::vector<DType> tuned_dtypes(const ExportVariant& v) {
  std::vector<DType> out;
  for (const auto& shape : v.shapes)
    if (std::find(out.begin(), out.end(), shape.dtype) == out.end()) out.push_back(shape.dtype);
  if (out.empty()) out.push_back(DType::kF16);
  return out;
}

// Every (variant, dtype, causal, head_dim) instantiation the table holds, as one `if` line each:
// `body` is what the line does with "VariantN<DTYPE, CAUSAL, HEAD_DIM>".
void emit_instantiations(std::ostringstream& o, const SpaceForExport& s,
                         const std::vector<ExportVariant>& variants, const std::string& body) {
  for (size_t v = 0; v < variants.size(); ++v)
    for (DType d : tuned_dtypes(variants[v]))
      for (int hd : s.head_dims)
        for (int causal = 0; causal < 2; ++causal) {
          const int dtype = static_cast<int>(d);
          o << "  if (variant == " << v << " && dtype == " << dtype << " && causal == " << causal
            << " && head_dim == " << hd << ") return Variant" << v << "<" << dtype << ", " << causal << ", "
            << hd << ">::" << body << ";\n";
        }
}

void emit_dispatch(std::ostringstream& o, const SpaceForExport& s,
                   const std::vector<ExportVariant>& variants) {
  const size_t n = variants.size();
  // serves(): which (variant, dtype, causal, head_dim) instantiations exist.
  o << "static bool serves(int variant, int dtype, int causal, int head_dim) {\n";
  emit_instantiations(o, s, variants, "kValid");
  o << "  return false;\n}\n\n";

  o << "static int launch_variant(int variant, int dtype, int causal, int head_dim, const evo::FaParams& p,\n"
    << "                          cudaStream_t stream, bool programmatic) {\n";
  emit_instantiations(o, s, variants, "launch(p, stream, programmatic)");
  o << "  return cudaErrorInvalidValue;\n}\n\n";

  if (n == 1) {
    o << "static int pick_variant(int, int, int, int, int head_dim, int causal, int dtype) {\n"
      << "  return serves(0, dtype, causal, head_dim) ? 0 : -1;\n}\n\n";
    return;
  }
  o << "// Shape buckets: each exported shape and the variant that won it.\n"
    << "struct Bucket { int batch, heads, seq_q, seq_k, head_dim, causal, dtype, variant; };\n"
    << "static const Bucket kBuckets[] = {\n";
  for (size_t v = 0; v < n; ++v)
    for (const auto& sh : variants[v].shapes)
      o << "  {" << sh.batch << ", " << sh.heads << ", " << sh.seq_q << ", " << sh.seq_k << ", "
        << sh.head_dim << ", " << (sh.causal ? 1 : 0) << ", " << static_cast<int>(sh.dtype) << ", " << v << "},\n";
  o << "};\n\n"
    << "static int pick_variant(int batch, int heads, int seq_q, int seq_k, int head_dim, int causal, int dtype) {\n"
    << "  int nearest = -1;\n"
    << "  double nearest_distance = 0.0;\n"
    << "  for (const Bucket& b : kBuckets) {\n"
    << "    if (b.head_dim != head_dim || b.causal != causal || b.dtype != dtype ||\n"
    << "        !serves(b.variant, dtype, causal, head_dim))\n"
    << "      continue;\n"
    << "    if (b.batch == batch && b.heads == heads && b.seq_q == seq_q && b.seq_k == seq_k)\n"
    << "      return b.variant;\n"
    << "    // Nearest sequence length on a log scale: tiles that suit 512 suit 600 better than 4096.\n"
    << "    const double distance = std::fabs(std::log(static_cast<double>(b.seq_k) / seq_k));\n"
    << "    if (nearest < 0 || distance < nearest_distance) {\n"
    << "      nearest = b.variant;\n"
    << "      nearest_distance = distance;\n"
    << "    }\n"
    << "  }\n"
    << "  if (nearest >= 0) return nearest;\n"
    << "  for (int v = 0; v < " << n << "; ++v)\n"
    << "    if (serves(v, dtype, causal, head_dim)) return v;\n"
    << "  (void)batch; (void)heads; (void)seq_q;\n"
    << "  return -1;\n}\n\n";
}

void emit_entry_point(std::ostringstream& o) {
  o << "}  // namespace evo_export\n\n"
    << "// q, k, v: [batch, heads, seq_q|seq_k, head_dim] contiguous, of `dtype`; o: [batch, heads, seq_q,\n"
    << "// head_dim] of `dtype`. dtype: 0 fp16 (__half), 1 bf16 (__nv_bfloat16), the values of evo::DType.\n"
    << "// Returns 0 (cudaSuccess) or the CUDA error / cudaErrorInvalidValue for a shape or dtype this\n"
    << "// file cannot serve (a dtype none of its genomes was tuned for). Launches on `stream` and never\n"
    << "// synchronizes.\n"
    << "// programmatic_launch 1 (what evo_attention_forward does): a programmatic dependent launch, which\n"
    << "// may begin while the stream's previous kernel finishes, so that its start-up overlaps that\n"
    << "// kernel's tail; the kernel reads and writes nothing before the previous kernel has ended.\n"
    << "// 0: a plain launch, which starts only after the previous kernel has ended.\n"
    << "extern \"C\" int evo_attention_forward_dtype(const void* q, const void* k, const void* v, void* o,\n"
    << "                                           int batch, int heads, int seq_q, int seq_k, int head_dim,\n"
    << "                                           float softmax_scale, int causal, int dtype,\n"
    << "                                           cudaStream_t stream, int programmatic_launch) {\n"
    << "  // Every check here runs before any CUDA call: a bad call is refused even without a GPU.\n"
    << "  if (q == nullptr || k == nullptr || v == nullptr || o == nullptr) return cudaErrorInvalidValue;\n"
    << "  if (batch <= 0 || heads <= 0 || seq_q <= 0 || seq_k <= 0 || head_dim <= 0)\n"
    << "    return cudaErrorInvalidValue;\n"
    << "  if (causal != 0 && causal != 1) return cudaErrorInvalidValue;\n"
    << "  if (programmatic_launch != 0 && programmatic_launch != 1) return cudaErrorInvalidValue;\n"
    << "  // The causal mask aligns query i with key i; unequal lengths have no agreed meaning here.\n"
    << "  if (causal == 1 && seq_q != seq_k) return cudaErrorInvalidValue;\n"
    << "  if (!std::isfinite(softmax_scale)) return cudaErrorInvalidValue;\n"
    << "  // The kernel indexes with 32-bit integers.\n"
    << "  const long long longest = seq_q > seq_k ? seq_q : seq_k;\n"
    << "  if (static_cast<long long>(batch) * heads * longest * head_dim > 2147483647LL)\n"
    << "    return cudaErrorInvalidValue;\n"
    << "  const int variant = evo_export::pick_variant(batch, heads, seq_q, seq_k, head_dim, causal, dtype);\n"
    << "  if (variant < 0) return cudaErrorInvalidValue;  // no exported genome serves this dtype and head_dim\n"
    << "  evo::FaParams p{};  // value-initialised: a field this file does not set (workspace) is null\n"
    << "  p.q = q;\n"
    << "  p.k = k;\n"
    << "  p.v = v;\n"
    << "  p.o = o;\n"
    << "  p.batch = batch;\n"
    << "  p.heads = heads;\n"
    << "  p.seq_q = seq_q;\n"
    << "  p.seq_k = seq_k;\n"
    << "  p.softmax_scale = softmax_scale;\n"
    << "  return evo_export::launch_variant(variant, dtype, causal, head_dim, p, stream,\n"
    << "                                    programmatic_launch == 1);\n"
    << "}\n\n"
    << "// fp16 q, k, v and o; otherwise as evo_attention_forward_dtype.\n"
    << "extern \"C\" int evo_attention_forward_ex(const void* q, const void* k, const void* v, void* o,\n"
    << "                                        int batch, int heads, int seq_q, int seq_k, int head_dim,\n"
    << "                                        float softmax_scale, int causal, cudaStream_t stream,\n"
    << "                                        int programmatic_launch) {\n"
    << "  return evo_attention_forward_dtype(q, k, v, o, batch, heads, seq_q, seq_k, head_dim, softmax_scale,\n"
    << "                                     causal, 0, stream, programmatic_launch);\n"
    << "}\n\n"
    << "// fp16, programmatic launch: the entry point most callers want.\n"
    << "extern \"C\" int evo_attention_forward(const void* q, const void* k, const void* v, void* o,\n"
    << "                                     int batch, int heads, int seq_q, int seq_k, int head_dim,\n"
    << "                                     float softmax_scale, int causal, cudaStream_t stream) {\n"
    << "  return evo_attention_forward_dtype(q, k, v, o, batch, heads, seq_q, seq_k, head_dim, softmax_scale,\n"
    << "                                     causal, 0, stream, 1);\n"
    << "}\n";
}

// The template's source as a part of a larger file: a `#pragma once` there would only warn.
std::string template_body(std::string_view source) {
  std::istringstream in{std::string(source)};
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.rfind("#pragma once", 0) == 0) continue;
    out += line + "\n";
  }
  return out;
}

int64_t smem_limit_for(const std::vector<ExportVariant>& variants, const ExportOptions& options) {
  if (options.smem_limit > 0) return options.smem_limit;
  int64_t limit = 0;
  for (const auto& v : variants) {
    const int64_t d = v.evidence.device().smem_per_block_optin();
    if (d > 0 && (limit == 0 || d < limit)) limit = d;  // the tightest device that measured
  }
  return limit > 0 ? limit : kDefaultSmemLimit;
}

std::string arch_of(const std::vector<ExportVariant>& variants) {
  for (const auto& v : variants)
    if (!v.evidence.device().arch().empty()) return v.evidence.device().arch();
  return "sm_90a";
}

}  // namespace

v1::ExportResponse export_dispatch_table(const std::vector<ExportVariant>& variants,
                                         const ExportOptions& options) {
  if (variants.empty()) throw InputError("nothing to export: no genome given");
  const std::string& template_id = variants.front().genome.template_id();
  const KernelTemplate* t = find_template(template_id);
  if (t == nullptr) throw InputError("cannot export unknown template '" + template_id + "'");
  return export_dispatch_table(*t, variants, options);
}

v1::ExportResponse export_dispatch_table(const KernelTemplate& tmpl, const std::vector<ExportVariant>& variants,
                                         const ExportOptions& options) {
  if (variants.empty()) throw InputError("nothing to export: no genome given");
  const KernelTemplate* t = &tmpl;
  const SpaceForExport space = read_space(*t);
  for (const auto& v : variants) {
    check_genome(space, v.genome);
    check_dtypes(space, v);
  }
  const int64_t smem_limit = smem_limit_for(variants, options);
  const std::string arch = arch_of(variants);

  std::ostringstream o;
  o << "// Generated by evo (evoctl export): the " << space.id << " attention kernel with "
    << (variants.size() == 1 ? "the winning genome" : "a dispatch table of winning genomes")
    << " baked in.\n"
    << "// Self-contained: it includes only CUDA toolkit and C++ standard headers. Build:\n"
    << "//   " << exported_build_command("kernel.cu", "libkernel.so", arch) << "\n"
    << "// Call evo_attention_forward (bottom of this file) from any program, e.g. ctypes.\n";
  for (const auto& v : variants)
    o << "//   " << (v.run_id.empty() ? "" : "run " + v.run_id + ": ") << v.genome.text() << (v.evidence.estimated() ? "  (ESTIMATED: chosen by the model evaluator, not measured)" : "")
      << "\n";
  o << "#include <atomic>\n#include <cmath>\n#include <mutex>\n#include <vector>\n\n"
    << "#include <cuda_fp16.h>\n#include <cuda_runtime.h>\n\n"
    << "// ---------------------------------------------------------------- kernel template: "
    << space.id << "\n"
    << template_body(t->source) << "\n";
  if (!t->family->host_source.empty())
    o << "// ---------------------------------------------------------------- its host support\n"
      << template_body(t->family->host_source) << "\n";
  o    << "// ---------------------------------------------------------------- the exported variants\n"
    << "namespace evo_export {\n\n"
    << "constexpr long long evo_min(long long a, long long b) { return a < b ? a : b; }\n"
    << "constexpr long long evo_max(long long a, long long b) { return a > b ? a : b; }\n\n";
  if (space.has_workspace) emit_workspace(o);
  const int sm_arch = sm_arch_number(arch);
  for (size_t i = 0; i < variants.size(); ++i)
    emit_variant(o, space, variants[i].genome, i, smem_limit, sm_arch);
  emit_dispatch(o, space, variants);
  emit_entry_point(o);

  v1::ExportResponse response;
  response.set_source(o.str());
  response.set_report(export_report(variants, arch, options.source_name));
  std::string genomes;
  for (const auto& v : variants) {
    if (!genomes.empty()) genomes += ";";
    genomes += v.genome.text();
  }
  response.set_genome(genomes);
  response.set_arch(arch);
  for (const auto& v : variants) {
    v1::ExportBucket* b = response.add_buckets();
    b->set_run_id(v.run_id);
    b->set_genome(v.genome.text());
    for (const auto& sh : v.shapes) b->add_shapes(sh.text());
    b->set_fitness_us(ranked_fitness_us(v.fitness_inputs, v.evidence));
    b->set_estimated(v.evidence.estimated());
  }
  return response;
}

v1::ExportResponse export_standalone(const Genome& g, const std::vector<ProblemShape>& shapes,
                                     const v1::Evaluation& evidence, const ExportOptions& options) {
  return export_dispatch_table({ExportVariant{g, shapes, evidence, ""}}, options);
}

}  // namespace evo

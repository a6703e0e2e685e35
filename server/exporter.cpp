// Source generation for the exported kernel. The layout of the emitted .cu:
//   1. a header comment: what it is, which genome(s), how to build it;
//   2. the kernel template's source, verbatim (it includes only CUDA toolkit headers);
//   3. per genome, a struct VariantN templated on the family's compile-time problem variables
//      (attention: VariantN<DTYPE, CAUSAL, HEAD_DIM>) holding the genes, the derived values and
//      the space's constraints as constexpr values, and a launch() that computes the grid, block
//      and shared memory from the space's launch formulas. An invalid instantiation never
//      compiles its launch (if constexpr), so the kernel's own static checks never fire;
//   4. the family's dispatch (which variant serves a call) and its C entry points
//      (kernel_templates/<family>/export_entry.cpp: FamilyExport). It never synchronizes.
#include "exporter.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "device_limits.h"
#include "errors.h"
#include "genome_proto.h"
#include "resident_time.h"
#include "search_space.h"
#include "template_registry.h"

namespace evo {
namespace {


// A space formula as C++ source (Expression::cxx).
struct CxxFormula {
  std::string name;
  std::string code;
  bool runtime = false;  // reads a runtime name, directly or through a derived value
};

// The parts of a space the exporter emits, read by SearchSpace (the one reader of a space JSON).
struct SpaceForExport {
  ExportSpace served;  // id and served values: what the family's text reads
  const FamilyExport* family = nullptr;
  std::string id;
  std::vector<std::string> gene_names;
  std::vector<CxxFormula> derived;
  std::vector<CxxFormula> constraints;
  std::map<std::string, CxxFormula> launch;  // threads, grid_x, grid_y, grid_z, smem_bytes, ...
  bool has_workspace = false;                 // launch.workspace_bytes: a per-stream scratch buffer
  std::string kernel_pattern;
};

// Throws InputError ("bad search space: ...") for a space SearchSpace refuses.
SpaceForExport read_space(const KernelTemplate& t) {
  const SearchSpace space = SearchSpace::from_json(t.space_json);
  SpaceForExport s;
  s.family = &t.family->export_entry();
  s.id = std::string(t.id);
  // Names whose value is known only at the call; everything else is a compile-time constant.
  std::set<std::string> runtime;
  for (const auto& v : s.family->runtime) runtime.insert(v.name);
  auto emitted = [&](const Formula& f) {
    CxxFormula out{f.name, f.expr.cxx(), false};
    for (const auto& name : f.expr.identifiers()) out.runtime = out.runtime || runtime.count(name) > 0;
    return out;
  };
  for (const auto& g : space.genes()) s.gene_names.push_back(g.name);
  s.served = ExportSpace{s.id, space.served()};
  for (const auto& d : space.derived()) {
    s.derived.push_back(emitted(d));
    if (s.derived.back().runtime) runtime.insert(d.name);
  }
  for (const auto& c : space.constraints()) s.constraints.push_back(emitted(c));
  for (const auto& l : space.launch_formulas()) s.launch.emplace(l.name, emitted(l));
  s.has_workspace = s.launch.count("workspace_bytes") > 0;
  s.kernel_pattern = space.kernel_pattern();
  return s;
}

// "evo::fa_s512_v3_kernel<{DTYPE}, {CAUSAL}, {HEAD_DIM}, {BLOCK_M}, ...>" with the genes baked in;
// a compile-time problem variable by its template parameter, a derived value by its name, the
// variant's constant.
std::string kernel_name(const SpaceForExport& s, const Genome& g) {
  std::map<std::string, std::string> values;
  for (const auto& name : s.family->compile_time) values[name] = name + "_";
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

// A bucket's problems must be ones the kernel serves: the table has no instantiation for others.
void check_served(const SpaceForExport& s, const ExportVariant& v) {
  for (const auto& problem : v.shapes) {
    const std::string why = unserved(s.served.served, problem, s.id);
    if (why.empty()) continue;
    throw InputError("cannot export shape '" + problem.text() + "'" + (v.run_id.empty() ? "" : " of " + v.run_id) +
                     ": " + why);
  }
}

// The scratch buffer of kernels whose space has a workspace_bytes formula (split-KV: blocks merge
// partial rows through it). The kernel leaves it as it found it (zeroed counters), so one buffer
// per (device, stream) serves every launch on that stream; allocation and zeroing are
// stream-ordered, so the entry point still never synchronizes. A launch captured into a CUDA graph
// gets a buffer of the graph's own instead (allocated, zeroed and freed by the graph's nodes on
// each replay): a captured allocation is valid only while the graph runs, so it must never be
// handed to a later launch outside it, and the per-stream buffers are not touched by a capture.
// Serving one launch only, it zeroes only what that launch needs zero (workspace_zeroed_bytes:
// its counters), which keeps the replay's memset small however large the partials are. A buffer
// the caller binds to a stream (bind_workspace_entry) comes before both: every launch on that
// stream, captured or not, takes it, so a captured graph holds no allocation, memset or free.
void emit_workspace(std::ostringstream& o) {
  o << "struct Workspace {\n"
    << "  int device;\n"
    << "  cudaStream_t stream;\n"
    << "  void* ptr;\n"
    << "  long long bytes;\n"
    << "};\n"
    << "static std::mutex workspace_mutex;\n"
    << "static std::vector<Workspace> workspaces;  // the library's own, one per (device, stream)\n"
    << "static std::vector<Workspace> bound_workspaces;  // the caller's, bound to a stream\n\n"
    << "// A launch's hold on its workspace: a graph-owned buffer is freed, in stream order, once the\n"
    << "// launch that used it has been enqueued (the lease goes out of scope after it).\n"
    << "struct WorkspaceLease {\n"
    << "  void* graph_owned = nullptr;\n"
    << "  cudaStream_t stream = nullptr;\n"
    << "  WorkspaceLease() = default;\n"
    << "  WorkspaceLease(const WorkspaceLease&) = delete;\n"
    << "  WorkspaceLease& operator=(const WorkspaceLease&) = delete;\n"
    << "  ~WorkspaceLease() {\n"
    << "    if (graph_owned != nullptr) cudaFreeAsync(graph_owned, stream);\n"
    << "  }\n"
    << "};\n\n"
    << "// A buffer of `bytes` whose first `zeroed` bytes are zero.\n"
    << "static cudaError_t zeroed_buffer(cudaStream_t stream, long long bytes, long long zeroed, void** out) {\n"
    << "  void* fresh = nullptr;\n"
    << "  cudaError_t e = cudaMallocAsync(&fresh, static_cast<size_t>(bytes), stream);\n"
    << "  if (e != cudaSuccess) return e;\n"
    << "  e = cudaMemsetAsync(fresh, 0, static_cast<size_t>(zeroed), stream);\n"
    << "  if (e != cudaSuccess) {\n"
    << "    cudaFreeAsync(fresh, stream);\n"
    << "    return e;\n"
    << "  }\n"
    << "  *out = fresh;\n"
    << "  return cudaSuccess;\n"
    << "}\n\n"
    << "static cudaError_t workspace_for(cudaStream_t stream, long long bytes, long long zeroed, void** out,\n"
    << "                                 WorkspaceLease& lease) {\n"
    << "  int device = 0;\n"
    << "  cudaError_t e = cudaGetDevice(&device);\n"
    << "  if (e != cudaSuccess) return e;\n"
    << "  {\n"
    << "    std::lock_guard<std::mutex> lock(workspace_mutex);\n"
    << "    for (const Workspace& x : bound_workspaces)\n"
    << "      if (x.device == device && x.stream == stream) {\n"
    << "        if (x.bytes < bytes) return cudaErrorInvalidValue;  // smaller than the call needs\n"
    << "        *out = x.ptr;\n"
    << "        return cudaSuccess;\n"
    << "      }\n"
    << "  }\n"
    << "  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;\n"
    << "  e = cudaStreamIsCapturing(stream, &capture);\n"
    << "  if (e != cudaSuccess) return e;\n"
    << "  if (capture != cudaStreamCaptureStatusNone) {\n"
    << "    e = zeroed_buffer(stream, bytes, zeroed, out);\n"
    << "    if (e != cudaSuccess) return e;\n"
    << "    lease.graph_owned = *out;\n"
    << "    lease.stream = stream;\n"
    << "    return cudaSuccess;\n"
    << "  }\n"
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
    << "    // Every byte: later launches of other shapes and genomes share the buffer.\n"
    << "    e = zeroed_buffer(stream, bytes, bytes, &fresh);\n"
    << "    if (e != cudaSuccess) return e;\n"
    << "    // Launches already queued on this stream finish with the old buffer before it is freed.\n"
    << "    if (w->ptr != nullptr) cudaFreeAsync(w->ptr, stream);\n"
    << "    w->ptr = fresh;\n"
    << "    w->bytes = bytes;\n"
    << "  }\n"
    << "  *out = w->ptr;\n"
    << "  return cudaSuccess;\n"
    << "}\n\n";
}

// extern "C" evo_<kind>_bind_workspace(stream, workspace, bytes): the caller's workspace for every
// later launch on a stream (emit_workspace). In a file whose kernels take none it checks its
// arguments and binds nothing, so that callers need not tell the two apart.
std::string bind_workspace_entry(const FamilyExport& f, bool has_workspace) {
  std::ostringstream o;
  o << "\n// Binds the caller's workspace to `stream` on the current device: every later launch on that\n"
    << "// stream, captured into a CUDA graph or not, uses it instead of a buffer of this library's own, so\n"
    << "// a captured call adds no allocation, memset or free node to the graph. The caller keeps it zero\n"
    << "// before its first use (each launch leaves it so), at least evo_" << f.kind << "_workspace_bytes() of\n"
    << "// every call on that stream (a call that needs more returns cudaErrorInvalidValue), alive while\n"
    << "// any launch or graph that used it may still run, and runs those one at a time (one stream, or\n"
    << "// events between them). workspace nullptr with bytes 0 unbinds. Returns 0, cudaErrorInvalidValue\n"
    << "// for a pointer without bytes or bytes without a pointer, or cudaGetDevice's error.\n";
  if (!has_workspace) o << "// (This file's kernels take no workspace: it checks its arguments and binds nothing.)\n";
  o << "extern \"C\" int evo_" << f.kind << "_bind_workspace(cudaStream_t stream, void* workspace, long long bytes) {\n"
    << "  if (bytes < 0 || (workspace == nullptr) != (bytes == 0)) return cudaErrorInvalidValue;\n";
  if (!has_workspace)
    return o.str() + "  (void)stream;\n  return cudaSuccess;\n}\n";
  o << "  int device = 0;\n"
    << "  const cudaError_t e = cudaGetDevice(&device);\n"
    << "  if (e != cudaSuccess) return e;\n"
    << "  std::lock_guard<std::mutex> lock(evo_export::workspace_mutex);\n"
    << "  auto& bound = evo_export::bound_workspaces;\n"
    << "  for (size_t i = 0; i < bound.size(); ++i)\n"
    << "    if (bound[i].device == device && bound[i].stream == stream) {\n"
    << "      bound.erase(bound.begin() + static_cast<long>(i));\n"
    << "      break;\n"
    << "    }\n"
    << "  if (workspace != nullptr) bound.push_back(evo_export::Workspace{device, stream, workspace, bytes});\n"
    << "  return cudaSuccess;\n"
    << "}\n";
  return o.str();
}

// "template <int DTYPE_, int CAUSAL_, int HEAD_DIM_>": a variant's compile-time problem variables.
std::string variant_template(const FamilyExport& f) {
  std::string out = "template <";
  for (size_t i = 0; i < f.compile_time.size(); ++i) out += (i ? ", int " : "int ") + f.compile_time[i] + "_";
  return out + ">\n";
}

// "const long long BATCH = p.batch, ...;" and "(void)BATCH; ...": the call's problem variables.
std::string runtime_variables(const FamilyExport& f) {
  std::string values = "      const long long ", unused = "      ";
  for (size_t i = 0; i < f.runtime.size(); ++i) {
    values += (i ? ", " : "") + f.runtime[i].name + " = " + f.runtime[i].from_params;
    unused += (i ? " (void)" : "(void)") + f.runtime[i].name + ";";
  }
  return values + ";\n" + unused + "\n";
}

// What a variant's functions of the call compute first: the call's problem variables, the derived
// values that read them, and the space's constraints on them, each failed one returning `refused`.
std::string call_variables(const SpaceForExport& s, const std::string& refused) {
  std::string out = runtime_variables(*s.family);
  for (const auto& d : s.derived)
    if (d.runtime) out += "      const long long " + d.name + " = " + d.code + ";\n      (void)" + d.name + ";\n";
  for (const auto& c : s.constraints)
    if (c.runtime) out += "      if (!(" + c.code + ")) return " + refused + ";  // " + c.name + "\n";
  return out;
}

// A variant's workspace_bytes(p): the bytes of workspace a launch of that call takes (0: none), or
// -1 for a call its launch() refuses (the space's constraints on the call's shape). The caller
// who binds a workspace sizes it by these.
void emit_workspace_bytes(std::ostringstream& o, const SpaceForExport& s) {
  o << "  static long long workspace_bytes(const " << s.family->params_type << "& p) {\n"
    << "    if constexpr (!kValid) {\n"
    << "      (void)p;\n"
    << "      return -1;\n"
    << "    } else {\n"
    << call_variables(s, "-1");
  const auto formula = s.launch.find("workspace_bytes");
  o << "      return " << (formula != s.launch.end() ? formula->second.code : std::string("0LL")) << ";\n"
    << "    }\n"
    << "  }\n\n";
}

// What a kernel needs before its first launch on a device, done once per (kernel, device): the
// function attributes live in each device's context, and the blocks a device runs at once depend
// on its SMs, so a process that launches on several GPUs sets each up on its own. A build whose
// registers fall short of what its warpgroups hand over is refused; a compiled cluster beyond the
// portable 8 blocks is allowed; dynamic shared memory above the default is opted into. Emitted once
// per file; each variant keeps its own table of devices.
void emit_launch_setup(std::ostringstream& o) {
  o << "// One kernel's setup on one device (set_up_launch).\n"
    << "struct LaunchSetup {\n"
    << "  std::atomic<bool> done{false};\n"
    << "  std::atomic<long long> resident{0};  // the blocks the device runs at once\n"
    << "};\n"
    << "constexpr int kSetUpDevices = 64;  // devices past these are set up at every launch\n\n"
    << "template <typename Kernel>\n"
    << "static cudaError_t set_up_launch(Kernel kernel, LaunchSetup (&devices)[kSetUpDevices], long long threads,\n"
    << "                                 long long smem, long long min_registers, long long* resident) {\n"
    << "  int device = 0;\n"
    << "  cudaError_t e = cudaGetDevice(&device);\n"
    << "  if (e != cudaSuccess) return e;\n"
    << "  LaunchSetup uncached;\n"
    << "  LaunchSetup& setup = device >= 0 && device < kSetUpDevices ? devices[device] : uncached;\n"
    << "  if (setup.done.load()) {\n"
    << "    *resident = setup.resident.load();\n"
    << "    return cudaSuccess;\n"
    << "  }\n"
    << "  cudaFuncAttributes attrs{};\n"
    << "  e = cudaFuncGetAttributes(&attrs, kernel);\n"
    << "  // Its warpgroups trade registers within what the launch gives the block: a build that\n"
    << "  // compiled it to fewer would wait forever, so it is refused instead.\n"
    << "  if (e == cudaSuccess && attrs.numRegs < min_registers) e = cudaErrorLaunchOutOfResources;\n"
    << "  if (e == cudaSuccess && attrs.requiredClusterWidth * attrs.requiredClusterHeight * attrs.requiredClusterDepth > 8)\n"
    << "    e = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);\n"
    << "  if (e == cudaSuccess && smem > " << kSmemPerBlockDefault << "LL)\n"
    << "    e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));\n"
    << "  // Counted after the limit is raised: the occupancy query reads it.\n"
    << "  int sms = 0, per_sm = 0;\n"
    << "  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);\n"
    << "  if (e == cudaSuccess)\n"
    << "    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, static_cast<int>(threads),\n"
    << "                                                      static_cast<size_t>(smem));\n"
    << "  if (e != cudaSuccess) return e;\n"
    << "  setup.resident.store(std::max(1LL, static_cast<long long>(sms) * per_sm));\n"
    << "  setup.done.store(true);\n"
    << "  *resident = setup.resident.load();\n"
    << "  return cudaSuccess;\n"
    << "}\n\n";
}

// The blocks a launch takes: the grid's, or for a persistent kernel (the space's `persistent`
// launch formula) as many as the device runs at once, which share the grid's work tiles.
std::string persistent_grid(const SpaceForExport& s) {
  std::ostringstream o;
  o << "      long long blocks_x = grid_x, blocks_y = grid_y;\n";
  const auto it = s.launch.find("persistent");
  if (it == s.launch.end()) return o.str();
  o << "      if (" << it->second.code << ") {\n"
    << "        blocks_x = std::min(grid_x * grid_y, resident);\n"
    << "        blocks_y = 1;\n"
    << "      }\n";
  return o.str();
}

// Everything a (genome, compile-time problem variables) instantiation knows at compile time.
void emit_variant(std::ostringstream& o, const SpaceForExport& s, const Genome& g, size_t index,
                  int64_t smem_limit, int sm_arch) {
  const FamilyExport& f = *s.family;
  o << "// Variant " << index << ": " << g.text() << "\n" << variant_template(f) << "struct Variant" << index
    << " {\n";
  for (const auto& name : f.compile_time) o << "  static constexpr long long " << name << " = " << name << "_;\n";
  o << "  static constexpr long long SMEM_LIMIT = " << smem_limit << "LL;\n"
    << "  static constexpr long long SM_ARCH = " << sm_arch << "LL;  // the target it was measured on\n";
  for (const auto& [name, value] : g.genes())
    o << "  static constexpr long long " << name << " = " << value << "LL;\n";
  for (const auto& d : s.derived)
    if (!d.runtime) o << "  static constexpr long long " << d.name << " = " << d.code << ";\n";
  o << "  // The search space's constraints that do not depend on the call's shape.\n"
    << "  static constexpr bool kValid = true";
  for (const auto& c : s.constraints)
    if (!c.runtime) o << "\n      && (" << c.code << ")  /* " << c.name << " */";
  o << ";\n\n";
  emit_workspace_bytes(o, s);
  o << "  static int launch(const " << f.params_type << "& p, cudaStream_t stream, bool programmatic) {\n"
    << "    if constexpr (!kValid) {\n"
    << "      (void)p; (void)stream; (void)programmatic;\n"
    << "      return cudaErrorInvalidValue;\n"
    << "    } else {\n"
    << call_variables(s, "cudaErrorInvalidValue")
    << "      const long long grid_x = " << s.launch.at("grid_x").code << ";\n"
    << "      const long long grid_y = " << s.launch.at("grid_y").code << ";\n"
    << "      const long long grid_z = " << s.launch.at("grid_z").code << ";\n"
    << "      const long long threads = " << s.launch.at("threads").code << ";\n"
    << "      const long long smem = " << s.launch.at("smem_bytes").code << ";\n"
    << "      if (grid_x < 1 || grid_x > 2147483647LL || grid_y < 1 || grid_y > 65535LL ||\n"
    << "          grid_z < 1 || grid_z > 65535LL || threads < 1 || threads > 1024LL || smem < 0 ||\n"
    << "          smem > SMEM_LIMIT)\n"
    << "        return cudaErrorInvalidValue;\n"
    << "      const auto kernel = " << kernel_name(s, g) << ";\n";
  std::map<std::string, std::string> launch_code;
  for (const auto& [name, formula] : s.launch) launch_code.emplace(name, formula.code);
  const auto registers = s.launch.find("min_registers");
  const std::string min_registers = registers != s.launch.end() ? "(" + registers->second.code + ")" : "0LL";
  o << f.launch_arguments(launch_code)
    << "      static LaunchSetup devices[kSetUpDevices];\n"
    << "      long long resident = 0;\n"
    << "      {\n"
    << "        const cudaError_t e = set_up_launch(kernel, devices, threads, smem, " << min_registers << ", &resident);\n"
    << "        if (e != cudaSuccess) return e;\n"
    << "      }\n"
    << persistent_grid(s)
    << "      // Programmatic: this launch may begin while the stream's previous kernel finishes; the\n"
    << "      // kernel waits for that kernel's end (griddepcontrol.wait) before it touches memory.\n"
    << "      cudaLaunchAttribute overlap{};\n"
    << "      overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;\n"
    << "      overlap.val.programmaticStreamSerializationAllowed = 1;\n"
    << "      cudaLaunchConfig_t config{};\n"
    << "      config.gridDim = dim3(static_cast<unsigned>(blocks_x), static_cast<unsigned>(blocks_y),\n"
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
    check_served(space, v);
  }
  const int64_t smem_limit = smem_limit_for(variants, options);
  const std::string arch = arch_of(variants);

  std::ostringstream o;
  const FamilyExport& family = *space.family;
  o << "// Generated by evo (evoctl export): the " << space.id << " " << family.kind << " kernel with "
    << (variants.size() == 1 ? "the winning genome" : "a dispatch table of winning genomes")
    << " baked in.\n"
    << "// Self-contained: it includes only CUDA toolkit and C++ standard headers. Build:\n"
    << "//   " << exported_build_command("kernel.cu", "libkernel.so", arch) << "\n"
    << "// Call " << family.entry_point << " (bottom of this file) from any program, e.g. ctypes.\n";
  for (const auto& v : variants)
    o << "//   " << (v.run_id.empty() ? "" : "run " + v.run_id + ": ") << v.genome.text() << (v.evidence.estimated() ? "  (ESTIMATED: chosen by the model evaluator, not measured)" : "")
      << "\n";
  o << "#include <algorithm>\n#include <atomic>\n#include <cmath>\n#include <mutex>\n#include <vector>\n\n"
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
  emit_launch_setup(o);
  if (space.has_workspace) emit_workspace(o);
  const int sm_arch = sm_arch_number(arch);
  for (size_t i = 0; i < variants.size(); ++i)
    emit_variant(o, space, variants[i].genome, i, smem_limit, sm_arch);
  ExportTable table{space.served, {}};
  for (const auto& v : variants) table.problems.push_back(v.shapes);
  o << family.dispatch(table) << "}  // namespace evo_export\n\n" << family.entry_points(table)
    << bind_workspace_entry(family, space.has_workspace);

  v1::ExportResponse response;
  response.set_source(o.str());
  response.set_report(export_report(variants, family, arch, options.source_name));
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
    *b->mutable_typed_genome() = genome_to_proto(v.genome);
    for (const auto& sh : v.shapes) b->add_shapes(sh.text());
    b->set_fitness_us(ranked_fitness_us(v.fitness_inputs, v.evidence));
    b->set_estimated(v.evidence.estimated());
  }
  return response;
}

v1::ExportResponse export_standalone(const Genome& g, const std::vector<Problem>& shapes,
                                     const v1::Evaluation& evidence, const ExportOptions& options) {
  return export_dispatch_table({ExportVariant{g, shapes, evidence, ""}}, options);
}

}  // namespace evo

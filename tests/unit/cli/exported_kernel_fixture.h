#pragma once
// Exports the default genome, a two-genome dispatch table and a genome that loads through TMA,
// builds each with the real nvcc exactly as the report says, and loads it; skips without nvcc.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "attention/problem.h"
#include "export_fixtures.h"
#include "exporter.h"

namespace evo {

namespace fs = std::filesystem;
using EntryPoint = int (*)(const void*, const void*, const void*, void*, int, int, int, int, int, float, int,
                           void*);
// evo_attention_forward_ex: the same arguments, then programmatic_launch (1 as above, 0 plain).
using EntryPointEx = int (*)(const void*, const void*, const void*, void*, int, int, int, int, int, float, int,
                             void*, int);
// evo_attention_forward_dtype: ..., causal, dtype, stream, programmatic_launch.
using EntryPointDtype = int (*)(const void*, const void*, const void*, void*, int, int, int, int, int, float, int,
                                int, void*, int);
// evo_attention_forward_gqa: q, k, v, o, batch, heads, heads_kv, seq_q, seq_k, head_dim, scale,
// causal, dtype, stream, programmatic_launch.
using EntryPointGqa = int (*)(const void*, const void*, const void*, void*, int, int, int, int, int, int, float,
                              int, int, void*, int);
// evo_attention_forward_varlen: q, k, v, o, cu_seqlens_q, cu_seqlens_k, batch, heads, heads_kv,
// max_seq_q, max_seq_k, total_q, total_k, head_dim, scale, causal, dtype, stream, programmatic_launch.
using EntryPointVarlen = int (*)(const void*, const void*, const void*, void*, const int*, const int*, int, int, int,
                                 int, int, int, int, int, float, int, int, void*, int);
constexpr int kCudaErrorInvalidValue = 1;

inline std::string find_nvcc() {
  const char* home = std::getenv("CUDA_HOME");
  for (const std::string& dir : {home ? std::string(home) : std::string(), std::string("/usr/local/cuda")}) {
    if (dir.empty()) continue;
    const fs::path nvcc = fs::path(dir) / "bin" / "nvcc";
    if (fs::exists(nvcc)) return nvcc.string();
  }
  return "";
}

// An export built with nvcc as the report says, and loaded; kept for the tests.
struct Built {
  int status = -1;
  std::string log;
  void* handle = nullptr;
};

class ExportedKernel : public ::testing::Test {
 protected:
  static Built build(const std::string& name, const v1::ExportResponse& r) {
    Built b;
    std::ofstream(dir_ / (name + ".cu")) << r.source();
    const std::string cmd =
        exported_build_command((dir_ / (name + ".cu")).string(), (dir_ / ("lib" + name + ".so")).string());
    // The command as the report prints it, with this machine's nvcc in front.
    const std::string full = nvcc_ + cmd.substr(cmd.find(' ')) + " > " + (dir_ / (name + ".log")).string() + " 2>&1";
    b.status = std::system(full.c_str());
    std::ifstream log(dir_ / (name + ".log"));
    b.log.assign(std::istreambuf_iterator<char>(log), std::istreambuf_iterator<char>());
    if (b.status == 0) {
      b.handle = dlopen((dir_ / ("lib" + name + ".so")).c_str(), RTLD_NOW | RTLD_LOCAL);
      if (b.handle == nullptr) b.log += dlerror();
    }
    return b;
  }
  static void SetUpTestSuite() {
    nvcc_ = find_nvcc();
    if (nvcc_.empty()) return;
    dir_ = fs::temp_directory_path() / ("evo_export_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    const Genome seed = testing::default_genome();
    standalone_ = build("best", export_standalone(seed, {testing::shape_1x8x512x64()}, testing::measured_evaluation(false)));
    // A dispatch table whose second genome splits each row tile's keys over 16 blocks, which
    // merge in the workspace: the stream-ordered workspace code is built by nvcc and exercised by
    // the GPU test, and each call must leave the workspace's counters as it found them.
    const KernelTemplate& tmpl = *find_template(seed.template_id());
    dispatch_ = build("table", export_dispatch_table(tmpl, {{seed, {testing::shape_1x8x512x64()}, testing::measured_evaluation(false)},
                                                      {split_genome(), {attention::to_problem(split_bucket())}, testing::measured_evaluation(false)}}));
    // The wgmma path with TMA copies: its launch encodes tensor maps with the template's host code,
    // in whole-tile boxes, so that K's and V's (128 rows) are taller than Q's and O's (64).
    Genome tma = seed;
    for (const auto& [gene, value] : std::vector<std::pair<std::string, int64_t>>{
             {"BLOCK_M", 64}, {"BLOCK_N", 128}, {"WARPS", 4}, {"WGMMA", 1}, {"SCHEDULE", 3 /* tma */},
             {"TMA_BOX_ROWS", 256}})
      tma.set(gene, value);
    tma_ = build("tma", export_standalone(tma, {testing::shape_1x8x512x64()}, testing::measured_evaluation(false)));
  }
  static void TearDownTestSuite() {
    for (Built* b : {&standalone_, &dispatch_, &tma_})
      if (b->handle) dlclose(b->handle);
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void SetUp() override {
    if (nvcc_.empty()) GTEST_SKIP() << "nvcc not found (set CUDA_HOME): cannot build the exported kernel";
  }
  static EntryPoint entry_of(const Built& b) {
    EXPECT_EQ(b.status, 0) << "nvcc failed on the exported kernel:\n" << b.log;
    EXPECT_NE(b.handle, nullptr) << b.log;
    return b.handle ? reinterpret_cast<EntryPoint>(dlsym(b.handle, "evo_attention_forward")) : nullptr;
  }
  static EntryPointDtype entry_dtype_of(const Built& b) {
    EXPECT_EQ(b.status, 0) << "nvcc failed on the exported kernel:\n" << b.log;
    return b.handle ? reinterpret_cast<EntryPointDtype>(dlsym(b.handle, "evo_attention_forward_dtype")) : nullptr;
  }
  static EntryPointGqa entry_gqa_of(const Built& b) {
    EXPECT_EQ(b.status, 0) << "nvcc failed on the exported kernel:\n" << b.log;
    return b.handle ? reinterpret_cast<EntryPointGqa>(dlsym(b.handle, "evo_attention_forward_gqa")) : nullptr;
  }
  static EntryPointVarlen entry_varlen_of(const Built& b) {
    EXPECT_EQ(b.status, 0) << "nvcc failed on the exported kernel:\n" << b.log;
    return b.handle ? reinterpret_cast<EntryPointVarlen>(dlsym(b.handle, "evo_attention_forward_varlen")) : nullptr;
  }
  static EntryPointEx entry_ex_of(const Built& b) {
    EXPECT_EQ(b.status, 0) << "nvcc failed on the exported kernel:\n" << b.log;
    return b.handle ? reinterpret_cast<EntryPointEx>(dlsym(b.handle, "evo_attention_forward_ex")) : nullptr;
  }

  // The dispatch table's second genome: the seed with 64-row blocks, each row tile's keys split
  // over 16 blocks that merge in the workspace.
  static Genome split_genome() {
    Genome g = testing::default_genome();
    g.set("BLOCK_M", 64);
    g.set("SPLIT_KV", 16);
    return g;
  }

  // The dispatch table's second bucket: small enough for a CPU reference in the GPU test.
  static attention::Shape split_bucket() {
    attention::Shape p;
    p.heads = 2;
    p.seq_q = p.seq_k = 1024;  // 16 key tiles of 64: one for each block of the split
    return p;
  }

  static inline std::string nvcc_;
  static inline fs::path dir_;
  static inline Built standalone_, dispatch_, tma_;
};

}  // namespace evo

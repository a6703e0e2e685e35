// Builds an exported .cu with the real nvcc, exactly as a user would, loads it and calls it with
// shapes it must refuse. Needs nvcc (skips without it) but no GPU and no driver: the refusals
// happen before any CUDA call.
#include "exported_kernel_fixture.h"
#include "search_space.h"

namespace evo {
namespace {

TEST_F(ExportedKernel, StandaloneBuildsAndExposesTheEntryPoint) { EXPECT_NE(entry_of(standalone_), nullptr); }

TEST_F(ExportedKernel, DispatchTableBuildsAndExposesTheEntryPoint) { EXPECT_NE(entry_of(dispatch_), nullptr); }

TEST_F(ExportedKernel, TmaGenomeBuildsAndExposesTheEntryPoint) { EXPECT_NE(entry_of(tma_), nullptr); }

void expect_refusals(EntryPoint f) {
  // Fake device pointers: each call must be refused before anything dereferences them.
  char buf[4] = {};
  const void* p = buf;
  void* out = buf;
  EXPECT_EQ(f(p, p, p, out, 1, 8, 512, 512, 96, 0.125f, 0, nullptr), kCudaErrorInvalidValue) << "head_dim 96";
  EXPECT_EQ(f(p, p, p, out, 1, 8, 512, 256, 64, 0.125f, 1, nullptr), kCudaErrorInvalidValue) << "causal seq_q > seq_k";
  EXPECT_EQ(f(nullptr, p, p, out, 1, 8, 512, 512, 64, 0.125f, 0, nullptr), kCudaErrorInvalidValue) << "null q";
  EXPECT_EQ(f(p, p, p, nullptr, 1, 8, 512, 512, 64, 0.125f, 0, nullptr), kCudaErrorInvalidValue) << "null o";
  EXPECT_EQ(f(p, p, p, out, 0, 8, 512, 512, 64, 0.125f, 0, nullptr), kCudaErrorInvalidValue) << "batch 0";
  EXPECT_EQ(f(p, p, p, out, 1, -8, 512, 512, 64, 0.125f, 0, nullptr), kCudaErrorInvalidValue) << "heads -8";
  EXPECT_EQ(f(p, p, p, out, 1, 8, 512, 512, 64, 0.125f, 2, nullptr), kCudaErrorInvalidValue) << "causal 2";
  EXPECT_EQ(f(p, p, p, out, 1, 8, 512, 512, 64, NAN, 0, nullptr), kCudaErrorInvalidValue) << "NaN scale";
  EXPECT_EQ(f(p, p, p, out, 1024, 1024, 4096, 4096, 64, 0.125f, 0, nullptr), kCudaErrorInvalidValue)
      << "over 2^31 elements";
}

TEST_F(ExportedKernel, ExEntryPointRefusesTheSameAndAnUnknownLaunchMode) {
  for (const Built* b : {&standalone_, &dispatch_, &tma_}) {
    const EntryPointEx ex = entry_ex_of(*b);
    ASSERT_NE(ex, nullptr);
    char buf[4] = {};
    const void* p = buf;
    void* out = buf;
    for (int mode : {0, 1}) {
      EXPECT_EQ(ex(p, p, p, out, 1, 8, 512, 512, 96, 0.125f, 0, nullptr, mode), kCudaErrorInvalidValue)
          << "head_dim 96, mode " << mode;
      EXPECT_EQ(ex(nullptr, p, p, out, 1, 8, 512, 512, 64, 0.125f, 0, nullptr, mode), kCudaErrorInvalidValue)
          << "null q, mode " << mode;
    }
    for (int mode : {-1, 2})
      EXPECT_EQ(ex(p, p, p, out, 1, 8, 512, 512, 64, 0.125f, 0, nullptr, mode), kCudaErrorInvalidValue)
          << "programmatic_launch " << mode;
  }
}

// The dtype entry point: fp16 (0) as the others, a dtype the file was not tuned for (these files
// are fp16 runs: bf16, 1) or an unknown value refused before any CUDA call.
TEST_F(ExportedKernel, DtypeEntryPointRefusesADtypeTheTableLacks) {
  for (const Built* b : {&standalone_, &dispatch_, &tma_}) {
    const EntryPointDtype f = entry_dtype_of(*b);
    ASSERT_NE(f, nullptr);
    char buf[4] = {};
    const void* p = buf;
    void* out = buf;
    for (int dtype : {1, 2, -1})
      EXPECT_EQ(f(p, p, p, out, 1, 8, 512, 512, 64, 0.125f, 0, dtype, nullptr, 1), kCudaErrorInvalidValue)
          << "dtype " << dtype;
    EXPECT_EQ(f(p, p, p, out, 1, 8, 512, 512, 96, 0.125f, 0, 0, nullptr, 1), kCudaErrorInvalidValue)
        << "fp16, head_dim 96";
    EXPECT_EQ(f(p, p, p, out, 1, 8, 512, 512, 64, 0.125f, 0, 0, nullptr, 2), kCudaErrorInvalidValue)
        << "programmatic_launch 2";
  }
}

// The grouped-query entry point: K/V heads that do not divide the query heads, and causal with
// more queries than keys (the diagonal is bottom-right), refused before any CUDA call.
TEST_F(ExportedKernel, GqaEntryPointRefusesHeadsThatDoNotDivideAndCausalPastTheKeys) {
  for (const Built* b : {&standalone_, &dispatch_, &tma_}) {
    const EntryPointGqa f = entry_gqa_of(*b);
    ASSERT_NE(f, nullptr);
    char buf[4] = {};
    const void* p = buf;
    void* out = buf;
    for (int heads_kv : {0, -2, 3, 16})
      EXPECT_EQ(f(p, p, p, out, 1, 8, heads_kv, 512, 512, 64, 0.125f, 0, 0, nullptr, 1), kCudaErrorInvalidValue)
          << "heads_kv " << heads_kv;
    EXPECT_EQ(f(p, p, p, out, 1, 8, 2, 1024, 512, 64, 0.125f, 1, 0, nullptr, 1), kCudaErrorInvalidValue)
        << "causal seq_q > seq_k";
  }
}

// The packed-batch entry point: offsets missing, totals shorter than the longest sequence, more
// than 2^31 elements, and (these files were tuned on dense batches only) every packed call of a
// file no genome of which was tuned on one, refused before any CUDA call.
TEST_F(ExportedKernel, VarlenEntryPointRefusesBadOffsetsAndAFileTunedOnDenseBatches) {
  for (const Built* b : {&standalone_, &dispatch_, &tma_}) {
    const EntryPointVarlen f = entry_varlen_of(*b);
    ASSERT_NE(f, nullptr);
    char buf[4] = {};
    const void* p = buf;
    void* out = buf;
    const int cu[3] = {0, 17, 317};
    EXPECT_EQ(f(p, p, p, out, nullptr, cu, 2, 8, 2, 300, 300, 317, 317, 64, 0.125f, 1, 0, nullptr, 1),
              kCudaErrorInvalidValue) << "no cu_seqlens_q";
    EXPECT_EQ(f(p, p, p, out, cu, nullptr, 2, 8, 2, 300, 300, 317, 317, 64, 0.125f, 1, 0, nullptr, 1),
              kCudaErrorInvalidValue) << "no cu_seqlens_k";
    EXPECT_EQ(f(p, p, p, out, cu, cu, 2, 8, 2, 300, 300, 299, 317, 64, 0.125f, 1, 0, nullptr, 1),
              kCudaErrorInvalidValue) << "total_q under the longest sequence";
    EXPECT_EQ(f(p, p, p, out, cu, cu, 2, 8, 3, 300, 300, 317, 317, 64, 0.125f, 1, 0, nullptr, 1),
              kCudaErrorInvalidValue) << "heads_kv 3 of 8";
    EXPECT_EQ(f(p, p, p, out, cu, cu, 2, 1024, 1024, 300, 300, 1 << 20, 1 << 20, 64, 0.125f, 0, 0, nullptr, 1),
              kCudaErrorInvalidValue) << "over 2^31 elements";
    EXPECT_EQ(f(p, p, p, out, cu, cu, 2, 8, 2, 300, 300, 317, 317, 64, 0.125f, 1, 0, nullptr, 1),
              kCudaErrorInvalidValue) << "a well-formed packed call to a file tuned on dense batches";
  }
}

// Every file carries the FP8 quantizer: a bad call is refused before any CUDA call (null pointers,
// a dimension under 1, an unknown input dtype or transpose flag, more heads than a grid's y holds).
// The FP8 entry point refuses calls without scales and, in a file tuned on no e4m3 genome, every
// call; the 16-bit entry point refuses dtype 2, which needs scales.
TEST_F(ExportedKernel, Fp8EntryPointsRefuseBadCallsWithoutTouchingTheDriver) {
  using Quantize = int (*)(const void*, int, void*, float*, int, int, int, int, int, void*);
  using ForwardFp8 = int (*)(const void*, const void*, const void*, void*, const float*, const float*, const float*,
                             int, int, int, int, int, int, float, int, void*, int);
  ASSERT_EQ(standalone_.status, 0) << standalone_.log;
  const auto quantize = reinterpret_cast<Quantize>(dlsym(standalone_.handle, "evo_attention_quantize_fp8"));
  const auto forward = reinterpret_cast<ForwardFp8>(dlsym(standalone_.handle, "evo_attention_forward_fp8"));
  const EntryPointGqa gqa = entry_gqa_of(standalone_);
  ASSERT_NE(quantize, nullptr);
  ASSERT_NE(forward, nullptr);
  ASSERT_NE(gqa, nullptr);
  char buf[4] = {};
  void* p = buf;
  float scales[1] = {};
  EXPECT_EQ(quantize(nullptr, 0, p, scales, 1, 8, 512, 64, 0, nullptr), kCudaErrorInvalidValue) << "null x";
  EXPECT_EQ(quantize(p, 0, p, nullptr, 1, 8, 512, 64, 0, nullptr), kCudaErrorInvalidValue) << "null scales";
  EXPECT_EQ(quantize(p, 0, p, scales, 1, 0, 512, 64, 0, nullptr), kCudaErrorInvalidValue) << "heads 0";
  EXPECT_EQ(quantize(p, 2, p, scales, 1, 8, 512, 64, 0, nullptr), kCudaErrorInvalidValue) << "x_dtype 2";
  EXPECT_EQ(quantize(p, 0, p, scales, 1, 8, 512, 64, 2, nullptr), kCudaErrorInvalidValue) << "transpose 2";
  EXPECT_EQ(quantize(p, 0, p, scales, 1024, 128, 512, 64, 0, nullptr), kCudaErrorInvalidValue) << "2^17 heads";
  EXPECT_EQ(forward(p, p, p, p, nullptr, scales, scales, 1, 8, 8, 512, 512, 64, 0.125f, 0, nullptr, 1),
            kCudaErrorInvalidValue) << "no Q scales";
  EXPECT_EQ(forward(p, p, p, p, scales, scales, scales, 1, 8, 8, 512, 512, 64, 0.125f, 0, nullptr, 1),
            kCudaErrorInvalidValue) << "a file with no e4m3 genome";
  EXPECT_EQ(gqa(p, p, p, p, 1, 8, 8, 512, 512, 64, 0.125f, 0, 2, nullptr, 1), kCudaErrorInvalidValue) << "dtype 2";
}

using WorkspaceBytes = long long (*)(int, int, int, int, int, int, int, int, int);
using BindWorkspace = int (*)(void*, void*, long long);

// evo_attention_workspace_bytes sizes a workspace to bind: the search space's own formula for the
// bucket's genome where it splits its keys in the workspace, 0 where it does not, -1 for a call
// the file refuses. No CUDA call, so it answers without a driver.
TEST_F(ExportedKernel, WorkspaceBytesAreTheSpacesFormulaForEachBucketsGenome) {
  ASSERT_EQ(dispatch_.status, 0) << dispatch_.log;
  const auto bytes = reinterpret_cast<WorkspaceBytes>(dlsym(dispatch_.handle, "evo_attention_workspace_bytes"));
  ASSERT_NE(bytes, nullptr);
  const attention::Shape split = split_bucket();
  const SearchSpace& space = SearchSpace::for_template(split_genome().template_id());
  const int64_t want = space.launch(split_genome(), attention::to_problem(split)).workspace_bytes;
  ASSERT_GT(want, 0);
  EXPECT_EQ(bytes(1, split.heads, split.heads, split.seq_q, split.seq_k, split.head_dim, 0, 0, 0), want);
  attention::Shape more_heads = split;
  more_heads.heads = 8;  // the same bucket, a larger grid: more partials
  EXPECT_EQ(bytes(1, 8, 8, split.seq_q, split.seq_k, split.head_dim, 0, 0, 0),
            space.launch(split_genome(), attention::to_problem(more_heads)).workspace_bytes);
  EXPECT_EQ(bytes(1, 8, 8, 512, 512, 64, 0, 0, 0), 0) << "the seed's bucket takes no workspace";
  EXPECT_EQ(bytes(1, 8, 8, 512, 512, 96, 0, 0, 0), -1) << "head_dim 96";
  EXPECT_EQ(bytes(1, 8, 3, 512, 512, 64, 0, 0, 0), -1) << "heads_kv 3 of 8";
  EXPECT_EQ(bytes(1, 8, 8, 1024, 512, 64, 1, 0, 0), -1) << "causal seq_q > seq_k";
  EXPECT_EQ(bytes(1, 8, 8, 512, 512, 64, 0, 1, 0), -1) << "bf16: a dtype the file was not tuned for";
  EXPECT_EQ(bytes(1, 8, 8, 512, 512, 64, 0, 0, 1), -1) << "a packed batch: none tuned";
  EXPECT_EQ(bytes(1, 8, 8, 512, 512, 64, 0, 0, 2), -1) << "varlen 2";
  EXPECT_EQ(bytes(0, 8, 8, 512, 512, 64, 0, 0, 0), -1) << "batch 0";
}

// A pointer without bytes, bytes without a pointer or negative bytes are refused before any CUDA
// call; a file whose kernels take no workspace has the entry point too.
TEST_F(ExportedKernel, BindWorkspaceRefusesAPointerWithoutBytesWithoutTouchingTheDriver) {
  for (const Built* b : {&standalone_, &dispatch_, &tma_}) {
    ASSERT_EQ(b->status, 0) << b->log;
    const auto bind = reinterpret_cast<BindWorkspace>(dlsym(b->handle, "evo_attention_bind_workspace"));
    ASSERT_NE(bind, nullptr);
    char buf[16] = {};
    EXPECT_EQ(bind(nullptr, buf, 0), kCudaErrorInvalidValue) << "a pointer without bytes";
    EXPECT_EQ(bind(nullptr, nullptr, 16), kCudaErrorInvalidValue) << "bytes without a pointer";
    EXPECT_EQ(bind(nullptr, buf, -16), kCudaErrorInvalidValue) << "negative bytes";
  }
}

TEST_F(ExportedKernel, RefusesWhatItCannotServeWithoutTouchingTheDriver) {
  const EntryPoint standalone = entry_of(standalone_);
  ASSERT_NE(standalone, nullptr);
  expect_refusals(standalone);
  const EntryPoint table = entry_of(dispatch_);
  ASSERT_NE(table, nullptr);
  expect_refusals(table);
}

}  // namespace
}  // namespace evo

// Without a GPU (or driver), the cuda backend refuses in one line and points at the model backend.
#include <gtest/gtest.h>

#include "cuda_evaluator.h"
#include "device_probe.h"
#include "gpu_test_support.h"

namespace evo {
namespace {

TEST(NoGpu, MakeCudaEvaluatorThrowsOneLineNamingTheFix) {
  if (testing_gpu::no_gpu_reason().empty()) GTEST_SKIP() << "a GPU is present; this checks the no-GPU path";
  try {
    make_cuda_evaluator(EvaluatorOptions{});
    FAIL() << "make_cuda_evaluator succeeded without a GPU";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("no GPU found (", 0), 0u) << what;
    EXPECT_NE(what.find("use --backend model"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << "more than one line: " << what;
  }
}

TEST(NoGpu, MessageFormat) {
  EXPECT_EQ(cuda::no_gpu_message("CUDA driver version is insufficient for CUDA runtime version"),
            "no GPU found (CUDA driver version is insufficient for CUDA runtime version); use --backend model");
}

TEST(DeviceProbe, ArchNames) {
  EXPECT_EQ(cuda::arch_for(9, 0), "sm_90a");
  EXPECT_EQ(cuda::arch_for(8, 9), "sm_89");
  EXPECT_EQ(cuda::arch_for(8, 0), "sm_80");
  EXPECT_EQ(cuda::arch_for(10, 0), "sm_100");
}

TEST(DeviceProbe, FillsTheFingerprintOnAGpu) {
  EVO_REQUIRE_GPU();
  const v1::DeviceInfo d = cuda::probe_device(0);
  EXPECT_FALSE(d.gpu_name().empty());
  EXPECT_EQ(d.arch().rfind("sm_", 0), 0u);
  EXPECT_GT(d.sm_count(), 0);
  EXPECT_GT(d.smem_per_block_optin(), 48 * 1024);
  EXPECT_GT(d.l2_bytes(), 0);
  EXPECT_EQ(d.backend(), "cuda");
  EXPECT_EQ(d.device_class(), d.arch() + "/" + d.gpu_name());
}

TEST(DeviceProbe, UnknownGpuIndexIsOneLine) {
  EVO_REQUIRE_GPU();
  try {
    cuda::probe_device(999);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("no GPU 999 (", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace evo

#include "sass_check.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>

#include "test_support.h"

namespace evo {
namespace {

// The shape of a `cuobjdump --dump-sass` listing: one "Function :" header per kernel.
constexpr const char* kListing = R"SASS(
	code for sm_90a
		Function : _ZN3evo4mathEv
	.headerflags	@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   FFMA R2, R3, R4, R5 ;
        /*0020*/                   EXIT ;
		..........

		Function : _ZN3evo6tensorEv
	.headerflags	@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDSM.16.M88.4 R4, [R2] ;
        /*0010*/                   HMMA.16816.F32 R8, R4, R12, R8 ;
        /*0020*/                   HMMA.16816.F32 R16, R4, R14, R16 ;
        /*0030*/                   EXIT ;
)SASS";

TEST(SassCheck, CountsTensorOpsOfTheNamedKernelOnly) {
  EXPECT_EQ(count_tensor_core_ops(kListing, "_ZN3evo6tensorEv"), (TensorCoreOps{{"HMMA", 2}}));
  EXPECT_EQ(count_tensor_core_ops(kListing, "_ZN3evo4mathEv"), TensorCoreOps{});
  EXPECT_FALSE(count_tensor_core_ops(kListing, "_ZN3evo7missingEv"));
}

TEST(SassCheck, HgmmaCounts) {
  const std::string listing =
      "\t\tFunction : k\n        /*0000*/  HGMMA.64x64x16.F32 gdesc[UR4], RZ, !UPT ;\n";
  EXPECT_EQ(count_tensor_core_ops(listing, "k"), (TensorCoreOps{{"HGMMA", 1}}));
}

// bf16 kernels: mma.sync lowers to HMMA.16816.F32.BF16 and wgmma to HGMMA...F32.BF16 (the forms
// cuobjdump prints for sm_80+ and sm_90a). Both count; a bf16 kernel whose only bf16 work is
// conversion and packed FMA (F2FP.BF16, HFMA2.BF16_V2) never touches the tensor cores and fails.
TEST(SassCheck, Bf16TensorOpsCountAndBf16ArithmeticAloneDoesNot) {
  const std::string listing = R"SASS(
		Function : _ZN3evo13fa_s512_v3_kernelILi1ELi0ELi64EEEvNS_8FaParamsE
        /*0400*/                   LDSM.16.M88.4 R16, [R2+UR4] ;
        /*0410*/                   HMMA.16816.F32.BF16 R4, R16, R24, R4 ;
        /*0420*/              @!P0 HMMA.16816.F32.BF16 R8, R16, R26, R8 ;
        /*0430*/                   F2FP.BF16.F32.PACK_AB R30, R5, R4 ;
		..........

		Function : _ZN3evo13fa_s512_v3_kernelILi1ELi0ELi64ELi1EEEvNS_8FaParamsE
        /*0800*/                   WARPGROUP.ARRIVE ;
        /*0810*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT ;
        /*0820*/                   HGMMA.64x64x16.F32.BF16 R88, R120, gdesc[UR12], R88, gsb0 ;
		..........

		Function : _ZN3evo10bf16_naiveEv
        /*0000*/                   LDG.E.U16 R2, desc[UR4][R2.64] ;
        /*0010*/                   IMAD.U32 R5, R2, 0x10000, RZ ;
        /*0020*/                   HFMA2.BF16_V2 R6, R4, R5, -RZ ;
        /*0030*/                   F2FP.BF16.F32.PACK_AB R7, RZ, R6 ;
        /*0040*/                   EXIT ;
)SASS";
  EXPECT_EQ(total_ops(*count_tensor_core_ops(listing, "_ZN3evo13fa_s512_v3_kernelILi1ELi0ELi64EEEvNS_8FaParamsE")), 2);
  EXPECT_EQ(count_tensor_core_ops(listing, "_ZN3evo13fa_s512_v3_kernelILi1ELi0ELi64ELi1EEEvNS_8FaParamsE"),
            (TensorCoreOps{{"HGMMA", 2}}));
  EXPECT_EQ(count_tensor_core_ops(listing, "_ZN3evo10bf16_naiveEv"), TensorCoreOps{});
}

// FP8 warpgroup MMAs are QGMMA; a problem that needs them is refused a kernel without them, naming
// what the kernel holds instead.
TEST(SassCheck, QgmmaIsCountedApartAndARequiredInstructionIsChecked) {
  const std::string listing =
      "\t\tFunction : fp8\n        /*0000*/  QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR8], RZ, !UPT ;\n"
      "        /*0010*/  QGMMA.64x64x32.F32.E4M3.E4M3 R88, R120, gdesc[UR12], R88, gsb0 ;\n"
      "\t\tFunction : widened\n        /*0000*/  HGMMA.64x64x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT ;\n";
  const auto fp8 = count_tensor_core_ops(listing, "fp8");
  ASSERT_TRUE(fp8);
  EXPECT_EQ(*fp8, (TensorCoreOps{{"QGMMA", 2}}));
  EXPECT_EQ(missing_instruction(*fp8, "QGMMA"), "");
  EXPECT_EQ(missing_instruction(*fp8, ""), "");
  const auto widened = count_tensor_core_ops(listing, "widened");
  ASSERT_TRUE(widened);
  EXPECT_EQ(missing_instruction(*widened, "QGMMA"),
            "no QGMMA instruction in the SASS, which this problem's dtype needs (found 1 HGMMA)");
  EXPECT_EQ(missing_instruction({}, "QGMMA"),
            "no QGMMA instruction in the SASS, which this problem's dtype needs (found none)");
}

// Runs check_tensor_core_sass against a stand-in cuobjdump that prints kListing.
class FakeCuobjdump : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_path_ = std::getenv("PATH") ? std::getenv("PATH") : "";
    saved_cuda_ = std::getenv("CUDA_HOME") ? std::getenv("CUDA_HOME") : "";
    listing_ = dir_.path() + "/listing.txt";
    test::write_text(listing_, kListing);
    const std::string tool = dir_.path() + "/cuobjdump";
    test::write_text(tool, "#!/bin/sh\ncat '" + listing_ + "'\n");
    ::chmod(tool.c_str(), 0755);
  }
  void TearDown() override {
    ::setenv("PATH", saved_path_.c_str(), 1);
    if (saved_cuda_.empty()) ::unsetenv("CUDA_HOME"); else ::setenv("CUDA_HOME", saved_cuda_.c_str(), 1);
  }
  test::TempDir dir_, empty_;
  std::string saved_path_, saved_cuda_, listing_;
};

TEST_F(FakeCuobjdump, PassesAndFailsFromTheListing) {
  ::setenv("PATH", (dir_.path() + ":" + saved_path_).c_str(), 1);
  ASSERT_EQ(find_cuobjdump(), dir_.path() + "/cuobjdump");
  auto pass = check_tensor_core_sass("unused.cubin", "_ZN3evo6tensorEv");
  EXPECT_EQ(pass.verdict, v1::VERDICT_PASSED) << pass.detail;
  auto fail = check_tensor_core_sass("unused.cubin", "_ZN3evo4mathEv");
  EXPECT_EQ(fail.verdict, v1::VERDICT_FAILED);
  EXPECT_NE(fail.detail.find("HMMA"), std::string::npos);
}

TEST_F(FakeCuobjdump, NoToolIsSkippedNeverPassed) {
  ::setenv("PATH", empty_.path().c_str(), 1);
  ::setenv("CUDA_HOME", empty_.path().c_str(), 1);
  EXPECT_FALSE(find_cuobjdump());
  auto v = check_tensor_core_sass("unused.cubin", "_ZN3evo6tensorEv");
  EXPECT_EQ(v.verdict, v1::VERDICT_SKIPPED);
  EXPECT_NE(v.detail.find("cuobjdump not found"), std::string::npos);
}

}  // namespace
}  // namespace evo

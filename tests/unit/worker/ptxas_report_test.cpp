// The ptxas -v parser on logs NVRTC 13.0 really printed (data/*.log: one program, three kernels).
#include "ptxas_report.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace evo {
namespace {

std::string log_file(const char* name) { return test::read_text(std::string(EVO_TEST_DATA_DIR) + "/" + name); }

TEST(PtxasReport, PicksTheNamedKernelAmongSeveralOnSm90a) {
  const std::string log = log_file("ptxas_sm90a_three_functions.log");
  ASSERT_FALSE(log.empty());
  auto big = parse_ptxas_report(log, "_ZN3evo1kILi64EEEvPf");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->registers(), 32);
  EXPECT_EQ(big->stack_frame_bytes(), 256);  // not the "256 bytes cumulative stack size" figure
  EXPECT_EQ(big->spill_store_bytes(), 0);
  EXPECT_EQ(big->static_smem_bytes(), 256);
  EXPECT_NE(big->ptxas_log().find("_ZN3evo1kILi64EEEvPf"), std::string::npos);
  EXPECT_EQ(big->ptxas_log().find("_ZN3evo1kILi8EEEvPf"), std::string::npos);

  auto small = parse_ptxas_report(log, "_ZN3evo1kILi8EEEvPf");
  ASSERT_TRUE(small);
  EXPECT_EQ(small->registers(), 28);
  EXPECT_EQ(small->stack_frame_bytes(), 0);
  EXPECT_EQ(small->static_smem_bytes(), 32);

  auto plain = parse_ptxas_report(log, "plain");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->registers(), 8);
  EXPECT_EQ(plain->static_smem_bytes(), 0);  // no smem figure on its line
}

TEST(PtxasReport, ReadsSm80LinesWithConstantBankFigures) {
  const std::string log = log_file("ptxas_sm80_three_functions.log");
  auto small = parse_ptxas_report(log, "_ZN3evo1kILi8EEEvPf");
  ASSERT_TRUE(small);
  EXPECT_EQ(small->registers(), 24);
  EXPECT_EQ(small->static_smem_bytes(), 32);
}

TEST(PtxasReport, SpillFiguresAreRead) {
  const std::string log =
      "ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_80'\n"
      "ptxas info    : Function properties for _Z3fooPf\n"
      "ptxas         .     48 bytes stack frame, 40 bytes spill stores, 36 bytes spill loads\n"
      "ptxas info    : Used 255 registers, used 1 barriers, 48 bytes cumulative stack size, "
      "1024 bytes smem, 360 bytes cmem[0]\n";
  auto r = parse_ptxas_report(log, "_Z3fooPf");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->registers(), 255);
  EXPECT_EQ(r->stack_frame_bytes(), 48);
  EXPECT_EQ(r->spill_store_bytes(), 40);
  EXPECT_EQ(r->spill_load_bytes(), 36);
  EXPECT_EQ(r->static_smem_bytes(), 1024);
}

TEST(PtxasReport, UnknownKernelOrEmptyLogIsNullopt) {
  EXPECT_FALSE(parse_ptxas_report(log_file("ptxas_sm90a_three_functions.log"), "_Z7missingv"));
  EXPECT_FALSE(parse_ptxas_report("", "plain"));
}

// 512 threads leave each 128 registers; a wgmma block that needs more fails in ptxas, which the
// compile gate calls a resource reject (the sm_90a covering sample drew such a genome: 128x256,
// 16 warps, head dim 128).
TEST(PtxasReport, RegisterAllocationFailureIsReadOutOfAFailedLog) {
  const std::string log =
      "ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async instructions are serialized\n"
      "ptxas fatal   : (C7600) Register allocation failed with register count of '128'. Compile the program "
      "with a higher register target\n"
      "ptxas fatal   : Ptx assembly aborted due to errors\n";
  EXPECT_EQ(register_allocation_failure(log), "Register allocation failed with register count of '128'");
  EXPECT_EQ(register_allocation_failure("ptxas fatal   : Unresolved extern function 'f'\n"), std::nullopt);
  EXPECT_EQ(register_allocation_failure(log_file("ptxas_sm90a_three_functions.log")), std::nullopt);
}

}  // namespace
}  // namespace evo

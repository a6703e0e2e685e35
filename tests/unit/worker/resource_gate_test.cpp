#include "resource_gate.h"

#include <gtest/gtest.h>

#include "device_limits.h"

namespace evo {
namespace {

v1::ResourceReport clean() {
  v1::ResourceReport r;
  r.set_registers(96);
  r.set_static_smem_bytes(0);
  r.set_dynamic_smem_bytes(40960);
  return r;
}

TEST(ResourceGate, CleanKernelPasses) { EXPECT_FALSE(resource_violation(clean(), kDefaultSmemLimit)); }

TEST(ResourceGate, SpillsAreRejectedWithTheFigure) {
  auto r = clean();
  r.set_spill_store_bytes(16);
  r.set_spill_load_bytes(8);
  auto why = resource_violation(r, kDefaultSmemLimit);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("spills 16 bytes stored / 8 bytes loaded"), std::string::npos) << *why;
}

TEST(ResourceGate, StackFrameIsRejectedWithTheFigure) {
  auto r = clean();
  r.set_stack_frame_bytes(832);
  auto why = resource_violation(r, kDefaultSmemLimit);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("stack frame 832 bytes"), std::string::npos) << *why;
}

TEST(ResourceGate, StaticPlusDynamicSharedMemoryOverTheLimitIsRejected) {
  auto r = clean();
  r.set_static_smem_bytes(2048);
  r.set_dynamic_smem_bytes(100 * 1024);
  EXPECT_FALSE(resource_violation(r, 103 * 1024));
  auto why = resource_violation(r, 101 * 1024);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("shared memory 104448 bytes"), std::string::npos) << *why;
  EXPECT_NE(why->find("device limit 103424"), std::string::npos) << *why;
}

// A kernel whose warpgroups trade registers (setmaxnreg) draws on the block's share at launch:
// compiled to fewer registers than its launch's min_registers, the hand-over would wait forever.
TEST(ResourceGate, FewerRegistersThanTheHandOverDrawsOnAreRejected) {
  auto r = clean();
  r.set_registers(82);
  EXPECT_FALSE(resource_violation(r, kDefaultSmemLimit)) << "no hand-over: any count";
  EXPECT_FALSE(resource_violation(r, kDefaultSmemLimit, 82));
  auto why = resource_violation(r, kDefaultSmemLimit, 168);
  ASSERT_TRUE(why);
  EXPECT_EQ(*why, "82 registers a thread at launch, fewer than the 168 its warpgroups' register hand-over draws on");
}

// Both compile paths (a genome's, a source kernel's) call a register allocation failure a
// resource reject with the block's threads named, and leave every other failure alone.
TEST(ResourceGate, RegisterAllocationFailureIsAShortageOfRegistersPerThread) {
  const std::string log =
      "ptxas fatal   : (C7600) Register allocation failed with register count of '128'. Compile the program "
      "with a higher register target\nptxas fatal   : Ptx assembly aborted due to errors\n";
  EXPECT_EQ(register_shortage(log, 512),
            "ptxas: Register allocation failed with register count of '128': more registers than 512 threads "
            "leave each thread");
  EXPECT_EQ(register_shortage("ptxas fatal   : Unresolved extern function 'f'\n", 512), std::nullopt);
}

}  // namespace
}  // namespace evo

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

}  // namespace
}  // namespace evo

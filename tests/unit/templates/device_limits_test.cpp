// device_limits.h is the one table of per-architecture limits; the kernel and the search space
// cannot include host code, so they state the sm_90 opt-in shared memory themselves. These tests
// fail when one of those copies drifts from the table.
#include "device_limits.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "attention/fa_s512_v3/kernel_traits.cuh"
#include "template_registry.h"

namespace evo {
namespace {

// Every expression text of a space (derived values, constraints, launch formulas, flops), wherever
// it sits in the JSON.
void collect_texts(const nlohmann::json& j, std::vector<std::string>& out) {
  if (j.is_string()) out.push_back(j.get<std::string>());
  if (j.is_array() || j.is_object())
    for (const auto& item : j) collect_texts(item, out);
}

TEST(DeviceLimits, TableIsWellFormed) {
  for (const DeviceLimits& l : kDeviceLimits) {
    SCOPED_TRACE("sm_" + std::to_string(l.sm_arch));
    EXPECT_EQ(device_limits(l.sm_arch), &l) << "one row per architecture";
    EXPECT_GT(l.smem_per_block_optin, kSmemPerBlockDefault);
    EXPECT_EQ(l.smem_per_block_optin + l.smem_reserved_per_block, l.smem_per_sm);
    EXPECT_GT(l.regs_per_sm, 0);
    EXPECT_GT(l.max_threads_per_sm, 0);
    EXPECT_GT(l.max_blocks_per_sm, 0);
  }
  EXPECT_EQ(device_limits(75), nullptr);
  EXPECT_EQ(kDefaultSmemLimit, device_limits(90)->smem_per_block_optin);
}

TEST(DeviceLimits, KernelStatesTheTablesSm90OptIn) {
  EXPECT_EQ(int64_t{fa::kSmemOptInSm90}, device_limits(90)->smem_per_block_optin)
      << "attention/fa_s512_v3/kernel_traits.cuh: kSmemOptInSm90 drifted from device_limits.h";
}

// A number this large in a space's formulas is a device's shared memory per block (the space's
// own formulas multiply genes; they state no such constant). Each must be sm_90's opt-in figure,
// the only architecture whose kernels (TMA) depend on it; and the space must state it somewhere,
// or this test would hold nothing.
TEST(DeviceLimits, EverySpaceStatesTheTablesSm90OptIn) {
  const std::regex number(R"(\b\d{5,}\b)");
  for (const std::string& id : template_ids()) {
    SCOPED_TRACE(id);
    std::vector<std::string> texts;
    collect_texts(nlohmann::json::parse(find_template(id)->space_json), texts);
    int stated = 0;
    for (const std::string& text : texts)
      for (std::sregex_iterator it(text.begin(), text.end(), number), end; it != end; ++it) {
        const int64_t value = std::stoll(it->str());
        if (value < kSmemPerBlockDefault) continue;
        EXPECT_EQ(value, device_limits(90)->smem_per_block_optin) << "in: " << text;
        ++stated;
      }
    if (id == "fa_s512_v3") {
      EXPECT_GT(stated, 0) << "MERGE_APART states the sm_90 opt-in limit";
    }
  }
}

}  // namespace
}  // namespace evo

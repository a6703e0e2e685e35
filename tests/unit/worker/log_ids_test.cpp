#include "log_ids.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace evo {
namespace {

TEST(LogIds, NameTheCandidateOfTheScopeAndRestoreTheOuterOne) {
  EXPECT_EQ(log_ids(), "") << "outside a candidate (evo-worker eval) a line names none";
  {
    LogIdsScope outer("run-0001", "run-0001-c0001");
    EXPECT_EQ(log_ids(), "run_id=run-0001 candidate_id=run-0001-c0001 ");
    {
      LogIdsScope inner("run-0002", "run-0002-c0007");
      EXPECT_EQ(log_ids(), "run_id=run-0002 candidate_id=run-0002-c0007 ");
    }
    EXPECT_EQ(log_ids(), "run_id=run-0001 candidate_id=run-0001-c0001 ");
  }
  EXPECT_EQ(log_ids(), "");
}

TEST(LogIds, BelongToOneThreadAndTravelOnlyWhenAdopted) {
  LogIdsScope mine("run-0003", "run-0003-c0002");
  std::string seen_plain = "unset", seen_adopted = "unset";
  std::thread plain([&] { seen_plain = log_ids(); });
  plain.join();
  std::thread adopted([&, ids = log_ids()] {
    const auto scope = LogIdsScope::adopt(ids);
    seen_adopted = log_ids();
  });
  adopted.join();
  EXPECT_EQ(seen_plain, "");
  EXPECT_EQ(seen_adopted, "run_id=run-0003 candidate_id=run-0003-c0002 ");
  EXPECT_EQ(log_ids(), "run_id=run-0003 candidate_id=run-0003-c0002 ");
}

}  // namespace
}  // namespace evo

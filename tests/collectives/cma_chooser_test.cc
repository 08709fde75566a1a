// CmaChooser: the per-operation choice between single-copy reads and the shared-memory FIFO,
// on made-up measurements.
#include "collectives/ucx/cma_chooser.h"

#include <gtest/gtest.h>

namespace retort::collectives::ucx {
namespace {

using std::chrono::microseconds;

constexpr size_t kOp = size_t{4} << 20;
constexpr OperationKind kRs = OperationKind::kReduceScatter;

// Runs one operation: asks, then records its bytes at the rate the chosen protocol has.
bool RunOne(CmaChooser& chooser, double cma_gbps, double fifo_gbps, size_t op = kOp,
            OperationKind kind = kRs) {
  const bool cma = chooser.UseCmaFor(kind, op);
  const double gbps = cma ? cma_gbps : fifo_gbps;
  chooser.Record(kind, op, cma, op, std::chrono::nanoseconds(static_cast<int64_t>(op / gbps)));
  return cma;
}

TEST(CmaChooserTest, FixedPoliciesIgnoreMeasurements) {
  CmaChooser always(CmaPolicy::kAlways);
  CmaChooser never(CmaPolicy::kNever);
  for (int i = 0; i < 50; ++i) {
    EXPECT_TRUE(RunOne(always, 1, 10));
    EXPECT_FALSE(RunOne(never, 10, 1));
  }
  EXPECT_EQ(always.RateFor(kRs, kOp, true), 0) << "a fixed policy keeps no measurements";
}

TEST(CmaChooserTest, WarmsUpOnBothThenUsesTheFasterAndExploresTheOther) {
  CmaChooser chooser;
  int cma = 0;
  for (int i = 0; i < 2 * CmaChooser::kWarmup; ++i) cma += RunOne(chooser, 2, 6) ? 1 : 0;
  EXPECT_EQ(cma, CmaChooser::kWarmup) << "the warm-up tries each protocol equally";
  EXPECT_NEAR(chooser.RateFor(kRs, kOp, false), 6e9, 1e7);
  EXPECT_NEAR(chooser.RateFor(kRs, kOp, true), 2e9, 1e7);
  // Steady state: the FIFO, except one exploring operation every kExploreEvery.
  cma = 0;
  const int operations = 4 * CmaChooser::kExploreEvery;
  for (int i = 0; i < operations; ++i) cma += RunOne(chooser, 2, 6) ? 1 : 0;
  EXPECT_EQ(cma, operations / CmaChooser::kExploreEvery);
}

TEST(CmaChooserTest, FollowsTheHostWhenTheOtherProtocolBecomesFaster) {
  CmaChooser chooser;
  for (int i = 0; i < 2 * CmaChooser::kExploreEvery; ++i) RunOne(chooser, 2, 6);
  EXPECT_GT(chooser.RateFor(kRs, kOp, false), chooser.RateFor(kRs, kOp, true));
  // The host changes: the FIFO's hand-over slows from 6 to 1 GB/s; the explorations notice.
  int cma_at_end = 0;
  for (int i = 0; i < 20 * CmaChooser::kExploreEvery; ++i) {
    const bool cma = RunOne(chooser, 2, 1);
    if (i >= 19 * CmaChooser::kExploreEvery) cma_at_end += cma ? 1 : 0;
  }
  EXPECT_GE(cma_at_end, CmaChooser::kExploreEvery - 1)
      << "after the change the chooser should be on CMA, exploring the FIFO rarely";
}

TEST(CmaChooserTest, ExplorationsFindTheUnusedProtocolGettingFaster) {
  CmaChooser chooser;
  for (int i = 0; i < 2 * CmaChooser::kExploreEvery; ++i) RunOne(chooser, 6, 2);
  // Only the explorations see the FIFO now run at 12 GB/s.
  int fifo_at_end = 0;
  for (int i = 0; i < 10 * CmaChooser::kExploreEvery; ++i) {
    const bool cma = RunOne(chooser, 6, 12);
    if (i >= 9 * CmaChooser::kExploreEvery) fifo_at_end += cma ? 0 : 1;
  }
  EXPECT_GE(fifo_at_end, CmaChooser::kExploreEvery - 1);
}

TEST(CmaChooserTest, SizeClassesAreMeasuredApart) {
  CmaChooser chooser;
  const size_t small = size_t{256} << 10;
  const size_t large = size_t{64} << 20;
  for (int i = 0; i < 2 * CmaChooser::kExploreEvery; ++i) {
    RunOne(chooser, 1, 5, small);  // small operations: the FIFO wins
    RunOne(chooser, 9, 3, large);  // large ones: CMA wins
  }
  EXPECT_GT(chooser.RateFor(kRs, small, false), chooser.RateFor(kRs, small, true));
  EXPECT_GT(chooser.RateFor(kRs, large, true), chooser.RateFor(kRs, large, false));
  int small_cma = 0;
  int large_cma = 0;
  for (int i = 0; i < CmaChooser::kExploreEvery - 1; ++i) {
    small_cma += RunOne(chooser, 1, 5, small) ? 1 : 0;
    large_cma += RunOne(chooser, 9, 3, large) ? 1 : 0;
  }
  EXPECT_LE(small_cma, 1);
  EXPECT_GE(large_cma, CmaChooser::kExploreEvery - 2);
}

// An all-reduce moves more per byte of payload than an all-gather of the same size: measured
// together, the protocol that wins the all-gathers would look faster for the all-reduces too.
TEST(CmaChooserTest, OperationKindsAreMeasuredApart) {
  CmaChooser chooser;
  const OperationKind ag = OperationKind::kAllGather;
  const OperationKind ar = OperationKind::kAllReduce;
  for (int i = 0; i < 2 * CmaChooser::kExploreEvery; ++i) {
    RunOne(chooser, 1.0, 1.5, kOp, ar);  // all-reduces: the FIFO wins, at low rates
    RunOne(chooser, 6, 4, kOp, ag);      // all-gathers: CMA wins, at high rates
  }
  EXPECT_EQ(chooser.PrefersCma(ar, kOp), false);
  EXPECT_EQ(chooser.PrefersCma(ag, kOp), true);
  EXPECT_NEAR(chooser.RateFor(ar, kOp, false), 1.5e9, 1e7);
  EXPECT_NEAR(chooser.RateFor(ag, kOp, true), 6e9, 1e7);
  EXPECT_EQ(chooser.PrefersCma(OperationKind::kBroadcast, kOp), std::nullopt)
      << "a kind never run has no measurements";
}

TEST(CmaChooserTest, PoliciesParseFromTheirFlagSpelling) {
  EXPECT_EQ(*ParseCmaPolicy("adaptive"), CmaPolicy::kAdaptive);
  EXPECT_EQ(*ParseCmaPolicy("always"), CmaPolicy::kAlways);
  EXPECT_EQ(*ParseCmaPolicy("never"), CmaPolicy::kNever);
  const auto bad = ParseCmaPolicy("sometimes");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'sometimes'"), std::string::npos);
  EXPECT_NE(bad.status().message().find("adaptive, always, never"), std::string::npos);
}

TEST(CmaChooserTest, UnmeasuredSendsUseCmaUnlessThePolicyForbidsIt) {
  EXPECT_TRUE(CmaChooser(CmaPolicy::kAdaptive).UseCmaUnmeasured());
  EXPECT_TRUE(CmaChooser(CmaPolicy::kAlways).UseCmaUnmeasured());
  EXPECT_FALSE(CmaChooser(CmaPolicy::kNever).UseCmaUnmeasured());
}

TEST(CmaChooserTest, EmptyOrInstantOperationsRecordNothing) {
  CmaChooser chooser;
  chooser.Record(kRs, kOp, true, 0, microseconds(5));
  chooser.Record(kRs, kOp, false, kOp, std::chrono::nanoseconds(0));
  EXPECT_EQ(chooser.RateFor(kRs, kOp, true), 0);
  EXPECT_EQ(chooser.RateFor(kRs, kOp, false), 0);
}

}  // namespace
}  // namespace retort::collectives::ucx

// Straggler rebalancing's decisions (worker/batch_rebalancer.h): even shares to start, no
// proposal before a full window or below the threshold, shares proportional to throughput with
// the floor and whole units, and a window that starts over when shares are adopted.
#include "worker/batch_rebalancer.h"
#include "worker/step_boundary_exchange.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>

namespace retort::worker {
namespace {

using ::testing::ElementsAre;

int64_t Sum(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{0});
}

// Feeds `steps` steps (global steps `*next` on) in which rank r runs its share at
// `throughputs[r]` samples/s.
int64_t next_step = 0;
void Feed(BatchRebalancer& b, const std::vector<double>& throughputs, int steps) {
  for (int i = 0; i < steps; ++i, ++next_step) {
    std::vector<double> samples, seconds;
    for (size_t r = 0; r < throughputs.size(); ++r) {
      samples.push_back(static_cast<double>(b.shares()[r]));
      seconds.push_back(static_cast<double>(b.shares()[r]) / throughputs[r]);
    }
    b.Observe(next_step, samples, seconds);
  }
}

TEST(BatchRebalancerTest, EvenSharesAreTheSamplersSplitInWholeUnits) {
  EXPECT_THAT(BatchRebalancer::EvenShares(10, 4, 1), ElementsAre(3, 3, 2, 2));
  EXPECT_THAT(BatchRebalancer::EvenShares(10, 4, 2), ElementsAre(4, 2, 2, 2));
  // An odd batch with pairs: the last unit is short and ends the last rank's share.
  EXPECT_THAT(BatchRebalancer::EvenShares(9, 2, 2), ElementsAre(6, 3));
}

TEST(BatchRebalancerTest, NoProposalBeforeAFullWindowNorBelowTheThreshold) {
  BatchRebalancer b({.global_batch = 64, .threshold = 0.1, .window_steps = 5}, 2);
  Feed(b, {100, 50}, 4);
  EXPECT_FALSE(b.Propose().has_value()) << "4 of 5 steps";
  BatchRebalancer close({.global_batch = 64, .threshold = 0.1, .window_steps = 5}, 2);
  // 100 vs 90 samples/s: the even split's step is 1.056x the ideal, under the 10% threshold.
  Feed(close, {100, 90}, 5);
  EXPECT_FALSE(close.Propose().has_value());
}

TEST(BatchRebalancerTest, AHalfSpeedRankGetsAShareInProportionToItsThroughput) {
  BatchRebalancer b({.global_batch = 256, .threshold = 0.1, .window_steps = 3}, 4);
  Feed(b, {100, 100, 50, 100}, 3);
  auto p = b.Propose();
  ASSERT_TRUE(p.has_value());
  // 256 x (100, 100, 50, 100) / 350.
  EXPECT_THAT(p->shares, ElementsAre(73, 73, 37, 73));
  EXPECT_EQ(Sum(p->shares), 256);
  EXPECT_NE(p->reason.find("rank 2 at 50%"), std::string::npos) << p->reason;
  // Adopted: a new window, and at the measured throughputs no further change is called for.
  b.Adopt(p->shares);
  EXPECT_EQ(b.steps_in_window(), 0);
  EXPECT_FALSE(b.Propose().has_value());
  Feed(b, {100, 100, 50, 100}, 3);
  EXPECT_FALSE(b.Propose().has_value()) << "balanced now";
  // The straggler recovers: back toward even.
  Feed(b, {100, 100, 100, 100}, 3);
  b.Adopt(b.shares());
  Feed(b, {100, 100, 100, 100}, 3);
  p = b.Propose();
  ASSERT_TRUE(p.has_value());
  EXPECT_THAT(p->shares, ElementsAre(64, 64, 64, 64));
}

TEST(BatchRebalancerTest, SharesKeepTheFloorAndWholeUnits) {
  // A rank at 5% of the others' speed still gets min_share of an even share (in units).
  const auto shares = BatchRebalancer::ProportionalShares({100, 100, 5, 100}, 256, 2, 0.25);
  EXPECT_EQ(Sum(shares), 256);
  EXPECT_EQ(shares[2], 16) << "floor: 0.25 x 64 samples";
  for (size_t r = 0; r + 1 < shares.size(); ++r) EXPECT_EQ(shares[r] % 2, 0) << r;
  // Odd batch with pairs: every share but the last whole pairs, the last ends the batch.
  const auto odd = BatchRebalancer::ProportionalShares({30, 10, 20}, 33, 2, 0.25);
  EXPECT_EQ(Sum(odd), 33);
  EXPECT_EQ(odd[0] % 2, 0);
  EXPECT_EQ(odd[1] % 2, 0);
  EXPECT_GT(odd[0], odd[2]);
  EXPECT_GT(odd[2], odd[1]);
  // Every rank keeps at least one unit, however slow.
  const auto tiny = BatchRebalancer::ProportionalShares({1000, 1}, 8, 2, 0.0);
  EXPECT_THAT(tiny, ElementsAre(6, 2));
}

TEST(BatchRebalancerTest, IgnoresStepsWithoutAMeasurementFromEveryRank) {
  BatchRebalancer b({.global_batch = 64, .threshold = 0.1, .window_steps = 2}, 2);
  b.Observe(0, {32, 0}, {0.3, 0});  // a rank's first boundary of the generation: nothing yet
  b.Observe(0, {32, 32}, {0.3});    // malformed
  EXPECT_EQ(b.steps_in_window(), 0);
  Feed(b, {100, 25}, 2);
  auto p = b.Propose();
  ASSERT_TRUE(p.has_value());
  EXPECT_THAT(p->shares, ElementsAre(51, 13));
}

TEST(BatchRebalancerTest, StepsBeforeTheAdoptedSharesTakeEffectAreNotMeasured) {
  BatchRebalancer b({.global_batch = 64, .threshold = 0.1, .window_steps = 2}, 2);
  b.Adopt({40, 24}, /*from_step=*/10);
  b.Observe(8, {32, 32}, {0.3, 0.9});  // still the old shares
  b.Observe(9, {32, 32}, {0.3, 0.9});
  EXPECT_EQ(b.steps_in_window(), 0);
  b.Observe(10, {40, 24}, {0.4, 0.24});
  EXPECT_EQ(b.steps_in_window(), 1);
}

TEST(BatchRebalancerTest, TheSameMeasurementsGiveTheSameShares) {
  const std::vector<double> t = {97.3, 101.9, 48.2, 99.1, 100.4};
  EXPECT_EQ(BatchRebalancer::ProportionalShares(t, 1024, 2, 0.25),
            BatchRebalancer::ProportionalShares(t, 1024, 2, 0.25));
}

// The boundary all-reduce, summed over three simulated ranks: flags counted, each rank's
// measurement in its slot, rank 0's proposal delivered exactly (a large first step included).
TEST(StepBoundaryExchangeTest, ASumOverRanksDeliversEveryPartExactly) {
  const int world = 3;
  std::vector<StepBoundaryExchange> ranks;
  for (int r = 0; r < world; ++r) ranks.emplace_back(r, world, /*rebalancing=*/true);
  for (int r = 0; r < world; ++r) {
    auto& x = ranks[static_cast<size_t>(r)];
    x.Clear();
    x.SetFlags(/*newer_generation=*/r == 2, /*leaving=*/false, /*paused=*/false);
    x.SetMeasurement(10.0 + r, 0.25 * (r + 1));
    if (r == 0) x.SetProposal(123456789, {20, 7, 5});
  }
  std::vector<float> sum(ranks[0].size(), 0.f);
  for (auto& x : ranks)
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += x.data()[i];
  StepBoundaryExchange got(1, world, true);
  std::copy(sum.begin(), sum.end(), got.data());
  EXPECT_TRUE(got.newer_generation());
  EXPECT_FALSE(got.leaving());
  EXPECT_FALSE(got.paused());
  EXPECT_THAT(got.samples(), ElementsAre(10, 11, 12));
  EXPECT_THAT(got.seconds(), ElementsAre(0.25, 0.5, 0.75));
  auto p = got.proposal();
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->from_step, 123456789);
  EXPECT_THAT(p->shares, ElementsAre(20, 7, 5));
  // No proposal written: none delivered; without rebalancing the payload is the three flags.
  got.Clear();
  EXPECT_FALSE(got.proposal().has_value());
  StepBoundaryExchange plain(0, 8, false);
  EXPECT_EQ(plain.size(), 3u);
  plain.SetMeasurement(5, 1);
  plain.SetProposal(9, {1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_FALSE(plain.proposal().has_value());
  EXPECT_TRUE(plain.samples().empty());
}

}  // namespace
}  // namespace retort::worker

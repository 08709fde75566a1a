#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

#include "trainer/data/random.h"
#include "trainer/data/sampler.h"

namespace retort::trainer::data {
namespace {

Sampler MakeSampler(int64_t n, int64_t batch, uint64_t seed, bool drop_last = true) {
  SamplerConfig config;
  config.dataset_size = n;
  config.global_batch = batch;
  config.seed = seed;
  config.drop_last = drop_last;
  auto sampler = Sampler::Create(config);
  EXPECT_TRUE(sampler.ok()) << sampler.status();
  return *sampler;
}

TEST(DataRandom, SplitMix64MatchesReferenceSequence) {
  // Reference outputs of splitmix64.c (Vigna) for seed 1234567.
  SplitMix64 rng(1234567);
  EXPECT_EQ(rng.Next(), 6457827717110365317ull);
  EXPECT_EQ(rng.Next(), 3203168211198807973ull);
  EXPECT_EQ(rng.Next(), 9817491932198370423ull);
}

TEST(DataRandom, BelowStaysInRangeAndCoversIt) {
  SplitMix64 rng(7);
  std::vector<int> counts(7, 0);
  for (int i = 0; i < 7000; ++i) {
    const uint64_t v = rng.Below(7);
    ASSERT_LT(v, 7u);
    ++counts[v];
  }
  for (int c : counts) EXPECT_GT(c, 800);  // expectation 1000 each
}

TEST(DataRandom, AugmentationSeedIsNeverZeroAndDependsOnAllInputs) {
  std::set<uint64_t> seeds;
  for (int64_t epoch = 0; epoch < 4; ++epoch) {
    for (int64_t index = 0; index < 100; ++index) {
      const uint64_t s = AugmentationSeed(42, epoch, index);
      EXPECT_NE(s, 0u);
      seeds.insert(s);
    }
  }
  EXPECT_EQ(seeds.size(), 400u);
  EXPECT_NE(AugmentationSeed(42, 0, 0), AugmentationSeed(43, 0, 0));
}

TEST(DataSampler, EpochPermutationIsAPermutation) {
  for (int64_t n : {1, 2, 3, 10, 1000, 60000}) {
    std::vector<int64_t> perm = EpochPermutation(5, 0, n);
    ASSERT_EQ(static_cast<int64_t>(perm.size()), n);
    std::vector<int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> expected(static_cast<size_t>(n));
    std::iota(expected.begin(), expected.end(), int64_t{0});
    EXPECT_EQ(sorted, expected) << "n=" << n;
  }
}

TEST(DataSampler, PermutationIsDeterministicAndChangesWithEpochAndSeed) {
  const auto a = EpochPermutation(11, 3, 5000);
  EXPECT_EQ(a, EpochPermutation(11, 3, 5000));
  EXPECT_NE(a, EpochPermutation(11, 4, 5000));
  EXPECT_NE(a, EpochPermutation(12, 3, 5000));
  // Not the identity (a shuffle actually happened).
  int64_t fixed_points = 0;
  for (size_t i = 0; i < a.size(); ++i) fixed_points += a[i] == static_cast<int64_t>(i);
  EXPECT_LT(fixed_points, 50);
}

TEST(DataSampler, ContiguousSplitSizesDifferByAtMostOne) {
  for (int64_t n : {0, 1, 7, 64, 65}) {
    for (int world = 1; world <= 6; ++world) {
      int64_t expected_begin = 0;
      int64_t min_size = n;
      int64_t max_size = 0;
      for (int r = 0; r < world; ++r) {
        auto [b, e] = ContiguousSplit(n, r, world);
        EXPECT_EQ(b, expected_begin);
        expected_begin = e;
        min_size = std::min(min_size, e - b);
        max_size = std::max(max_size, e - b);
      }
      EXPECT_EQ(expected_begin, n);
      EXPECT_LE(max_size - min_size, 1);
    }
  }
}

// With a split unit (batch mixing's pairs), slices are whole units: no unit is cut, the sizes
// counts differ by at most one, and unit 1 is the plain split.
TEST(DataSampler, SplitUnitsAreNeverCut) {
  for (int64_t n : {0, 1, 2, 7, 64, 65}) {
    for (int world = 1; world <= 6; ++world) {
      int64_t expected_begin = 0, min_size = n, max_size = 0;
      for (int r = 0; r < world; ++r) {
        auto [b, e] = ContiguousSplit(n, r, world, 2);
        EXPECT_EQ(b, expected_begin);
        EXPECT_TRUE(b % 2 == 0 || b == n) << "n " << n << " world " << world << " rank " << r;
        EXPECT_TRUE(e % 2 == 0 || e == n);
        EXPECT_EQ(ContiguousSplit(n, r, world, 1), ContiguousSplit(n, r, world));
        expected_begin = e;
        const int64_t units = (e - b + 1) / 2;
        min_size = std::min(min_size, units);
        max_size = std::max(max_size, units);
      }
      EXPECT_EQ(expected_begin, n);
      EXPECT_LE(max_size - min_size, 1) << "n " << n << " world " << world;
    }
  }
  SamplerConfig config{100, 10, 7, true};
  config.split_unit = 0;
  EXPECT_FALSE(Sampler::Create(config).ok());
}

// Every step's slices over ranks form exactly that step's window of the permutation, and the
// weights sum to one, for every world size 1..5.
TEST(DataSampler, RanksPartitionEveryStepAndWeightsSumToOne) {
  const Sampler sampler = MakeSampler(103, 10, 99);
  ASSERT_EQ(sampler.steps_per_epoch(), 10);
  const auto perm = sampler.Permutation(2);
  for (int world = 1; world <= 5; ++world) {
    for (int64_t step = 0; step < sampler.steps_per_epoch(); ++step) {
      std::vector<int64_t> joined;
      double weight_sum = 0;
      for (int r = 0; r < world; ++r) {
        auto slice = sampler.Slice(2, step, r, world);
        ASSERT_TRUE(slice.ok()) << slice.status();
        EXPECT_EQ(slice->batch_size, 10);
        EXPECT_DOUBLE_EQ(slice->weight, static_cast<double>(slice->size()) / 10.0);
        weight_sum += slice->weight;
        joined.insert(joined.end(), slice->indices.begin(), slice->indices.end());
      }
      EXPECT_NEAR(weight_sum, 1.0, 1e-12);
      const std::vector<int64_t> window(perm->begin() + step * 10, perm->begin() + (step + 1) * 10);
      EXPECT_EQ(joined, window) << "world " << world << " step " << step;
    }
  }
}

// Changing the world size at any step boundary (to any of 1..5) neither skips nor repeats a
// sample: the epoch consumes exactly the first steps*B positions of the permutation.
TEST(DataSampler, WorldSizeChangeAtAnyStepSkipsAndRepeatsNothing) {
  const int64_t n = 57;
  const int64_t batch = 8;
  const Sampler sampler = MakeSampler(n, batch, 1234);
  const int64_t steps = sampler.steps_per_epoch();
  ASSERT_EQ(steps, 7);
  const auto perm = sampler.Permutation(0);
  std::vector<int64_t> expected(perm->begin(), perm->begin() + steps * batch);
  std::sort(expected.begin(), expected.end());
  for (int before = 1; before <= 5; ++before) {
    for (int after = 1; after <= 5; ++after) {
      for (int64_t switch_step = 0; switch_step <= steps; ++switch_step) {
        std::vector<int64_t> seen;
        for (int64_t step = 0; step < steps; ++step) {
          const int world = step < switch_step ? before : after;
          for (int r = 0; r < world; ++r) {
            auto slice = sampler.Slice(0, step, r, world);
            ASSERT_TRUE(slice.ok()) << slice.status();
            seen.insert(seen.end(), slice->indices.begin(), slice->indices.end());
          }
        }
        std::sort(seen.begin(), seen.end());
        ASSERT_EQ(seen, expected) << before << "->" << after << " at step " << switch_step;
      }
    }
  }
}

TEST(DataSampler, KeepLastPartialBatchCoversWholeDataset) {
  const Sampler sampler = MakeSampler(23, 5, 3, /*drop_last=*/false);
  ASSERT_EQ(sampler.steps_per_epoch(), 5);
  EXPECT_EQ(sampler.BatchSize(4), 3);
  std::set<int64_t> seen;
  for (int64_t step = 0; step < 5; ++step) {
    double weight_sum = 0;
    for (int r = 0; r < 2; ++r) {
      auto slice = sampler.Slice(1, step, r, 2);
      ASSERT_TRUE(slice.ok()) << slice.status();
      weight_sum += slice->weight;
      for (int64_t i : slice->indices) EXPECT_TRUE(seen.insert(i).second) << "repeated " << i;
    }
    EXPECT_NEAR(weight_sum, 1.0, 1e-12);
  }
  EXPECT_EQ(seen.size(), 23u);
  auto last = sampler.Slice(1, 4, 0, 2);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->size(), 2);
  EXPECT_DOUBLE_EQ(last->weight, 2.0 / 3.0);
}

TEST(DataSampler, DropLastDropsOnlyTheTail) {
  const Sampler sampler = MakeSampler(23, 5, 3);
  EXPECT_EQ(sampler.steps_per_epoch(), 4);
  EXPECT_FALSE(sampler.Slice(0, 4, 0, 1).ok());
}

TEST(DataSampler, IndependentInstancesAgree) {
  const Sampler a = MakeSampler(500, 32, 77);
  const Sampler b = MakeSampler(500, 32, 77);
  const Sampler other_seed = MakeSampler(500, 32, 78);
  for (int64_t epoch : {0, 1, 5}) {
    for (int64_t step : {0, 7, 14}) {
      auto sa = a.Slice(epoch, step, 1, 3);
      auto sb = b.Slice(epoch, step, 1, 3);
      ASSERT_TRUE(sa.ok() && sb.ok());
      EXPECT_EQ(sa->indices, sb->indices);
      EXPECT_EQ(sa->begin, sb->begin);
    }
  }
  EXPECT_NE(a.Slice(0, 0, 0, 1)->indices, other_seed.Slice(0, 0, 0, 1)->indices);
}

TEST(DataSampler, MoreRanksThanSamplesGivesEmptySlicesWithZeroWeight) {
  const Sampler sampler = MakeSampler(10, 3, 0);
  double weight_sum = 0;
  for (int r = 0; r < 5; ++r) {
    auto slice = sampler.Slice(0, 0, r, 5);
    ASSERT_TRUE(slice.ok());
    EXPECT_EQ(slice->size(), r < 3 ? 1 : 0);
    weight_sum += slice->weight;
  }
  EXPECT_NEAR(weight_sum, 1.0, 1e-12);
}

TEST(DataSampler, SharesSplitAFullBatchInRankOrderWeightedBySize) {
  const Sampler sampler = MakeSampler(100, 10, 5);
  const std::vector<int64_t> shares = {6, 1, 3};
  std::vector<int64_t> covered;
  double weight_sum = 0;
  for (int r = 0; r < 3; ++r) {
    auto slice = sampler.Slice(1, 2, r, 3, shares);
    ASSERT_TRUE(slice.ok()) << slice.status();
    EXPECT_EQ(slice->size(), shares[static_cast<size_t>(r)]);
    EXPECT_DOUBLE_EQ(slice->weight, static_cast<double>(shares[static_cast<size_t>(r)]) / 10.0);
    weight_sum += slice->weight;
    covered.insert(covered.end(), slice->indices.begin(), slice->indices.end());
  }
  EXPECT_NEAR(weight_sum, 1.0, 1e-12);
  // The same positions, in the same order, as the even split's ranks together.
  std::vector<int64_t> even;
  for (int r = 0; r < 3; ++r) {
    auto slice = sampler.Slice(1, 2, r, 3);
    even.insert(even.end(), slice->indices.begin(), slice->indices.end());
  }
  EXPECT_EQ(covered, even);
  EXPECT_EQ(sampler.GlobalStep({1, 2}), 12);
}

TEST(DataSampler, BadSharesAreRefusedAndAPartialBatchIsSplitEvenly) {
  EXPECT_TRUE(ValidateBatchShares({4, 4, 2}, 10, 2, 3).ok());
  EXPECT_TRUE(ValidateBatchShares({4, 2, 3}, 9, 2, 3).ok()) << "the last share ends the batch";
  EXPECT_EQ(ValidateBatchShares({3, 4, 3}, 10, 2, 3).code(), StatusCode::kInvalidArgument)
      << "a pair cut";
  EXPECT_EQ(ValidateBatchShares({4, 4}, 10, 1, 3).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateBatchShares({4, 4, 1}, 10, 1, 3).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateBatchShares({12, -2}, 10, 1, 2).code(), StatusCode::kInvalidArgument);
  const Sampler sampler = MakeSampler(25, 10, 0, /*drop_last=*/false);
  EXPECT_EQ(sampler.Slice(0, 0, 0, 2, {3, 4}).status().code(), StatusCode::kInvalidArgument);
  // Step 2 holds the last 5 samples: the shares of a full batch do not apply.
  auto last = sampler.Slice(0, 2, 0, 2, {8, 2});
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->size(), 3);
}

TEST(DataSampler, AdvanceRollsOverToTheNextEpoch) {
  const Sampler sampler = MakeSampler(10, 4, 0);  // 2 steps per epoch
  SamplerState s;
  s = sampler.Advance(s);
  EXPECT_EQ(s, (SamplerState{0, 1}));
  s = sampler.Advance(s);
  EXPECT_EQ(s, (SamplerState{1, 0}));
}

TEST(DataSampler, RejectsInvalidConfigAndArguments) {
  EXPECT_FALSE(Sampler::Create(SamplerConfig{0, 1, 0, true}).ok());
  EXPECT_FALSE(Sampler::Create(SamplerConfig{10, 0, 0, true}).ok());
  EXPECT_FALSE(Sampler::Create(SamplerConfig{10, 11, 0, true}).ok());
  EXPECT_TRUE(Sampler::Create(SamplerConfig{10, 11, 0, false}).ok());
  const Sampler sampler = MakeSampler(10, 2, 0);
  EXPECT_EQ(sampler.Slice(-1, 0, 0, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(sampler.Slice(0, 5, 0, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(sampler.Slice(0, 0, 2, 2).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(sampler.Slice(0, 0, 0, 0).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace retort::trainer::data

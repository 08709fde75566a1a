// World-size invariance of the ZeRO-1 KD step on the N-rank thread fake, NaN skipping, and
// optimizer-state export/import across plans.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tests/trainer/kd_step_cluster.h"
#include "tests/trainer/trainer_test_util.h"
#include "trainer/flat_parameters.h"
#include "trainer/grad_reducer.h"
#include "trainer/sharded_adamw.h"

namespace retort::trainer {
namespace {

using test::MustMake;
using test::RunRanks;
using test::SyntheticBatch;
using test::TinyVit;
using testing::ThreadShardComm;
using testing::ThreadShardGroup;

using test::KdStepCluster;
constexpr int64_t kGlobalBatch = KdStepCluster::kGlobalBatch;

KdStepOptions Options() { return test::KdTestOptions(); }

KdStepOptions WithLocalParallelism(int parts) {
  KdStepOptions o = Options();
  o.local_parallelism = parts;
  return o;
}

ShardPlan EvenPlan(int world, int64_t numel) { return MakeEvenShardPlan(numel, world, 64); }

class WorldSizeInvarianceTest : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(1); }
};

TEST_F(WorldSizeInvarianceTest, SameParametersAfter20StepsForOneToFourRanks) {
  KdStepCluster single(1, Options());
  auto reference_results = single.Run({kGlobalBatch}, 0, 20);
  const torch::Tensor reference = single.Params(0);
  ASSERT_EQ(reference_results.back().step, 20);
  // Training moved the parameters and the loss went down.
  KdStepCluster untouched(1, Options());
  EXPECT_GT(test::RelativeDiff(untouched.Params(0), reference), 1e-3);
  EXPECT_LT(reference_results.back().loss, reference_results.front().loss);

  struct Config {
    int world;
    std::vector<int64_t> sizes;
    std::function<ShardPlan(int64_t)> plan;
  };
  std::vector<Config> configs = {
      {2, {7, 5}, [](int64_t n) { return EvenPlan(2, n); }},
      // An unaligned, lopsided plan: the optimizer accepts any tiling.
      {3,
       {5, 4, 3},
       [](int64_t n) {
         return ShardPlan{{{0, 100}, {100, n - 107}, {n - 7, 7}}};
       }},
      // Rank 1 has an empty slice this run.
      {4, {5, 0, 4, 3}, [](int64_t n) { return EvenPlan(4, n); }},
  };
  for (const Config& config : configs) {
    SCOPED_TRACE("world " + std::to_string(config.world));
    KdStepCluster cluster(config.world, Options(), 7, config.plan);
    auto results = cluster.Run(config.sizes, 0, 20);
    ASSERT_EQ(results.size(), 20u);
    for (int r = 0; r < config.world; ++r) {
      EXPECT_TRUE(torch::equal(cluster.Params(r), cluster.Params(0))) << "rank " << r;
      EXPECT_LT(test::RelativeDiff(cluster.Params(r), reference), 1e-5) << "rank " << r;
    }
    for (size_t s = 0; s < results.size(); ++s)
      EXPECT_NEAR(results[s].loss, reference_results[s].loss, 1e-4 * reference_results[s].loss);
  }
}

TEST_F(WorldSizeInvarianceTest, NonFiniteGradientSkipsTheStepOnEveryRank) {
  KdStepCluster cluster(2, Options());
  cluster.Run({6, 6}, 0, 3);
  std::vector<torch::Tensor> params, m, v;
  for (auto& step : cluster.steps) {
    params.push_back(step->flat().params().clone());
    m.push_back(step->optimizer().exp_avg().clone());
    v.push_back(step->optimizer().exp_avg_sq().clone());
  }
  // A NaN pixel in rank 1's slice poisons its gradients only.
  auto results = cluster.Run({6, 6}, 3, 1, [](int rank, int, Batch& b) {
    if (rank == 1) b.images[0][0][0][0] = std::numeric_limits<float>::quiet_NaN();
  });
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].skipped);
  EXPECT_FALSE(std::isfinite(results[0].grad_norm));
  for (size_t r = 0; r < cluster.steps.size(); ++r) {
    auto& step = cluster.steps[r];
    EXPECT_EQ(step->skipped_steps(), 1) << "rank " << r;
    EXPECT_EQ(step->optimizer().step(), 3) << "rank " << r;
    EXPECT_TRUE(torch::equal(step->flat().params(), params[r])) << "rank " << r;
    EXPECT_TRUE(torch::equal(step->optimizer().exp_avg(), m[r])) << "rank " << r;
    EXPECT_TRUE(torch::equal(step->optimizer().exp_avg_sq(), v[r])) << "rank " << r;
  }
  // The next clean step updates normally.
  results = cluster.Run({6, 6}, 4, 1);
  EXPECT_FALSE(results[0].skipped);
  EXPECT_EQ(cluster.steps[0]->optimizer().step(), 4);
  EXPECT_TRUE(torch::isfinite(cluster.Params(0)).all().item<bool>());
  EXPECT_FALSE(torch::equal(cluster.Params(0), params[0]));
}

TEST_F(WorldSizeInvarianceTest, OptimizerStateMovesToANewPlan) {
  KdStepCluster two(2, Options());
  two.Run({6, 6}, 0, 5);
  // Re-shard onto three ranks whose students start from different weights.
  KdStepCluster three(3, Options(), /*student_seed=*/99);
  for (auto& dst : three.steps) {
    const ShardRange want = dst->optimizer().range();
    for (auto& src : two.steps) {
      const ShardRange have = src->optimizer().range();
      const int64_t begin = std::max(want.offset, have.offset);
      const int64_t end = std::min(want.end(), have.end());
      if (end <= begin) continue;
      auto piece = src->optimizer().Export({begin, end - begin});
      ASSERT_TRUE(piece.ok()) << piece.status();
      ASSERT_TRUE(dst->optimizer().Import(*piece).ok());
    }
    EXPECT_EQ(dst->optimizer().step(), 5);
  }
  RunRanks(3, [&](int r) {
    ASSERT_TRUE(three.steps[r]->AllGatherParameters(Deadline::AfterMs(10000)).ok());
  });
  EXPECT_TRUE(torch::equal(three.Params(2), two.Params(0)));
  two.Run({6, 6}, 5, 5);
  three.Run({4, 4, 4}, 5, 5);
  EXPECT_LT(test::RelativeDiff(three.Params(1), two.Params(0)), 1e-5);
}

TEST_F(WorldSizeInvarianceTest, ReconfigureGrowsTheGroupWithoutLosingState) {
  KdStepCluster reference(2, Options());
  reference.Run({6, 6}, 0, 8);
  KdStepCluster cluster(2, Options());
  cluster.Run({6, 6}, 0, 4);
  // Generation 2: three ranks; ranks 0 and 1 keep their KdStep, rank 2 joins with other weights.
  const int64_t numel = cluster.steps[0]->flat().numel();
  const ShardPlan plan = ShardPlan{{{0, 500}, {500, numel - 900}, {numel - 400, 400}}};
  std::vector<OptimizerShardState> pieces;
  for (auto& step : cluster.steps) {
    const ShardRange have = step->optimizer().range();
    for (const ShardRange& want : plan.ranges) {
      const int64_t begin = std::max(want.offset, have.offset);
      const int64_t end = std::min(want.end(), have.end());
      if (end <= begin) continue;
      auto piece = step->optimizer().Export({begin, end - begin});
      ASSERT_TRUE(piece.ok()) << piece.status();
      pieces.push_back(std::move(*piece));
    }
  }
  KdStepCluster joiner(1, Options(), /*student_seed=*/55);
  auto group = std::make_shared<ThreadShardGroup>(3);
  std::vector<std::unique_ptr<ThreadShardComm>> comms;
  std::vector<KdStep*> steps = {cluster.steps[0].get(), cluster.steps[1].get(),
                                joiner.steps[0].get()};
  for (int r = 0; r < 3; ++r) {
    comms.push_back(std::make_unique<ThreadShardComm>(group, r));
    ASSERT_TRUE(steps[r]->Reconfigure(comms[r].get(), plan).ok());
    EXPECT_EQ(steps[r]->optimizer().step(), 0);
    for (const auto& piece : pieces) {
      const ShardRange mine = plan.ranges[r];
      if (piece.range.offset >= mine.offset && piece.range.end() <= mine.end()) {
        ASSERT_TRUE(steps[r]->optimizer().Import(piece).ok());
      }
    }
    EXPECT_EQ(steps[r]->optimizer().step(), 4);
  }
  EXPECT_EQ(steps[0]->Reconfigure(comms[0].get(), ShardPlan{{{0, 1}}}).code(),
            StatusCode::kInvalidArgument);
  RunRanks(3, [&](int r) {
    ASSERT_TRUE(steps[r]->AllGatherParameters(Deadline::AfterMs(10000)).ok());
    for (int s = 4; s < 8; ++s) {
      Batch global = SyntheticBatch(kGlobalBatch, 1, 8, 10, 1000 + s, s * kGlobalBatch);
      auto result = steps[r]->Step(test::Slice(global, {4, 4, 4}, r));
      ASSERT_TRUE(result.ok()) << result.status();
    }
  });
  for (int r = 0; r < 3; ++r)
    EXPECT_LT(test::RelativeDiff(steps[r]->flat().params(), reference.Params(0)), 1e-5) << r;
}

TEST_F(WorldSizeInvarianceTest, ConcurrentPartsOfASliceMatchOnePass) {
  KdStepCluster one_pass(2, Options());
  one_pass.Run({7, 5}, 0, 10);
  at::set_num_threads(2);  // the parts really run concurrently
  KdStepCluster parts(2, WithLocalParallelism(3));
  auto results = parts.Run({7, 5}, 0, 10);
  at::set_num_threads(1);
  EXPECT_FALSE(results.back().skipped);
  EXPECT_TRUE(torch::equal(parts.Params(0), parts.Params(1)));
  EXPECT_LT(test::RelativeDiff(parts.Params(0), one_pass.Params(0)), 1e-5);
}

TEST(ShardedAdamWTest, ImportRejectsPiecesOutsideTheRangeOrWithAnotherStep) {
  auto flat = torch::zeros({100});
  ShardedAdamW opt(AdamWOptions{}, flat, {10, 50});
  OptimizerShardState piece;
  piece.range = {55, 10};
  piece.step = 3;
  piece.params = piece.exp_avg = piece.exp_avg_sq = torch::ones({10});
  Status s = opt.Import(piece);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s;
  piece.range = {20, 10};
  ASSERT_TRUE(opt.Import(piece).ok());
  EXPECT_EQ(flat[25].item<float>(), 1.0f);
  EXPECT_EQ(flat[35].item<float>(), 0.0f);
  piece.step = 4;
  piece.range = {40, 10};
  EXPECT_EQ(opt.Import(piece).code(), StatusCode::kInvalidArgument);
  piece.step = 3;
  piece.params = torch::ones({9});
  EXPECT_EQ(opt.Import(piece).code(), StatusCode::kInvalidArgument);
}

TEST(ShardedAdamWTest, MatchesTorchAdamW) {
  torch::manual_seed(3);
  auto init = torch::randn({300});
  auto flat = init.clone();
  AdamWOptions o;
  o.lr = 1e-2;
  o.weight_decay = 0.1;
  ShardedAdamW opt(o, flat, {0, 300});
  auto p = init.clone().requires_grad_(true);
  torch::optim::AdamW ref({p}, torch::optim::AdamWOptions(o.lr).weight_decay(o.weight_decay));
  for (int i = 0; i < 10; ++i) {
    auto g = torch::randn({300});
    opt.Update(g, 1.0);
    p.mutable_grad() = g.clone();
    ref.step();
  }
  EXPECT_LT(test::RelativeDiff(flat, p.detach()), 1e-6);
}

TEST(LearningRateTest, WarmupThenCosine) {
  AdamWOptions o;
  o.lr = 1.0;
  o.min_lr = 0.1;
  o.warmup_steps = 4;
  o.total_steps = 14;
  EXPECT_DOUBLE_EQ(LearningRateAt(o, 1), 0.25);
  EXPECT_DOUBLE_EQ(LearningRateAt(o, 4), 1.0);
  EXPECT_NEAR(LearningRateAt(o, 9), 0.1 + 0.45, 1e-12);  // half way through the cosine
  EXPECT_DOUBLE_EQ(LearningRateAt(o, 14), 0.1);
  EXPECT_DOUBLE_EQ(LearningRateAt(o, 100), 0.1);
  o.total_steps = 2;
  EXPECT_EQ(ValidateAdamWOptions(o).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace retort::trainer

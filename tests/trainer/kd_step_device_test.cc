// The device-agnostic parts of the KD step, on the CPU: a single rank runs no collective,
// collectives staged through host buffers give exactly what direct ones give, the fused AdamW
// kernel gives what the loop gives, scaled-dot-product attention gives what the batched
// matmuls give, and asking for a GPU that is not there is a precise error.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <atomic>

#include "tests/trainer/kd_step_cluster.h"
#include "tests/trainer/trainer_test_util.h"
#include "trainer/device.h"
#include "trainer/grad_reducer.h"
#include "trainer/kd_step.h"

namespace retort::trainer {
namespace {

using test::MustMake;
using test::SyntheticBatch;
using test::TinyVit;
using testing::ThreadShardComm;
using testing::ThreadShardGroup;

using Ranks = test::KdStepCluster;
constexpr int64_t kGlobalBatch = Ranks::kGlobalBatch;

KdStepOptions Options() {
  KdStepOptions o = test::KdTestOptions();
  o.optimizer.warmup_steps = 3;
  o.optimizer.total_steps = 30;
  o.optimizer.max_grad_norm = 0.5;  // small enough to clip
  return o;
}

class KdStepDeviceAgnosticTest : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(1); }
};

TEST_F(KdStepDeviceAgnosticTest, ASingleRankRunsNoCollective) {
  Ranks one(1, Options());
  auto results = one.Run(5);
  EXPECT_EQ(one.collective_calls(0), 0);
  ASSERT_EQ(results.size(), 5u);
  EXPECT_EQ(results.back().step, 5);
  // Clipping was active (the norm is above max_grad_norm) and training moved the loss.
  EXPECT_GT(results.front().grad_norm, 0.5);
  // The same run on two ranks (which does exchange) reaches the same parameters.
  Ranks two(2, Options());
  two.Run(5);
  EXPECT_GT(two.collective_calls(0), 0);
  EXPECT_LT(test::RelativeDiff(two.Params(0), one.Params(0)), 1e-5);
}

TEST_F(KdStepDeviceAgnosticTest, HostStagedCollectivesGiveExactlyTheDirectResult) {
  Ranks direct(2, Options());
  KdStepOptions staged_options = Options();
  staged_options.stage_collectives_through_host = true;
  Ranks staged(2, staged_options);
  EXPECT_FALSE(direct.steps[0]->reducer().stages_through_host());
  EXPECT_TRUE(staged.steps[0]->reducer().stages_through_host());
  auto a = direct.Run(6);
  auto b = staged.Run(6);
  for (int r = 0; r < 2; ++r)
    EXPECT_TRUE(torch::equal(direct.Params(r), staged.Params(r))) << "rank " << r;
  for (size_t s = 0; s < a.size(); ++s) EXPECT_EQ(a[s].loss, b[s].loss) << "step " << s;
}

TEST_F(KdStepDeviceAgnosticTest, FusedAdamWKernelMatchesTheLoop) {
  KdStepOptions loop_options = Options();
  loop_options.optimizer_kernel = AdamWKernel::kLoop;
  KdStepOptions fused_options = Options();
  fused_options.optimizer_kernel = AdamWKernel::kFused;
  Ranks loop(2, loop_options);
  Ranks fused(2, fused_options);
  EXPECT_EQ(fused.steps[0]->optimizer().kernel(), AdamWKernel::kFused);
  loop.Run(8);
  fused.Run(8);
  EXPECT_LT(test::RelativeDiff(fused.Params(0), loop.Params(0)), 1e-6);
  EXPECT_GT(test::RelativeDiff(fused.Params(0), Ranks(1, Options()).Params(0)), 1e-4);
}

TEST_F(KdStepDeviceAgnosticTest, NonFiniteLossSkipsWithTheFusedKernelToo) {
  KdStepOptions options = Options();
  options.optimizer_kernel = AdamWKernel::kFused;
  Ranks one(1, options);
  one.Run(2);
  const auto before = one.Params(0);
  Batch poisoned = SyntheticBatch(kGlobalBatch, 1, 8, 10, 9, 0);
  poisoned.images[0][0][0][0] = std::numeric_limits<float>::quiet_NaN();
  auto r = one.steps[0]->Step(poisoned);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->skipped);
  EXPECT_EQ(r->step, 2);
  EXPECT_EQ(r->lr, 0.0);
  EXPECT_TRUE(torch::equal(one.Params(0), before));
  EXPECT_EQ(one.steps[0]->skipped_steps(), 1);
}

TEST_F(KdStepDeviceAgnosticTest, WeightDecayGroupsChangeTrainingOnlyThroughTheMask) {
  KdStepOptions all = Options();
  all.optimizer.decay_all_parameters = true;
  all.optimizer.weight_decay = 0.5;  // large, so the groups make a visible difference
  KdStepOptions masked = all;
  masked.optimizer.decay_all_parameters = false;
  Ranks a(1, all), b(1, masked);
  a.Run(4);
  b.Run(4);
  // Biases and norm weights are where the two differ; e.g. the final norm's weight (ones at
  // start) shrinks only when it decays.
  EXPECT_GT(test::RelativeDiff(a.Params(0), b.Params(0)), 1e-6);
  EXPECT_EQ(b.steps[0]->optimizer().decayed().size() > 1, true);
}

TEST(VitAttentionTest, ScaledDotProductAttentionMatchesBatchedMatmuls) {
  VitConfig bmm = TinyVit(16, 2);
  bmm.attention = VitAttention::kBatchedMatmul;
  VitConfig sdpa = bmm;
  sdpa.attention = VitAttention::kScaledDotProduct;
  auto a = MustMake(MakeVit(bmm, 3));
  auto b = MustMake(MakeVit(sdpa, 3));
  Batch batch = SyntheticBatch(5, 1, 8, 10, 4);
  auto la = a->Forward(batch.images);
  auto lb = b->Forward(batch.images);
  EXPECT_TRUE(torch::allclose(la, lb, 1e-5, 1e-6))
      << "max diff " << (la - lb).abs().max().item<double>();
  la.square().sum().backward();
  lb.square().sum().backward();
  auto pa = a->NamedParameters(), pb = b->NamedParameters();
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_TRUE(torch::allclose(pa[i].second.grad(), pb[i].second.grad(), 1e-4, 1e-6))
        << pa[i].first;
}

TEST(KdStepDeviceTest, AMissingGpuIsAPreciseError) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "a GPU is visible; this checks its absence";
  auto group = std::make_shared<ThreadShardGroup>(1);
  ThreadShardComm comm(group, 0);
  auto student = MustMake(MakeVit(TinyVit(16, 1), 7));
  const ShardPlan plan = MakeEvenShardPlan(FlatParameterCount(*student), 1);
  KdStepOptions options = Options();
  options.device = torch::Device(torch::kCUDA, 1);
  auto step = KdStep::Create(MustMake(MakeVit(TinyVit(24, 1), 1)), std::move(student), &comm, plan,
                             options);
  ASSERT_FALSE(step.ok());
  EXPECT_EQ(step.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(step.status().message().find("cuda:1"), std::string::npos) << step.status();
  EXPECT_NE(step.status().message().find("no CUDA device"), std::string::npos) << step.status();
}

}  // namespace
}  // namespace retort::trainer

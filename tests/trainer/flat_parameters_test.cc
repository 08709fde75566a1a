#include "trainer/flat_parameters.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tests/trainer/trainer_test_util.h"
#include "trainer/grad_reducer.h"
#include "trainer/kd_loss.h"
#include "trainer/step_waits.h"

#include <chrono>

namespace retort::trainer {
namespace {

TEST(FlatParametersTest, ParametersAndGradientsAreViewsAndBackwardWritesInPlace) {
  auto model = test::MustMake(MakeVit(test::TinyVit(16, 2), 11));
  auto reference = test::MustMake(MakeVit(test::TinyVit(16, 2), 11));
  auto flat = FlatParameters::Create(*model);
  ASSERT_TRUE(flat.ok()) << flat.status();
  FlatParameters& f = **flat;
  EXPECT_EQ(f.numel(), FlatParameterCount(*reference));
  EXPECT_TRUE(f.AllViewsAttached());

  Batch b = test::SyntheticBatch(5, 1, 8, 10, 3);
  for (int round = 0; round < 2; ++round) {
    f.ZeroGrads();
    torch::nll_loss(torch::log_softmax(model->Forward(b.images), -1), b.labels).backward();
    for (auto& [name, p] : reference->NamedParameters()) p.mutable_grad() = torch::Tensor();
    torch::nll_loss(torch::log_softmax(reference->Forward(b.images), -1), b.labels).backward();
    EXPECT_TRUE(f.AllViewsAttached());  // accumulation happened in place
    auto ref = reference->NamedParameters();
    for (size_t i = 0; i < ref.size(); ++i) {
      const ParamSlot& slot = f.slots()[i];
      ASSERT_EQ(slot.name, ref[i].first);
      auto g = f.grads().narrow(0, slot.offset, slot.numel);
      EXPECT_TRUE(torch::allclose(g, ref[i].second.grad().reshape(-1), 1e-5, 1e-7)) << slot.name;
    }
  }
  // Writing the flat buffer changes the model.
  f.params().zero_();
  torch::NoGradGuard g;
  EXPECT_EQ(model->NamedParameters()[3].second.abs().sum().item<float>(), 0.0f);
}

TEST(FlatParametersTest, RejectsNonFloatOrFrozenParameters) {
  auto model = test::MustMake(MakeVit(test::TinyVit(16, 1), 1));
  model->NamedParameters()[2].second.requires_grad_(false);
  auto flat = FlatParameters::Create(*model);
  ASSERT_FALSE(flat.ok());
  EXPECT_NE(flat.status().message().find("does not require grad"), std::string::npos);
}

TEST(GradReducerTest, BucketsLaunchDuringBackward) {
  auto model = test::MustMake(MakeVit(test::TinyVit(16, 3), 1));
  auto flat = FlatParameters::Create(*model);
  ASSERT_TRUE(flat.ok());
  auto group = std::make_shared<testing::ThreadShardGroup>(1);
  testing::ThreadShardComm comm(group, 0);
  auto reducer = GradReducer::Create(flat->get(), &comm, MakeEvenShardPlan((*flat)->numel(), 1),
                                     /*bucket_elements=*/1000);
  ASSERT_TRUE(reducer.ok()) << reducer.status();
  EXPECT_GT((*reducer)->num_buckets(), 3);
  Batch b = test::SyntheticBatch(4, 1, 8, 10, 3);
  (*flat)->ZeroGrads();
  (*reducer)->BeginBackward();
  torch::nll_loss(torch::log_softmax(model->Forward(b.images), -1), b.labels).backward();
  // All parameters take part in the forward, so every bucket launched from a hook.
  EXPECT_EQ((*reducer)->launched_during_backward(), (*reducer)->num_buckets());
  double exposed = -1;
  StepWaits waits;
  ASSERT_TRUE((*reducer)->Finish(Deadline::AfterMs(5000), &exposed, &waits).ok());
  EXPECT_GE(exposed, 0);
  EXPECT_TRUE(torch::equal((*reducer)->reduced(), (*flat)->grads()));
  // A bad plan is rejected with a precise message.
  auto bad = GradReducer::Create(flat->get(), &comm, ShardPlan{{{0, 5}}}, 1000);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("covers 5 elements"), std::string::npos) << bad.status();
}

TEST(GradReducerTest, BucketsOfUnusedParametersLaunchInFinish) {
  auto model = test::MustMake(MakeVit(test::TinyVit(16, 2), 1));
  auto flat = FlatParameters::Create(*model);
  ASSERT_TRUE(flat.ok());
  auto group = std::make_shared<testing::ThreadShardGroup>(1);
  testing::ThreadShardComm comm(group, 0);
  auto reducer = GradReducer::Create(flat->get(), &comm, MakeEvenShardPlan((*flat)->numel(), 1),
                                     /*bucket_elements=*/500);
  ASSERT_TRUE(reducer.ok());
  (*flat)->ZeroGrads();
  (*reducer)->BeginBackward();
  // Only the first parameter (cls_token, in the last bucket) takes part.
  (*flat)->tensors()[0].square().sum().backward();
  EXPECT_EQ((*reducer)->launched_during_backward(), 0);  // buckets launch strictly in order
  double exposed = 0;
  StepWaits waits;
  ASSERT_TRUE((*reducer)->Finish(Deadline::AfterMs(5000), &exposed, &waits).ok());
  EXPECT_TRUE(torch::equal((*reducer)->reduced(), (*flat)->grads()));
  EXPECT_GT((*reducer)->reduced().abs().sum().item<float>(), 0.0f);
}

TEST(KdStepTest, DeadPeerIsADeadlineErrorWithinTheTimeout) {
  at::set_num_threads(1);
  auto group = std::make_shared<testing::ThreadShardGroup>(2);
  testing::ThreadShardComm comm(group, 0);  // rank 1 never shows up
  KdStepOptions o;
  o.comm_timeout_ms = 300;
  auto student = test::MustMake(MakeVit(test::TinyVit(16, 1), 1));
  const int64_t n = FlatParameterCount(*student);
  auto step = KdStep::Create(test::MustMake(MakeVit(test::TinyVit(16, 1), 2)), std::move(student),
                             &comm, MakeEvenShardPlan(n, 2), o);
  ASSERT_TRUE(step.ok()) << step.status();
  const auto start = std::chrono::steady_clock::now();
  auto r = (*step)->Step(test::SyntheticBatch(4, 1, 8, 10, 1));
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_NE(r.status().message().find("gradient bucket"), std::string::npos) << r.status();
  EXPECT_LT(waited, 2 * 0.3 + 1.0);
  // A malformed batch is rejected before any collective.
  Batch bad = test::SyntheticBatch(4, 1, 8, 10, 1);
  bad.labels = bad.labels.to(torch::kInt);
  EXPECT_EQ((*step)->Step(bad).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace retort::trainer

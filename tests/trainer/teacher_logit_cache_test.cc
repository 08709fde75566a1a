#include "trainer/teacher_logit_cache.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tests/trainer/trainer_test_util.h"

namespace retort::trainer {
namespace {

TEST(TeacherLogitCacheTest, FullTopKReproducesTheTeacherDistribution) {
  auto cache = TeacherLogitCache::Create(10, 10, 2.0, 1000);
  ASSERT_TRUE(cache.ok());
  Batch b = test::SyntheticBatch(6, 1, 8, 10, 1);
  auto teacher = torch::randn({6, 10}) * 3;
  EXPECT_FALSE((*cache)->Lookup(b, 2.0).has_value());
  ASSERT_TRUE((*cache)->Insert(b, teacher).ok());
  auto hit = (*cache)->Lookup(b, 2.0);
  ASSERT_TRUE(hit.has_value());
  auto student = torch::randn({6, 10});
  const double cached = KdLoss(student, *hit, b.labels, {0.9, 2.0}).total.item<double>();
  const double direct = KdLoss(student, teacher, b.labels, {0.9, 2.0}).total.item<double>();
  EXPECT_NEAR(cached, direct, 1e-5 * std::abs(direct));
  EXPECT_FALSE((*cache)->Lookup(b, 3.0).has_value());  // another temperature
  const TeacherLogitCache::Counts counts = (*cache)->counts();
  EXPECT_EQ(counts.hits, 1);
  EXPECT_EQ(counts.misses, 2);  // before the insert, and at another temperature
  EXPECT_EQ(counts.dropped, 0);
}

TEST(TeacherLogitCacheTest, SamplesBeyondTheCapacityAreDroppedAndCounted) {
  auto cache = TeacherLogitCache::Create(10, 10, 2.0, 4);
  ASSERT_TRUE(cache.ok());
  Batch b = test::SyntheticBatch(6, 1, 8, 10, 3);
  ASSERT_TRUE((*cache)->Insert(b, torch::randn({6, 10})).ok());
  EXPECT_EQ((*cache)->size(), 4);
  EXPECT_EQ((*cache)->counts().dropped, 2);
  EXPECT_FALSE((*cache)->Lookup(b, 2.0).has_value());  // two samples are missing
  EXPECT_EQ((*cache)->counts().misses, 1);
}

TEST(TeacherLogitCacheTest, TopKProbabilitiesExactAndResidualSpreadEvenly) {
  auto cache = TeacherLogitCache::Create(10, 3, 1.5, 1000);
  Batch b = test::SyntheticBatch(4, 1, 8, 10, 2);
  auto teacher = torch::randn({4, 10}) * 2;
  ASSERT_TRUE((*cache)->Insert(b, teacher).ok());
  auto hit = (*cache)->Lookup(b, 1.5);
  ASSERT_TRUE(hit.has_value());
  auto p = torch::softmax(teacher / 1.5, -1), q = torch::softmax(*hit / 1.5, -1);
  auto [top, idx] = p.topk(3, -1);
  EXPECT_TRUE(torch::allclose(q.gather(1, idx), top, 1e-5, 1e-7));
  EXPECT_TRUE(torch::allclose(q.sum(-1), torch::ones({4}), 1e-5, 1e-6));
  // Non-top-k classes all get (1 - top mass) / 7.
  auto rest = (1 - top.sum(-1, true)) / 7;
  auto mask = torch::ones({4, 10}, torch::kBool).scatter_(1, idx, false);
  EXPECT_TRUE(torch::allclose(q.masked_select(mask).view({4, 7}), rest.expand({4, 7}), 1e-4, 1e-6));
  // A batch with one unseen sample misses.
  Batch other = b;
  other.augmentation_seeds[2] = 77;
  EXPECT_FALSE((*cache)->Lookup(other, 1.5).has_value());
  EXPECT_EQ(TeacherLogitCache::Create(10, 11, 1.0, 5).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(TeacherLogitCacheTest, KdStepSkipsTheTeacherWhenEverySampleIsCached) {
  at::set_num_threads(1);
  auto cache = TeacherLogitCache::Create(10, 10, 2.0, 1000);
  auto group = std::make_shared<testing::ThreadShardGroup>(1);
  testing::ThreadShardComm comm(group, 0);
  auto make = [&](TeacherLogitCache* c) {
    KdStepOptions o;
    o.loss = {0.5, 2.0};
    o.cache = c;
    auto student = test::MustMake(MakeVit(test::TinyVit(16, 1), 5));
    const int64_t n = FlatParameterCount(*student);
    auto step = KdStep::Create(test::MustMake(MakeVit(test::TinyVit(24, 1), 6)), std::move(student),
                               &comm, MakeEvenShardPlan(n, 1), o);
    EXPECT_TRUE(step.ok()) << step.status();
    return std::move(step).value();
  };
  auto cached_run = make(cache->get());
  auto plain_run = make(nullptr);
  Batch b = test::SyntheticBatch(8, 1, 8, 10, 9);
  for (int epoch = 0; epoch < 3; ++epoch) {
    auto r1 = cached_run->Step(b);
    auto r2 = plain_run->Step(b);
    ASSERT_TRUE(r1.ok() && r2.ok());
    EXPECT_EQ(r1->timing.teacher_cached, epoch > 0);
    EXPECT_EQ(r1->timing.teacher_forward == 0.0, epoch > 0);
    EXPECT_NEAR(r1->loss, r2->loss, 1e-5 * r2->loss) << "epoch " << epoch;
  }
  EXPECT_LT(test::RelativeDiff(cached_run->flat().params(), plain_run->flat().params()), 1e-5);
  EXPECT_EQ((*cache)->size(), 8);
}

}  // namespace
}  // namespace retort::trainer

#include "trainer/kd_loss.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tests/trainer/trainer_test_util.h"
#include "trainer/data/batch.h"

namespace retort::trainer {
namespace {

TEST(KdLossTest, MatchesTheFormulaWrittenOut) {
  torch::manual_seed(0);
  auto s = torch::randn({5, 7}, torch::requires_grad());
  auto t = torch::randn({5, 7});
  auto y = torch::randint(7, {5}, torch::kLong);
  KdLossOptions o{0.3, 2.5};
  KdLossParts parts = KdLoss(s, t, y, o);
  // Written out per sample with doubles.
  auto sd = s.detach().to(torch::kDouble), td = t.to(torch::kDouble);
  double kl = 0, ce = 0;
  for (int i = 0; i < 5; ++i) {
    auto p = torch::softmax(td[i] / 2.5, 0), q = torch::softmax(sd[i] / 2.5, 0);
    kl += (p * (p.log() - q.log())).sum().item<double>();
    ce -= torch::log_softmax(sd[i], 0)[y[i].item<int64_t>()].item<double>();
  }
  kl /= 5;
  ce /= 5;
  EXPECT_NEAR(parts.kl.item<double>(), kl, 1e-5);
  EXPECT_NEAR(parts.ce.item<double>(), ce, 1e-5);
  EXPECT_NEAR(parts.total.item<double>(), 0.3 * 2.5 * 2.5 * kl + 0.7 * ce, 1e-5);
  parts.total.backward();
  EXPECT_TRUE(s.grad().defined());
  EXPECT_GT(s.grad().abs().sum().item<double>(), 0);
}

TEST(KdLossTest, IdenticalLogitsHaveZeroKlAndAlphaZeroIsCrossEntropy) {
  auto s = torch::randn({4, 10});
  auto y = torch::randint(10, {4}, torch::kLong);
  EXPECT_NEAR(KdLoss(s, s, y, {1.0, 3.0}).total.item<double>(), 0.0, 1e-6);
  auto t = torch::randn({4, 10});
  EXPECT_NEAR(KdLoss(s, t, y, {0.0, 3.0}).total.item<double>(),
              torch::nll_loss(torch::log_softmax(s, -1), y).item<double>(), 1e-6);
  EXPECT_EQ(ValidateKdLossOptions({1.5, 1.0}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateKdLossOptions({0.5, 0.0}).code(), StatusCode::kInvalidArgument);
}

TEST(KdLossTest, Top1CountsAndEvaluation) {
  auto logits = torch::tensor({{0.1f, 0.9f}, {0.8f, 0.2f}, {0.3f, 0.7f}});
  EXPECT_EQ(CountTop1Correct(logits, torch::tensor({1, 1, 1}, torch::kLong)), 2);
  auto model = test::MustMake(MakeVit(test::TinyVit(16, 1), 3));
  std::vector<Batch> batches = {test::SyntheticBatch(6, 1, 8, 10, 1),
                                test::SyntheticBatch(4, 1, 8, 10, 2)};
  // Labels = the model's own predictions on the first batch -> those 6 are all correct.
  {
    torch::NoGradGuard g;
    batches[0].labels = model->Forward(batches[0].images).argmax(-1);
  }
  Top1Result r = EvaluateTop1(*model, batches);
  EXPECT_EQ(r.total, 10);
  EXPECT_GE(r.correct, 6);
  torch::NoGradGuard g;
  EXPECT_EQ(r.correct, 6 + CountTop1Correct(model->Forward(batches[1].images), batches[1].labels));
}

}  // namespace
}  // namespace retort::trainer

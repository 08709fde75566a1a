#include "trainer/kd_loss.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

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
  EXPECT_NEAR(parts.kl.item<double>(), 2.5 * 2.5 * kl, 1e-5);  // the distillation term
  EXPECT_NEAR(parts.ce.item<double>(), ce, 1e-5);
  EXPECT_NEAR(parts.total.item<double>(), 0.3 * 2.5 * 2.5 * kl + 0.7 * ce, 1e-5);
  parts.total.backward();
  EXPECT_TRUE(s.grad().defined());
  EXPECT_GT(s.grad().abs().sum().item<double>(), 0);
}

// DeiT's hard distillation and DKD, written out per sample with doubles (mdistiller's dkd_loss
// for DKD: the binary target/others split, and the distribution over the other classes).
TEST(KdLossTest, HardAndDecoupledDistillationMatchTheirFormulas) {
  torch::manual_seed(1);
  auto s = torch::randn({6, 5}, torch::requires_grad());
  auto t = torch::randn({6, 5}) * 3;
  auto y = torch::randint(5, {6}, torch::kLong);
  auto sd = s.detach().to(torch::kDouble), td = t.to(torch::kDouble);
  const double temp = 2.0;
  double hard = 0, ce = 0, tckd = 0, nckd = 0;
  for (int i = 0; i < 6; ++i) {
    const int64_t label = y[i].item<int64_t>();
    hard -= torch::log_softmax(sd[i], 0)[td[i].argmax().item<int64_t>()].item<double>();
    ce -= torch::log_softmax(sd[i], 0)[label].item<double>();
    auto p = torch::softmax(td[i] / temp, 0), q = torch::softmax(sd[i] / temp, 0);
    const double pt = p[label].item<double>(), qt = q[label].item<double>();
    tckd += pt * std::log(pt / qt) + (1 - pt) * std::log((1 - pt) / (1 - qt));
    std::vector<int64_t> others;
    for (int64_t c = 0; c < 5; ++c)
      if (c != label) others.push_back(c);
    auto idx = torch::tensor(others, torch::kLong);
    auto po = torch::softmax(td[i].index_select(0, idx) / temp, 0);
    auto qo = torch::softmax(sd[i].index_select(0, idx) / temp, 0);
    nckd += (po * (po.log() - qo.log())).sum().item<double>();
  }
  hard /= 6;
  ce /= 6;
  tckd /= 6;
  nckd /= 6;
  KdLossOptions o;
  o.alpha = 0.5;
  o.temperature = temp;
  o.kind = DistillationLoss::kHard;
  KdLossParts h = KdLoss(s, t, y, o);
  EXPECT_NEAR(h.kl.item<double>(), hard, 1e-5);
  EXPECT_NEAR(h.total.item<double>(), 0.5 * hard + 0.5 * ce, 1e-5);
  o.kind = DistillationLoss::kDkd;
  o.dkd_alpha = 1.0;
  o.dkd_beta = 8.0;
  KdLossParts d = KdLoss(s, t, y, o);
  const double dkd = temp * temp * (1.0 * tckd + 8.0 * nckd);
  EXPECT_NEAR(d.kl.item<double>(), dkd, 1e-4 * std::max(1.0, dkd));
  EXPECT_NEAR(d.total.item<double>(), 0.5 * dkd + 0.5 * ce, 1e-4 * std::max(1.0, dkd));
  d.total.backward();
  EXPECT_GT(s.grad().abs().sum().item<double>(), 0);
  EXPECT_TRUE(torch::isfinite(s.grad()).all().item<bool>());
  // Bad weights are refused.
  o.dkd_beta = -1;
  EXPECT_FALSE(ValidateKdLossOptions(o).ok());
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

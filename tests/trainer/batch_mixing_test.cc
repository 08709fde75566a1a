// Batch mixing (trainer/data/batch_mixing.h): draws that are pure functions of (seed, epoch,
// step, pair), exact mixup and CutMix images and targets, independence of the split among
// ranks, and the CE term's smoothed and mixed targets (kd_loss.h).
#include "trainer/data/batch_mixing.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "trainer/data/batch.h"
#include "trainer/data/random.h"
#include "trainer/data/sampler.h"
#include "trainer/kd_loss.h"

namespace retort::trainer::data {
namespace {

MixingOptions Both(uint64_t seed = 7) {
  MixingOptions o;
  o.mixup_alpha = 0.8;
  o.cutmix_alpha = 1.0;
  o.seed = seed;
  return o;
}

// Sample k's image is the constant k + 1 in every pixel (so blends and boxes are readable);
// label k % 5.
Batch ConstantBatch(int64_t n, int64_t first = 0, int64_t step = 3) {
  Batch b;
  b.images = torch::empty({n, 2, 8, 8});
  b.labels = torch::empty({n}, torch::kLong);
  for (int64_t k = 0; k < n; ++k) {
    b.images[k].fill_(static_cast<float>(first + k + 1));
    b.labels[k] = (first + k) % 5;
  }
  b.epoch = 1;
  b.step = step;
  b.position_in_step = first;
  return b;
}

TEST(BatchMixingTest, SymmetricBetaHasItsMeanAndVarianceAndIsAPureFunctionOfTheSeed) {
  for (double alpha : {0.2, 0.8, 1.0, 4.0}) {
    constexpr int kDraws = 20000;
    double sum = 0, sq = 0;
    for (int i = 0; i < kDraws; ++i) {
      const double x = DrawSymmetricBeta(alpha, MixSeed(99, static_cast<uint64_t>(i)));
      ASSERT_GE(x, 0.0);
      ASSERT_LE(x, 1.0);
      sum += x;
      sq += x * x;
    }
    const double mean = sum / kDraws, var = sq / kDraws - mean * mean;
    EXPECT_NEAR(mean, 0.5, 0.01) << "alpha " << alpha;
    EXPECT_NEAR(var, 1.0 / (4.0 * (2.0 * alpha + 1.0)), 0.006) << "alpha " << alpha;
    EXPECT_EQ(DrawSymmetricBeta(alpha, 5), DrawSymmetricBeta(alpha, 5));
  }
}

TEST(BatchMixingTest, DrawsFollowTheOptions) {
  MixingOptions o = Both();
  int cutmix = 0, mixed = 0, distinct = 0;
  PairMix previous;
  for (int64_t pair = 0; pair < 400; ++pair) {
    const PairMix m = DrawPairMix(o, 0, 1, pair, 32, 32);
    const PairMix again = DrawPairMix(o, 0, 1, pair, 32, 32);
    EXPECT_EQ(m.lambda, again.lambda);
    EXPECT_EQ(m.y0, again.y0);
    mixed += m.mixed;
    cutmix += m.cutmix;
    distinct += m.lambda != previous.lambda;
    previous = m;
    if (m.cutmix) {
      // The lambda is corrected to the box's area.
      const double area = static_cast<double>((m.y1 - m.y0) * (m.x1 - m.x0));
      EXPECT_DOUBLE_EQ(m.lambda, 1.0 - area / (32.0 * 32.0));
      EXPECT_GE(m.y0, 0);
      EXPECT_LE(m.y1, 32);
    }
  }
  EXPECT_EQ(mixed, 400);  // prob 1
  EXPECT_GT(cutmix, 150);
  EXPECT_LT(cutmix, 250);  // switch_prob 0.5
  EXPECT_GT(distinct, 390);

  o.prob = 0;
  EXPECT_FALSE(DrawPairMix(o, 0, 1, 0, 32, 32).mixed);
  o = Both();
  o.cutmix_alpha = 0;
  for (int64_t pair = 0; pair < 50; ++pair) EXPECT_FALSE(DrawPairMix(o, 0, 1, pair, 32, 32).cutmix);
  o = Both();
  o.mixup_alpha = 0;
  for (int64_t pair = 0; pair < 50; ++pair) EXPECT_TRUE(DrawPairMix(o, 0, 1, pair, 32, 32).cutmix);
  // Batch mode: one draw for every pair of a step; another step, another draw.
  o = Both();
  o.per_batch = true;
  const PairMix first = DrawPairMix(o, 0, 1, 0, 32, 32);
  for (int64_t pair = 1; pair < 20; ++pair)
    EXPECT_EQ(DrawPairMix(o, 0, 1, pair, 32, 32).lambda, first.lambda);
  EXPECT_NE(DrawPairMix(o, 0, 2, 0, 32, 32).lambda, first.lambda);
  EXPECT_NE(DrawPairMix(o, 1, 1, 0, 32, 32).lambda, first.lambda);
  o.seed = 8;
  EXPECT_NE(DrawPairMix(o, 0, 1, 0, 32, 32).lambda, first.lambda);
}

TEST(BatchMixingTest, MixupBlendsEachPairBothWaysAndCutMixSwapsTheBox) {
  MixingOptions o = Both();
  Batch b = ConstantBatch(6);
  const Batch original = ConstantBatch(6);
  ASSERT_TRUE(MixBatch(o, 6, &b).ok());
  ASSERT_TRUE(b.mix_own_weight.defined());
  for (int64_t k = 0; k < 6; ++k) {
    const int64_t partner = k ^ 1;
    const PairMix m = DrawPairMix(o, 1, 3, k / 2, 8, 8);
    EXPECT_EQ(b.mix_partner_labels[k].item<int64_t>(), original.labels[partner].item<int64_t>());
    EXPECT_FLOAT_EQ(b.mix_own_weight[k].item<float>(), static_cast<float>(m.lambda));
    const float own = static_cast<float>(k + 1), other = static_cast<float>(partner + 1);
    if (m.cutmix) {
      auto inside = torch::zeros({2, 8, 8}, torch::kBool);
      inside.slice(1, m.y0, m.y1).slice(2, m.x0, m.x1).fill_(true);
      auto expected =
          torch::where(inside, torch::full({2, 8, 8}, other), torch::full({2, 8, 8}, own));
      EXPECT_TRUE(torch::equal(b.images[k], expected)) << "sample " << k;
    } else {
      const auto lam = static_cast<float>(m.lambda);
      const float expected = own * lam + other * (1 - lam);
      EXPECT_NEAR(b.images[k].max().item<float>(), expected, 1e-5) << "sample " << k;
      EXPECT_NEAR(b.images[k].min().item<float>(), expected, 1e-5) << "sample " << k;
    }
  }
}

// The global batch mixed whole equals its slices mixed rank by rank, for every world size, as
// long as slices are whole pairs (the sampler's split unit 2); a lone last sample stays as it is.
TEST(BatchMixingTest, SlicesOfWholePairsMixAsTheWholeBatch) {
  MixingOptions o = Both(11);
  for (int64_t n : {10, 11}) {
    Batch whole = ConstantBatch(n);
    ASSERT_TRUE(MixBatch(o, n, &whole).ok());
    for (int world = 1; world <= 6; ++world) {
      for (int r = 0; r < world; ++r) {
        auto [lo, hi] = ContiguousSplit(n, r, world, 2);
        Batch part = ConstantBatch(hi - lo, lo);
        ASSERT_TRUE(MixBatch(o, n, &part).ok()) << "world " << world << " rank " << r;
        if (hi == lo) continue;
        EXPECT_TRUE(torch::equal(part.images, whole.images.slice(0, lo, hi)))
            << "n " << n << " world " << world << " rank " << r;
        EXPECT_TRUE(torch::equal(part.mix_own_weight, whole.mix_own_weight.slice(0, lo, hi)));
        EXPECT_TRUE(
            torch::equal(part.mix_partner_labels, whole.mix_partner_labels.slice(0, lo, hi)));
      }
    }
    if (n % 2 == 1) {
      EXPECT_EQ(whole.mix_own_weight[n - 1].item<float>(), 1.0f);
      EXPECT_TRUE(torch::equal(whole.images[n - 1], ConstantBatch(n).images[n - 1]));
    }
  }
  // A slice that cuts a pair is refused rather than mixed with the wrong partner.
  Batch cut = ConstantBatch(3, 1);
  EXPECT_EQ(MixBatch(o, 10, &cut).code(), StatusCode::kInvalidArgument);
  Batch odd_end = ConstantBatch(3, 0);
  EXPECT_EQ(MixBatch(o, 10, &odd_end).code(), StatusCode::kInvalidArgument);
}

TEST(BatchMixingTest, MixingOptionsAreValidated) {
  MixingOptions o = Both();
  EXPECT_TRUE(ValidateMixingOptions(o).ok());
  o.prob = 1.5;
  EXPECT_FALSE(ValidateMixingOptions(o).ok());
  o = Both();
  o.mixup_alpha = -1;
  EXPECT_FALSE(ValidateMixingOptions(o).ok());
}

// The CE term: smoothing as torch's cross_entropy(label_smoothing), and a mixed row's target as
// the blend of its two smoothed one-hot labels.
TEST(KdLossTargetsTest, SmoothedAndMixedTargetsMatchTheirDefinitions) {
  torch::manual_seed(3);
  auto student = torch::randn({6, 5});
  auto teacher = torch::randn({6, 5});
  auto labels = torch::tensor({0, 1, 2, 3, 4, 0}, torch::kLong);
  auto partners = torch::tensor({1, 0, 3, 2, 0, 4}, torch::kLong);
  auto weights = torch::tensor({0.7f, 0.7f, 0.2f, 0.2f, 1.0f, 1.0f});
  KdLossOptions o;
  o.alpha = 0;  // CE only
  o.label_smoothing = 0.1;
  const auto smoothed = KdLoss(student, teacher, labels, o).total;
  const auto reference = torch::nn::functional::cross_entropy(
      student, labels, torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(0.1));
  EXPECT_NEAR(smoothed.item<double>(), reference.item<double>(), 1e-6);

  const auto mixed = KdLoss(student, teacher, labels, o, partners, weights).total;
  auto per_row = [&](const torch::Tensor& y) {
    return torch::nn::functional::cross_entropy(
        student, y,
        torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(0.1).reduction(
            torch::kNone));
  };
  const auto expected = (weights * per_row(labels) + (1 - weights) * per_row(partners)).mean();
  EXPECT_NEAR(mixed.item<double>(), expected.item<double>(), 1e-6);

  // Own weight 1 everywhere is the unmixed loss; without smoothing the KD part is untouched.
  const auto ones = KdLoss(student, teacher, labels, o, partners, torch::ones({6})).total;
  EXPECT_NEAR(ones.item<double>(), smoothed.item<double>(), 1e-6);
  o.alpha = 0.5;
  o.label_smoothing = 0;
  const auto plain = KdLoss(student, teacher, labels, o);
  const auto plain_mixed = KdLoss(student, teacher, labels, o, partners, torch::ones({6}));
  EXPECT_NEAR(plain.kl.item<double>(), plain_mixed.kl.item<double>(), 1e-7);
  EXPECT_NEAR(plain.total.item<double>(), plain_mixed.total.item<double>(), 1e-6);
}

}  // namespace
}  // namespace retort::trainer::data

// Random erasing (trainer/data/random_erasing.h): timm's box distribution, the three fills,
// and every choice a pure function of the sample's augmentation seed.
#include "trainer/data/random_erasing.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "trainer/data/batch.h"
#include "trainer/data/random.h"

namespace retort::trainer::data {
namespace {

Batch Ones(int64_t n, int64_t size = 16, uint64_t first_seed = 100) {
  Batch b;
  b.images = torch::ones({n, 3, size, size});
  b.labels = torch::zeros({n}, torch::kLong);
  for (int64_t k = 0; k < n; ++k) b.augmentation_seeds.push_back(first_seed + k);
  return b;
}

TEST(RandomErasingTest, BoxesFollowTimmsDistributionAndAreAPureFunctionOfTheSeed) {
  RandomErasingOptions o;
  o.probability = 0.25;
  constexpr int kSamples = 4000;
  int erased = 0;
  double area_sum = 0;
  for (int i = 0; i < kSamples; ++i) {
    const uint64_t seed = MixSeed(5, static_cast<uint64_t>(i));
    const auto boxes = DrawErasedBoxes(o, seed, 64, 64);
    const auto again = DrawErasedBoxes(o, seed, 64, 64);
    ASSERT_EQ(boxes.size(), again.size());
    ASSERT_LE(boxes.size(), 1u);
    if (boxes.empty()) continue;
    ++erased;
    const ErasedBox& b = boxes[0];
    EXPECT_EQ(b.top, again[0].top);
    EXPECT_EQ(b.left, again[0].left);
    EXPECT_GE(b.top, 0);
    EXPECT_GE(b.left, 0);
    EXPECT_LE(b.top + b.height, 64);
    EXPECT_LE(b.left + b.width, 64);
    const double area = static_cast<double>(b.height * b.width) / (64.0 * 64.0);
    // Rounding h and w to integers moves the area a little past [0.02, 1/3].
    EXPECT_GE(area, 0.012);
    EXPECT_LE(area, 0.36);
    const double aspect = static_cast<double>(b.height) / static_cast<double>(b.width);
    EXPECT_GE(aspect, 0.3 * 0.8);
    EXPECT_LE(aspect, 1 / 0.3 * 1.25);
    area_sum += area;
  }
  EXPECT_NEAR(static_cast<double>(erased) / kSamples, 0.25, 0.03);
  // Uniform in [0.02, 1/3]: mean 0.177 (before the rounding and the attempts that do not fit).
  EXPECT_NEAR(area_sum / erased, 0.177, 0.02);
  o.probability = 0;
  EXPECT_TRUE(DrawErasedBoxes(o, 7, 64, 64).empty());
  o.probability = 1;
  o.count = 3;
  EXPECT_GE(DrawErasedBoxes(o, 7, 64, 64).size(), 2u);
}

TEST(RandomErasingTest, FillsReplaceOnlyTheBoxesAndRepeatForTheSameSeeds) {
  RandomErasingOptions o;
  o.probability = 1;
  Batch b = Ones(6);
  b.augmentation_seeds[5] = 0;  // not augmented: untouched
  ASSERT_TRUE(EraseBatch(o, &b).ok());
  Batch again = Ones(6);
  again.augmentation_seeds[5] = 0;
  ASSERT_TRUE(EraseBatch(o, &again).ok());
  EXPECT_TRUE(torch::equal(b.images, again.images));
  EXPECT_TRUE(torch::equal(b.images[5], torch::ones({3, 16, 16})));
  for (int64_t k = 0; k < 5; ++k) {
    const auto boxes = DrawErasedBoxes(o, b.augmentation_seeds[k], 16, 16);
    ASSERT_EQ(boxes.size(), 1u);
    const ErasedBox& box = boxes[0];
    auto inside = torch::zeros({3, 16, 16}, torch::kBool);
    inside.slice(1, box.top, box.top + box.height)
        .slice(2, box.left, box.left + box.width)
        .fill_(true);
    EXPECT_TRUE(torch::equal(b.images[k].masked_select(~inside),
                             torch::ones({3, 16, 16}).masked_select(~inside)));
    EXPECT_FALSE(b.images[k].masked_select(inside).eq(1).all().item<bool>()) << "sample " << k;
  }
  // Per-pixel values are standard normal.
  o.count = 1;
  Batch big = Ones(40, 64);
  ASSERT_TRUE(EraseBatch(o, &big).ok());
  auto changed = big.images.masked_select(big.images.ne(1));
  ASSERT_GT(changed.numel(), 10000);
  EXPECT_NEAR(changed.mean().item<double>(), 0.0, 0.05);
  EXPECT_NEAR(changed.std().item<double>(), 1.0, 0.05);
  // "const": zeros; "rand": one value per channel.
  o.fill = EraseFill::kZero;
  Batch zero = Ones(3);
  ASSERT_TRUE(EraseBatch(o, &zero).ok());
  EXPECT_TRUE(zero.images.eq(0).logical_or(zero.images.eq(1)).all().item<bool>());
  EXPECT_TRUE(zero.images.eq(0).any().item<bool>());
  o.fill = EraseFill::kPerChannel;
  Batch channel = Ones(1);
  ASSERT_TRUE(EraseBatch(o, &channel).ok());
  for (int64_t c = 0; c < 3; ++c) {
    auto values = channel.images[0][c].masked_select(channel.images[0][c].ne(1));
    ASSERT_GT(values.numel(), 0);
    EXPECT_EQ(values.min().item<float>(), values.max().item<float>()) << "channel " << c;
  }
  // Bad options and batches are refused.
  o.count = 0;
  EXPECT_FALSE(ValidateRandomErasingOptions(o).ok());
  o = RandomErasingOptions{};
  o.probability = 1;
  Batch wrong = Ones(2);
  wrong.augmentation_seeds.pop_back();
  EXPECT_EQ(EraseBatch(o, &wrong).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace retort::trainer::data

// The batch augmentations that run after the loader (colour jitter, random erasing, mixup and
// CutMix) give on a batch in GPU memory what they give on the same batch in host memory: every
// draw and fill value comes from the samples' seeds on the host, so only float rounding of the
// blends may differ. Skipped without a GPU.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "trainer/data/batch.h"
#include "trainer/data/batch_mixing.h"
#include "trainer/data/color_jitter.h"
#include "trainer/data/random_erasing.h"

namespace retort::trainer::data {
namespace {

Batch Augmentable(torch::Device device) {
  torch::manual_seed(8);
  Batch b;
  b.images = torch::randn({10, 3, 24, 24}).to(device);
  b.labels = torch::randint(10, {10}, torch::kLong);
  for (uint64_t k = 0; k < 10; ++k) b.augmentation_seeds.push_back(1000 + k);
  b.epoch = 2;
  b.step = 5;
  return b;
}

void Augment(Batch* b) {
  ColorJitterOptions jitter;
  jitter.strength = 0.4;
  jitter.mean = {0.485f, 0.456f, 0.406f};
  jitter.std = {0.229f, 0.224f, 0.225f};
  ASSERT_TRUE(JitterBatch(jitter, b).ok());
  RandomErasingOptions erasing;
  erasing.probability = 0.5;
  ASSERT_TRUE(EraseBatch(erasing, b).ok());
  MixingOptions mixing;
  mixing.mixup_alpha = 0.8;
  mixing.cutmix_alpha = 1.0;
  mixing.seed = 3;
  ASSERT_TRUE(MixBatch(mixing, 10, b).ok());
}

TEST(BatchAugmentGpuTest, ADeviceBatchIsAugmentedAsTheHostOne) {
  if (torch::cuda::device_count() == 0)
    GTEST_SKIP() << "no CUDA device visible to LibTorch (torch::cuda::device_count() == 0)";
  Batch host = Augmentable(torch::kCPU);
  Batch device = Augmentable(torch::Device(torch::kCUDA, 0));
  ASSERT_NO_FATAL_FAILURE(Augment(&host));
  ASSERT_NO_FATAL_FAILURE(Augment(&device));
  ASSERT_TRUE(device.images.is_cuda()) << "the batch left the GPU";
  const auto back = device.images.to(torch::kCPU);
  EXPECT_TRUE(torch::allclose(back, host.images, 1e-5, 1e-5))
      << "max |gpu - cpu| = " << (back - host.images).abs().max().item<double>();
  EXPECT_TRUE(torch::equal(device.mix_own_weight.to(torch::kCPU), host.mix_own_weight));
  EXPECT_TRUE(torch::equal(device.mix_partner_labels.to(torch::kCPU), host.mix_partner_labels));
}

}  // namespace
}  // namespace retort::trainer::data

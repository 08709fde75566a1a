// Model FLOPs against published figures (timm's GMACs of the same ViTs: a multiply-add is two
// FLOPs) and the GPU peak table that model-FLOPs utilisation divides by.
#include "trainer/model_flops.h"

#include <gtest/gtest.h>

#include "trainer/device.h"

namespace retort::trainer {
namespace {

VitConfig Preset(const std::string& name) {
  auto c = VitPreset(name);
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

TEST(ModelFlopsTest, VitForwardMatchesPublishedGmacs) {
  // timm: vit_base_patch16_224 17.58 GMACs, vit_small_patch16_224 4.61, deit_tiny 1.26.
  EXPECT_NEAR(VitForwardFlops(Preset("vit-b16")) / 2e9, 17.58, 17.58 * 0.01);
  EXPECT_NEAR(VitForwardFlops(Preset("vit-s16")) / 2e9, 4.61, 4.61 * 0.01);
  EXPECT_NEAR(VitForwardFlops(Preset("vit-ti16")) / 2e9, 1.26, 1.26 * 0.01);
}

TEST(ModelFlopsTest, TrainingIsThreeStudentForwardsPlusTheTeachersForward) {
  const VitConfig student = Preset("vit-ti16"), teacher = Preset("vit-b16");
  EXPECT_DOUBLE_EQ(KdTrainingFlopsPerSample(student, nullptr), 3 * VitForwardFlops(student));
  EXPECT_DOUBLE_EQ(KdTrainingFlopsPerSample(student, &teacher),
                   3 * VitForwardFlops(student) + VitForwardFlops(teacher));
}

TEST(ModelFlopsTest, ComputedFlopsLeaveOutWhatTheClassTokenOnlyLastBlockSkips) {
  VitConfig s16 = Preset("vit-s16");
  ASSERT_TRUE(s16.last_block_class_token_only);
  const double model = VitForwardFlops(s16), computed = VitForwardFlops(s16, FlopsCount::kComputed);
  // The last block's query, attention, projection and MLP for 196 of 197 tokens: about 7%.
  const double skipped = 1 - computed / model;
  EXPECT_GT(skipped, 0.06);
  EXPECT_LT(skipped, 0.08);
  // By hand for ViT-S/16's last block: d = 384, 197 tokens.
  const double d = 384, n = 197;
  const double full_block = n * 3 * d * d + 2 * n * n * d + n * d * d + n * 8 * d * d;
  const double class_block = n * 2 * d * d + d * d + 2 * n * d + d * d + 8 * d * d;
  EXPECT_NEAR(model - computed, 2 * (full_block - class_block), 1.0);
  // A model that computes every token of its last block: the two counts agree.
  s16.last_block_class_token_only = false;
  EXPECT_DOUBLE_EQ(VitForwardFlops(s16, FlopsCount::kComputed), model);
  const VitConfig teacher = Preset("vit-b16"), student = Preset("vit-s16");
  EXPECT_DOUBLE_EQ(KdTrainingFlopsPerSample(student, &teacher, FlopsCount::kComputed),
                   3 * VitForwardFlops(student, FlopsCount::kComputed) +
                       VitForwardFlops(teacher, FlopsCount::kComputed));
}

TEST(ModelFlopsTest, PeakByDeviceNameWithTheMostSpecificNameFirst) {
  EXPECT_DOUBLE_EQ(PeakBf16FlopsForDevice("NVIDIA H100 80GB HBM3"), 989.4e12);
  EXPECT_DOUBLE_EQ(PeakBf16FlopsForDevice("NVIDIA H100 PCIe"), 756e12);
  EXPECT_DOUBLE_EQ(PeakBf16FlopsForDevice("NVIDIA H100 NVL"), 835e12);
  EXPECT_DOUBLE_EQ(PeakBf16FlopsForDevice("NVIDIA H200"), 989.4e12);
  EXPECT_DOUBLE_EQ(PeakBf16FlopsForDevice("NVIDIA H200 NVL"), 835e12);  // not the SXM's
  EXPECT_DOUBLE_EQ(PeakBf16FlopsForDevice("NVIDIA A100-SXM4-80GB"), 312e12);
  EXPECT_DOUBLE_EQ(PeakBf16FlopsForDevice("NVIDIA A10"), 125e12);
  EXPECT_DOUBLE_EQ(PeakBf16FlopsForDevice("NVIDIA L40S"), 362.05e12);
  EXPECT_DOUBLE_EQ(PeakBf16FlopsForDevice("NVIDIA L4"), 121e12);
  // Unknown (no bf16 tensor cores, or not in the table): no peak, so no utilisation.
  EXPECT_EQ(PeakBf16FlopsForDevice("Tesla V100-SXM2-16GB"), 0);
  EXPECT_EQ(PeakBf16FlopsForDevice(""), 0);
}

TEST(ModelFlopsTest, NoDeviceNameWithoutThatDevice) {
  EXPECT_EQ(CudaDeviceName(-1), "");
  EXPECT_EQ(CudaDeviceName(VisibleCudaDevices()), "");
}

}  // namespace
}  // namespace retort::trainer

#include "trainer/models/vit.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/models/model.h"

namespace retort::trainer {
namespace {

int64_t CountParams(Model& m) {
  int64_t n = 0;
  for (auto& [name, p] : m.NamedParameters()) n += p.numel();
  return n;
}

TEST(VitTest, FashionMnistPresetsHaveTheRequestedShape) {
  auto teacher = MakeModel("vit:fm-teacher", 1);
  ASSERT_TRUE(teacher.ok()) << teacher.status();
  auto student = MakeModel("fm-student", 1);
  ASSERT_TRUE(student.ok()) << student.status();
  auto x = torch::randn({3, 1, 28, 28});
  torch::NoGradGuard no_grad;
  EXPECT_EQ((*teacher)->Forward(x).sizes(), (std::vector<int64_t>{3, 10}));
  EXPECT_EQ((*student)->Forward(x).sizes(), (std::vector<int64_t>{3, 10}));

  auto names = (*teacher)->NamedParameters();
  auto has = [&](const std::string& name, std::vector<int64_t> shape) {
    for (auto& [n, p] : names)
      if (n == name) return p.sizes().vec() == shape;
    return false;
  };
  EXPECT_TRUE(has("cls_token", {1, 1, 192}));
  EXPECT_TRUE(has("pos_embed", {1, 50, 192}));
  EXPECT_TRUE(has("patch_embed.proj.weight", {192, 1, 4, 4}));
  EXPECT_TRUE(has("blocks.5.attn.qkv.weight", {576, 192}));
  EXPECT_TRUE(has("blocks.5.mlp.fc1.weight", {768, 192}));
  EXPECT_TRUE(has("blocks.5.mlp.fc2.bias", {192}));
  EXPECT_TRUE(has("norm.weight", {192}));
  EXPECT_TRUE(has("head.weight", {10, 192}));
  EXPECT_FALSE(has("blocks.6.norm1.weight", {192}));
}

TEST(VitTest, ImageNetPresetsMatchTimmParameterCounts) {
  // timm vit_tiny/small/base_patch16_224 parameter counts.
  const std::vector<std::pair<std::string, int64_t>> expected = {
      {"vit-ti16", 5717416}, {"vit-s16", 22050664}, {"vit-b16", 86567656}};
  for (const auto& [preset, count] : expected) {
    auto model = MakeVitPreset(preset, 0);
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ(CountParams(**model), count) << preset;
  }
  auto ti = MakeVitPreset("vit-ti16", 0);
  torch::NoGradGuard no_grad;
  EXPECT_EQ((*ti)->Forward(torch::randn({1, 3, 224, 224})).sizes(),
            (std::vector<int64_t>{1, 1000}));
}

TEST(VitTest, UnknownPresetAndBadSpecsAreNamed) {
  auto bad = MakeVitPreset("vit-h14", 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  EXPECT_NE(bad.status().message().find("'vit-h14'"), std::string::npos);
  EXPECT_NE(bad.status().message().find("fm-student"), std::string::npos);
  EXPECT_EQ(MakeModel("onnx:x.onnx", 0).status().code(), StatusCode::kInvalidArgument);
  VitConfig c = *VitPreset("fm-student");
  c.patch_size = 5;
  Status s = ValidateVitConfig(c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("patch_size 5"), std::string::npos) << s;
  c = *VitPreset("fm-student");
  c.heads = 5;
  EXPECT_NE(ValidateVitConfig(c).message().find("heads 5"), std::string::npos);
}

TEST(VitTest, SameSeedSameWeightsAndCopyParameters) {
  auto a = MakeVitPreset("fm-student", 5);
  auto b = MakeVitPreset("fm-student", 5);
  auto c = MakeVitPreset("fm-student", 6);
  auto pa = (*a)->NamedParameters(), pb = (*b)->NamedParameters(), pc = (*c)->NamedParameters();
  EXPECT_TRUE(torch::equal(pa[2].second, pb[2].second));
  EXPECT_FALSE(torch::equal(pa[2].second, pc[2].second));
  ASSERT_TRUE(CopyParameters(**a, **c).ok());
  EXPECT_TRUE(torch::equal(pa[2].second, pc[2].second));
  auto teacher = MakeVitPreset("fm-teacher", 5);
  Status s = CopyParameters(**teacher, **c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
}

}  // namespace
}  // namespace retort::trainer

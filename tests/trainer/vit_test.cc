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
  auto teacher = BuildModel({.preset = "fm-teacher"}, 1);
  ASSERT_TRUE(teacher.ok()) << teacher.status();
  auto student = BuildModel({.preset = "fm-student"}, 1);
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
  // A spec names exactly one model.
  EXPECT_EQ(BuildModel({}, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(BuildModel({.preset = "fm-student", .torchscript_path = "x.pt"}, 0).status().code(),
            StatusCode::kInvalidArgument);
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

// The pruned last block (class-token row only) must give the logits and parameter gradients
// of the full block, in training and in the frozen (no-grad, fused) forward.
TEST(VitTest, ClassTokenOnlyLastBlockMatchesTheFullBlock) {
  torch::manual_seed(3);
  for (const char* preset : {"fm-student", "fm-teacher"}) {
    VitConfig full_config = *VitPreset(preset);
    full_config.last_block_class_token_only = false;
    VitConfig pruned_config = *VitPreset(preset);
    ASSERT_TRUE(pruned_config.last_block_class_token_only) << "the default prunes";
    auto full = MakeVit(full_config, 11), pruned = MakeVit(pruned_config, 11);
    ASSERT_TRUE(full.ok() && pruned.ok());
    // Non-trivial weights everywhere (the initial LayerNorm and biases are constant).
    {
      torch::NoGradGuard no_grad;
      for (auto& [name, p] : (*full)->NamedParameters()) p.add_(torch::randn_like(p) * 0.05);
      ASSERT_TRUE(CopyParameters(**full, **pruned).ok());
    }
    auto images = torch::randn({5, 1, 28, 28});
    auto labels = torch::randint(10, {5}, torch::kLong);
    auto logits_full = (*full)->Forward(images);
    auto logits_pruned = (*pruned)->Forward(images);
    ASSERT_EQ(logits_pruned.sizes(), logits_full.sizes());
    EXPECT_TRUE(torch::allclose(logits_pruned, logits_full, 1e-5, 1e-6)) << preset;
    torch::nn::functional::cross_entropy(logits_full, labels).backward();
    torch::nn::functional::cross_entropy(logits_pruned, labels).backward();
    auto pf = (*full)->NamedParameters(), pp = (*pruned)->NamedParameters();
    ASSERT_EQ(pf.size(), pp.size());
    for (size_t i = 0; i < pf.size(); ++i) {
      ASSERT_TRUE(pf[i].second.grad().defined()) << pf[i].first;
      ASSERT_TRUE(pp[i].second.grad().defined()) << pp[i].first;
      EXPECT_TRUE(torch::allclose(pp[i].second.grad(), pf[i].second.grad(), 1e-4, 1e-6))
          << preset << " " << pf[i].first;
    }
    // Frozen forward (eval, no grad): the other blocks take the fused kernel.
    (*full)->SetTraining(false);
    (*pruned)->SetTraining(false);
    torch::InferenceMode inference;
    EXPECT_TRUE(torch::allclose((*pruned)->Forward(images), (*full)->Forward(images), 1e-5, 1e-6))
        << preset;
  }
}

}  // namespace
}  // namespace retort::trainer

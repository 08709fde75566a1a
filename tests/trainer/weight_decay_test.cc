// Weight-decay groups (timm's and DeiT's rule) and both AdamW kernels against
// torch::optim::AdamW with the same two parameter groups; clipping and skipping decided from
// device scalars.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>

#include "tests/trainer/trainer_test_util.h"
#include "trainer/flat_parameters.h"
#include "trainer/sharded_adamw.h"
#include "trainer/weight_decay.h"

namespace retort::trainer {
namespace {

TEST(WeightDecayTest, BiasesNormsAndEmbeddingsDoNotDecay) {
  struct Case {
    const char* name;
    int64_t dim;
    bool decays;
  };
  const Case cases[] = {
      {"blocks.0.attn.qkv.weight", 2, true},
      {"blocks.0.attn.qkv.bias", 1, false},
      {"blocks.3.norm1.weight", 1, false},
      {"norm.bias", 1, false},
      {"patch_embed.proj.weight", 4, true},
      {"head.weight", 2, true},
      {"cls_token", 3, false},
      {"pos_embed", 3, false},
      {"dist_token", 3, false},
      {"encoder.reg_token", 3, false},
      {"conv.bias", 2, false},  // named a bias: no decay whatever its shape
      {"bn1.weight", 1, false},
      {"scale", 0, false},
      {"layer.pos_embed_proj.weight", 2, true},
  };
  for (const Case& c : cases)
    EXPECT_EQ(DecaysWeight(c.name, c.dim), c.decays) << c.name << " (dim " << c.dim << ")";
}

TEST(WeightDecayTest, DecayedSpansClipToTheRangeAndMergeNeighbours) {
  const std::vector<ParamSlot> slots = {
      {"a.weight", 0, 10, 2}, {"b.weight", 10, 5, 2},    {"b.bias", 15, 5, 1},
      {"c.weight", 20, 8, 2}, {"norm.weight", 28, 4, 1},
  };
  auto spans = DecayedSpans(slots, {0, 32});
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].offset, 0);
  EXPECT_EQ(spans[0].count, 15);  // a.weight and b.weight merged
  EXPECT_EQ(spans[1].offset, 20);
  EXPECT_EQ(spans[1].count, 8);
  spans = DecayedSpans(slots, {12, 12});  // [12, 24)
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].offset, 12);
  EXPECT_EQ(spans[0].count, 3);
  EXPECT_EQ(spans[1].offset, 20);
  EXPECT_EQ(spans[1].count, 4);
  EXPECT_TRUE(DecayedSpans(slots, {15, 5}).empty());
}

// A tiny ViT's parameters in a flat buffer, optimised by ShardedAdamW over `ranks` shards
// (kernel `kernel`) and by torch::optim::AdamW with timm's two groups; returns the largest
// relative difference after `steps` updates with random gradients and a clipping scale.
double DiffAgainstTorchAdamW(AdamWKernel kernel, int ranks, int steps) {
  auto model = test::MustMake(MakeVit(test::TinyVit(16, 2), 5));
  auto reference_model = test::MustMake(MakeVit(test::TinyVit(16, 2), 5));
  auto flat = FlatParameters::Create(*model);
  EXPECT_TRUE(flat.ok()) << flat.status();
  AdamWOptions o;
  o.lr = 1e-2;
  o.weight_decay = 0.1;
  o.warmup_steps = 2;
  o.total_steps = 0;
  const ShardPlan plan = MakeEvenShardPlan((*flat)->numel(), ranks, 16);
  std::vector<std::unique_ptr<ShardedAdamW>> shards;
  for (const ShardRange& r : plan.ranges)
    shards.push_back(std::make_unique<ShardedAdamW>(o, (*flat)->params(), r,
                                                    DecayedSpans((*flat)->slots(), r), kernel));

  std::vector<torch::Tensor> decay, no_decay;
  for (auto& [name, p] : reference_model->NamedParameters())
    (DecaysWeight(name, p.dim()) ? decay : no_decay).push_back(p);
  EXPECT_FALSE(decay.empty());
  EXPECT_FALSE(no_decay.empty());
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(
                                 torch::optim::AdamWOptions(o.lr).weight_decay(o.weight_decay)));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(
                                    torch::optim::AdamWOptions(o.lr).weight_decay(0.0)));
  torch::optim::AdamW reference(std::move(groups), torch::optim::AdamWOptions(o.lr));

  auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
  for (int s = 1; s <= steps; ++s) {
    const auto grads = torch::randn({(*flat)->numel()}, gen);
    const double scale = 0.5;  // a clipping coefficient
    const double lr = LearningRateAt(o, s);
    for (auto& group : reference.param_groups())
      static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
    int64_t at = 0;
    for (auto& [name, p] : reference_model->NamedParameters()) {
      p.mutable_grad() = grads.narrow(0, at, p.numel()).view(p.sizes()) * scale;
      at += p.numel();
    }
    reference.step();
    UpdateScalars scalars;
    scalars.grad_divisor = torch::full({1}, 1.0 / scale);
    scalars.found_inf = torch::zeros({1});
    for (size_t r = 0; r < shards.size(); ++r) {
      const ShardRange& range = plan.ranges[r];
      shards[r]->Update(grads.narrow(0, range.offset, range.count).clone(), scalars);
    }
  }
  std::vector<torch::Tensor> flat_reference;
  for (auto& [name, p] : reference_model->NamedParameters())
    flat_reference.push_back(p.detach().reshape({-1}));
  return test::RelativeDiff((*flat)->params(), torch::cat(flat_reference));
}

// The loop computes in float where torch.optim.AdamW uses double scalars: ~2e-6 apart after 8
// steps. Getting a group wrong moves the LayerNorm weights (most of this tiny model's
// parameter norm) by ~1% instead.
TEST(ShardedAdamWGroupsTest, LoopKernelMatchesTorchAdamWWithTimmGroups) {
  EXPECT_LT(DiffAgainstTorchAdamW(AdamWKernel::kLoop, 1, 8), 1e-5);
  EXPECT_LT(DiffAgainstTorchAdamW(AdamWKernel::kLoop, 3, 8), 1e-5);
}

TEST(ShardedAdamWGroupsTest, FusedKernelMatchesTorchAdamWWithTimmGroups) {
  EXPECT_LT(DiffAgainstTorchAdamW(AdamWKernel::kFused, 1, 8), 1e-6);
  EXPECT_LT(DiffAgainstTorchAdamW(AdamWKernel::kFused, 3, 8), 1e-6);
}

TEST(ShardedAdamWGroupsTest, MaskingChangesTheResult) {
  // The groups matter: decaying everything gives other parameters (a check that can fail).
  auto flat_all = torch::ones({64});
  auto flat_masked = torch::ones({64});
  AdamWOptions o;
  o.lr = 0.1;
  o.weight_decay = 0.5;
  ShardedAdamW all(o, flat_all, {0, 64});
  ShardedAdamW masked(o, flat_masked, {0, 64}, {{0, 32}}, AdamWKernel::kLoop);
  all.Update(torch::zeros({64}), 1.0);
  masked.Update(torch::zeros({64}), 1.0);
  EXPECT_FLOAT_EQ(flat_all[40].item<float>(), 1.0f - 0.1f * 0.5f);
  EXPECT_FLOAT_EQ(flat_masked[40].item<float>(), 1.0f);
  EXPECT_FLOAT_EQ(flat_masked[10].item<float>(), 1.0f - 0.1f * 0.5f);
}

TEST(ShardedAdamWGroupsTest, FoundInfSkipsTheUpdateWithBothKernels) {
  for (AdamWKernel kernel : {AdamWKernel::kLoop, AdamWKernel::kFused}) {
    auto flat = torch::randn({100});
    const auto before = flat.clone();
    ShardedAdamW opt(AdamWOptions{}, flat, {0, 100}, {{0, 50}}, kernel);
    UpdateScalars skip;
    skip.grad_divisor = torch::ones({1});
    skip.found_inf = torch::ones({1});
    opt.Update(torch::randn({100}), skip);
    EXPECT_TRUE(torch::equal(flat, before));
    EXPECT_EQ(opt.exp_avg().abs().sum().item<float>(), 0.0f);
    EXPECT_EQ(opt.step(), 1);  // counted until the caller learns it was skipped
    opt.ForgetSkippedUpdate();
    EXPECT_EQ(opt.step(), 0);
    skip.found_inf.zero_();
    opt.Update(torch::randn({100}), skip);
    EXPECT_FALSE(torch::equal(flat, before));
    EXPECT_EQ(opt.step(), 1);
  }
}

TEST(ClipAndSkipScalarsTest, DivisorClipsAndNonFiniteNormsSkip) {
  auto s = ClipAndSkipScalars(torch::full({1}, 16.0f), 2.0);  // norm 4, max 2
  EXPECT_NEAR(s.grad_divisor.item<double>(), (4.0 + 1e-6) / 2.0, 1e-6);
  EXPECT_EQ(s.found_inf.item<float>(), 0.0f);
  s = ClipAndSkipScalars(torch::full({1}, 0.25f), 2.0);  // norm 0.5: below the limit
  EXPECT_EQ(s.grad_divisor.item<float>(), 1.0f);
  s = ClipAndSkipScalars(torch::full({1}, 16.0f), 0.0);  // clipping off
  EXPECT_EQ(s.grad_divisor.item<float>(), 1.0f);
  s = ClipAndSkipScalars(torch::full({1}, std::numeric_limits<float>::infinity()), 1.0);
  EXPECT_EQ(s.found_inf.item<float>(), 1.0f);
  s = ClipAndSkipScalars(torch::full({1}, std::numeric_limits<float>::quiet_NaN()), 1.0);
  EXPECT_EQ(s.found_inf.item<float>(), 1.0f);
}

}  // namespace
}  // namespace retort::trainer

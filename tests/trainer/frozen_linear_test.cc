#include "trainer/models/frozen_linear.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <thread>

#include "trainer/models/model.h"
#include "trainer/models/vit.h"

namespace retort::trainer {
namespace {

using Act = FrozenLinear::Activation;

torch::Tensor Reference(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                        Act act) {
  auto y = torch::linear(x, w, b);
  return act == Act::kGeluErf ? torch::gelu(y) : y;
}

TEST(FrozenLinearTest, MatchesLinearWithActivationAndResidual) {
  torch::manual_seed(1);
  torch::NoGradGuard no_grad;
  for (Act act : {Act::kNone, Act::kGeluErf}) {
    auto w = torch::randn({37, 19}) * 0.2, b = torch::randn({37});
    FrozenLinear layer(w, b, act);
    for (int64_t rows : {1, 7, 130}) {
      auto x = torch::randn({rows, 19});
      auto expected = Reference(x, w, b, act);
      EXPECT_TRUE(torch::allclose(layer.Forward(x), expected, 1e-5, 1e-6)) << rows;
      auto residual = torch::randn({rows, 37});
      auto before = residual.clone();
      auto out = layer.Forward(x, &residual);
      EXPECT_EQ(out.data_ptr(), residual.data_ptr()) << "adds in place";
      EXPECT_TRUE(torch::allclose(residual, before + expected, 1e-5, 1e-5)) << rows;
    }
    // A non-contiguous input is accepted; zero rows give an empty result.
    auto xt = torch::randn({19, 5}).t();
    EXPECT_TRUE(torch::allclose(layer.Forward(xt), Reference(xt, w, b, act), 1e-5, 1e-6));
    EXPECT_EQ(layer.Forward(torch::randn({0, 19})).sizes(), torch::IntArrayRef({0, 37}));
  }
}

TEST(FrozenLinearTest, WeightsChangedThroughTensorOpsAreRepacked) {
  torch::NoGradGuard no_grad;
  auto w = torch::randn({8, 4}), b = torch::zeros({8});
  FrozenLinear layer(w, b, Act::kNone);
  auto x = torch::randn({3, 4});
  EXPECT_TRUE(torch::allclose(layer.Forward(x), torch::linear(x, w, b), 1e-5, 1e-6));
  w.copy_(torch::randn({8, 4}));  // e.g. a teacher loaded after its first forward
  b.fill_(0.5);
  EXPECT_TRUE(torch::allclose(layer.Forward(x), torch::linear(x, w, b), 1e-5, 1e-6));
}

TEST(FrozenLinearTest, ShapeErrorsAreNamed) {
  torch::NoGradGuard no_grad;
  FrozenLinear layer(torch::randn({8, 4}), torch::zeros({8}), Act::kNone);
  try {
    layer.Forward(torch::randn({3, 5}));
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not match weight"), std::string::npos) << e.what();
  }
  auto bad_residual = torch::zeros({2, 8});
  EXPECT_THROW(layer.Forward(torch::randn({3, 4}), &bad_residual), c10::Error);
  EXPECT_THROW(FrozenLinear(torch::randn({8, 4}), torch::zeros({7}), Act::kNone), c10::Error);
}

TEST(FrozenLinearTest, ConcurrentCallersGetTheirOwnResults) {
  torch::NoGradGuard no_grad;
  auto w = torch::randn({64, 32}), b = torch::randn({64});
  FrozenLinear layer(w, b, Act::kGeluErf);
  std::vector<torch::Tensor> inputs, outputs(4);
  for (int t = 0; t < 4; ++t) inputs.push_back(torch::randn({50 + t, 32}));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      torch::NoGradGuard guard;
      for (int i = 0; i < 20; ++i) outputs[t] = layer.Forward(inputs[t]);
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t)
    EXPECT_TRUE(torch::allclose(outputs[t], Reference(inputs[t], w, b, Act::kGeluErf), 1e-5, 1e-6))
        << t;
}

// A frozen teacher (packed GEMMs where oneDNN is built in) gives the logits of the same model
// unfrozen, serially and from two concurrent parts.
TEST(FrozenLinearTest, FrozenVitMatchesTheUnfrozenForward) {
  torch::manual_seed(4);
  auto plain = MakeVitPreset("fm-teacher", 9), frozen = MakeVitPreset("fm-teacher", 9);
  ASSERT_TRUE(plain.ok() && frozen.ok());
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, p] : (*plain)->NamedParameters()) p.add_(torch::randn_like(p) * 0.05);
    ASSERT_TRUE(CopyParameters(**plain, **frozen).ok());
  }
  (*plain)->SetTraining(false);
  (*frozen)->SetTraining(false);
  (*frozen)->Freeze();
  torch::InferenceMode inference;
  auto images = torch::randn({6, 1, 28, 28});
  auto expected = (*plain)->Forward(images);
  EXPECT_TRUE(torch::allclose((*frozen)->Forward(images), expected, 1e-4, 1e-5));
  std::vector<torch::Tensor> halves(2);
  at::set_num_threads(2);
  at::parallel_for(0, 2, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p)
      halves[p] = (*frozen)->Forward(images.narrow(0, p * 3, 3));
  });
  at::set_num_threads(1);
  EXPECT_TRUE(torch::allclose(torch::cat(halves, 0), expected, 1e-4, 1e-5));
}

}  // namespace
}  // namespace retort::trainer

// Colour jitter (trainer/data/color_jitter.h): the draws (a permutation of the three ops,
// factors in [1 - s, 1 + s]) are pure functions of the seed, and the ops give what
// torchvision.transforms.v2.functional gives for the same factors and order (run here in the
// project's Python).
#include "trainer/data/color_jitter.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "trainer/data/batch.h"
#include "trainer/data/random.h"

namespace retort::trainer::data {
namespace {

TEST(ColorJitterTest, DrawsArePureAndCoverTheirRanges) {
  ColorJitterOptions o;
  o.strength = 0.4;
  std::set<std::array<JitterOp, 3>> orders;
  double lo = 10, hi = 0;
  for (uint64_t i = 1; i <= 2000; ++i) {
    const ColorJitterDraw d = DrawColorJitter(o, MixSeed(3, i));
    const ColorJitterDraw again = DrawColorJitter(o, MixSeed(3, i));
    ASSERT_EQ(d.order, again.order);
    ASSERT_EQ(d.brightness, again.brightness);
    orders.insert(d.order);
    for (double f : {d.brightness, d.contrast, d.saturation}) {
      lo = std::min(lo, f);
      hi = std::max(hi, f);
    }
  }
  EXPECT_EQ(orders.size(), 6u) << "every order of the three ops";
  EXPECT_GE(lo, 0.6);
  EXPECT_LT(lo, 0.61);
  EXPECT_LE(hi, 1.4);
  EXPECT_GT(hi, 1.39);
}

// Runs torchvision's functional ops on `image` ([3, H, W] in [0, 1]) in `draw`'s order.
torch::Tensor TorchvisionJitter(const torch::Tensor& image, const ColorJitterDraw& draw,
                                const std::string& dir) {
  const std::string in = dir + "/in.f32", out = dir + "/out.f32";
  auto contiguous = image.contiguous();
  std::ofstream(in, std::ios::binary)
      .write(reinterpret_cast<const char*>(contiguous.data_ptr<float>()),
             static_cast<std::streamsize>(contiguous.numel() * sizeof(float)));
  std::string ops;
  for (JitterOp op : draw.order)
    ops += op == JitterOp::kBrightness ? "b" : op == JitterOp::kContrast ? "c" : "s";
  const std::string script =
      "import sys, numpy as np, torch\n"
      "from torchvision.transforms.v2 import functional as F\n"
      "x = torch.from_numpy(np.fromfile(sys.argv[1], dtype=np.float32).reshape(" +
      std::to_string(image.size(0)) + "," + std::to_string(image.size(1)) + "," +
      std::to_string(image.size(2)) +
      "))\n"
      "b, c, s = float(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])\n"
      "for op in sys.argv[3]:\n"
      "    x = {'b': lambda x: F.adjust_brightness(x, b), 'c': lambda x: F.adjust_contrast(x, c),"
      " 's': lambda x: F.adjust_saturation(x, s)}[op](x)\n"
      "x.numpy().astype(np.float32).tofile(sys.argv[2])\n";
  std::ofstream(dir + "/jitter.py") << script;
  char factors[128];
  std::snprintf(factors, sizeof(factors), "%.17g %.17g %.17g", draw.brightness, draw.contrast,
                draw.saturation);
  const std::string command = std::string(RETORT_PYTHON) + " " + dir + "/jitter.py " + in + " " +
                              out + " " + ops + " " + factors;
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  auto result = torch::empty_like(contiguous);
  std::ifstream(out, std::ios::binary)
      .read(reinterpret_cast<char*>(result.data_ptr<float>()),
            static_cast<std::streamsize>(result.numel() * sizeof(float)));
  return result;
}

TEST(ColorJitterTest, OpsMatchTorchvisionForTheSameFactorsAndOrder) {
  char dir_template[] = "/tmp/retort_jitter_XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  ColorJitterOptions o;
  o.strength = 0.4;
  torch::manual_seed(4);
  for (uint64_t seed : {11u, 12u, 13u, 14u}) {
    const ColorJitterDraw d = DrawColorJitter(o, seed);
    auto image = torch::rand({3, 12, 10});
    auto ours = image.clone();
    ApplyColorJitter(d, ours);
    auto reference = TorchvisionJitter(image, d, dir);
    EXPECT_LT((ours - reference).abs().max().item<float>(), 1e-6) << "seed " << seed;
    EXPECT_GT((ours - image).abs().max().item<float>(), 1e-3) << "seed " << seed;
  }
  std::filesystem::remove_all(dir);
}

TEST(ColorJitterTest, BatchesAreJitteredInTheirNormalisationAndSeedZeroIsLeft) {
  ColorJitterOptions o;
  o.strength = 0.4;
  o.mean = {0.485f, 0.456f, 0.406f};
  o.std = {0.229f, 0.224f, 0.225f};
  torch::manual_seed(5);
  auto raw = torch::rand({3, 3, 6, 6});
  auto mean = torch::tensor({0.485f, 0.456f, 0.406f}).view({1, 3, 1, 1});
  auto std = torch::tensor({0.229f, 0.224f, 0.225f}).view({1, 3, 1, 1});
  Batch b;
  b.images = (raw - mean) / std;
  b.augmentation_seeds = {21, 22, 0};
  const auto untouched = b.images[2].clone();
  ASSERT_TRUE(JitterBatch(o, &b).ok());
  EXPECT_TRUE(torch::equal(b.images[2], untouched));
  for (int64_t k = 0; k < 2; ++k) {
    auto expected = raw[k].clone();
    ApplyColorJitter(DrawColorJitter(o, b.augmentation_seeds[k]), expected);
    auto got = b.images[k] * std[0] + mean[0];
    EXPECT_LT((got - expected).abs().max().item<float>(), 1e-5) << "sample " << k;
  }
  b.augmentation_seeds.pop_back();
  EXPECT_EQ(JitterBatch(o, &b).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace retort::trainer::data

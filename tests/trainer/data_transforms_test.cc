#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "trainer/data/image_transforms.h"
#include "trainer/data/random.h"

namespace retort::trainer::data {
namespace {

std::vector<uint8_t> RandomImage(int width, int height, int channels, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<uint8_t> pixels(static_cast<size_t>(width) * height * channels);
  for (uint8_t& p : pixels) p = static_cast<uint8_t>(rng.Below(256));
  return pixels;
}

float Normalized(uint8_t v, const Normalization& norm, int c) {
  return (v / 255.0f - norm.mean[c]) / norm.std[c];
}

TEST(DataTransforms, SameSizeCropIsPlainNormalizationInChwOrder) {
  const int w = 9, h = 7;
  const auto src = RandomImage(w, h, 3, 1);
  const Normalization norm = ImageNetNormalization();
  std::vector<float> out(static_cast<size_t>(3 * w * h));
  CropResizeNormalize(src.data(), w, h, 3, CropBox{0, 0, w, h}, w, h, false, norm, out.data());
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        EXPECT_NEAR(out[static_cast<size_t>((c * h + y) * w + x)],
                    Normalized(src[static_cast<size_t>((y * w + x) * 3 + c)], norm, c), 1e-5);
      }
    }
  }
}

TEST(DataTransforms, FlipMirrorsEachRow) {
  const int w = 6, h = 4;
  const auto src = RandomImage(w, h, 3, 2);
  const Normalization norm = ImageNetNormalization();
  std::vector<float> plain(static_cast<size_t>(3 * w * h));
  std::vector<float> flipped(plain.size());
  CropResizeNormalize(src.data(), w, h, 3, CropBox{0, 0, w, h}, w, h, false, norm, plain.data());
  CropResizeNormalize(src.data(), w, h, 3, CropBox{0, 0, w, h}, w, h, true, norm, flipped.data());
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        EXPECT_EQ(flipped[static_cast<size_t>((c * h + y) * w + x)],
                  plain[static_cast<size_t>((c * h + y) * w + (w - 1 - x))]);
}

TEST(DataTransforms, DownscaleAveragesLikePilBilinear) {
  // Horizontal ramp 0, 10, 20, ... over 16 columns, halved: PIL's bilinear filter averages
  // columns 2o-1..2o+2 with weights 1/8, 3/8, 3/8, 1/8, giving 20 o + 5 away from the borders.
  const int w = 16, h = 2;
  std::vector<uint8_t> src(static_cast<size_t>(w * h));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) src[static_cast<size_t>(y * w + x)] = static_cast<uint8_t>(10 * x);
  Normalization identity;  // mean 0, std 1: out = x / 255
  std::vector<float> out(8);
  CropResizeNormalize(src.data(), w, h, 1, CropBox{0, 0, w, h}, 8, 1, false, identity, out.data());
  for (int x = 1; x < 7; ++x)
    EXPECT_NEAR(out[static_cast<size_t>(x)] * 255.0f, 20.0f * x + 5.0f, 1e-3);
  // At the border the missing tap is dropped and the rest renormalised: (0*3 + 10*3 + 20*1) / 7.
  EXPECT_NEAR(out[0] * 255.0f, 50.0f / 7.0f, 1e-3);

  // Alternating columns 0/200 shrunk 4x: an antialiased filter gives ~100 everywhere, where
  // point sampling would give 0 or 200.
  std::vector<uint8_t> stripes(64 * 4);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 64; ++x) stripes[static_cast<size_t>(y * 64 + x)] = (x % 2) ? 200 : 0;
  std::vector<float> small(16);
  CropResizeNormalize(stripes.data(), 64, 4, 1, CropBox{0, 0, 64, 4}, 16, 1, false, identity,
                      small.data());
  for (int x = 1; x < 15; ++x)
    EXPECT_NEAR(small[static_cast<size_t>(x)] * 255.0f, 100.0f, 1.0f) << x;
}

TEST(DataTransforms, UpscaleIsBilinearInterpolation) {
  // Two pixels 0 and 100 doubled: half-pixel centres give 0, 25, 75, 100.
  const uint8_t src[2] = {0, 100};
  Normalization identity;
  std::vector<float> out(4);
  CropResizeNormalize(src, 2, 1, 1, CropBox{0, 0, 2, 1}, 4, 1, false, identity, out.data());
  const float expected[4] = {0.f, 25.f, 75.f, 100.f};
  for (int x = 0; x < 4; ++x) EXPECT_NEAR(out[static_cast<size_t>(x)] * 255.0f, expected[x], 1e-3);
}

TEST(DataTransforms, CropSelectsTheBoxRegion) {
  const int w = 10, h = 10;
  const auto src = RandomImage(w, h, 1, 3);
  Normalization identity;
  std::vector<float> out(static_cast<size_t>(4 * 3));
  CropResizeNormalize(src.data(), w, h, 1, CropBox{5, 2, 4, 3}, 4, 3, false, identity, out.data());
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 4; ++x)
      EXPECT_NEAR(out[static_cast<size_t>(y * 4 + x)] * 255.0f,
                  src[static_cast<size_t>((2 + y) * w + 5 + x)], 1e-3);
}

TEST(DataTransforms, RandomResizedCropStaysInsideAndInRange) {
  const RandomResizedCropOptions options;
  std::set<std::pair<int, int>> origins;
  for (uint64_t seed = 1; seed <= 2000; ++seed) {
    SplitMix64 rng(seed);
    const int w = 320, h = 240;
    const CropBox box = RandomResizedCropBox(w, h, options, rng);
    ASSERT_GE(box.x, 0);
    ASSERT_GE(box.y, 0);
    ASSERT_GT(box.width, 0);
    ASSERT_GT(box.height, 0);
    ASSERT_LE(box.x + box.width, w);
    ASSERT_LE(box.y + box.height, h);
    const double area = static_cast<double>(box.width) * box.height / (w * h);
    const double ratio = static_cast<double>(box.width) / box.height;
    // Rounding of the sides to whole pixels allows a small excursion.
    EXPECT_GE(area, 0.08 * 0.95);
    EXPECT_LE(area, 1.0);
    EXPECT_GE(ratio, 0.75 * 0.97);
    EXPECT_LE(ratio, 4.0 / 3.0 * 1.03);
    origins.insert({box.x, box.y});
  }
  EXPECT_GT(origins.size(), 500u);
  // Same seed, same box.
  SplitMix64 a(9), b(9);
  const CropBox ba = RandomResizedCropBox(100, 80, options, a);
  const CropBox bb = RandomResizedCropBox(100, 80, options, b);
  EXPECT_EQ(ba.x, bb.x);
  EXPECT_EQ(ba.width, bb.width);
  EXPECT_EQ(ba.height, bb.height);
}

TEST(DataTransforms, RandomResizedCropFallsBackToClampedCenterCrop) {
  // A 1000x10 strip: no crop with ratio <= 4/3 and scale >= 0.08 fits, so the fallback takes
  // the central 13x10 (ratio clamped to 4/3).
  SplitMix64 rng(5);
  const CropBox box = RandomResizedCropBox(1000, 10, RandomResizedCropOptions(), rng);
  EXPECT_EQ(box.height, 10);
  EXPECT_EQ(box.width, 13);
  EXPECT_EQ(box.x, (1000 - 13) / 2);
}

TEST(DataTransforms, CenterCrop) {
  const CropBox box = CenterCropBox(256, 200, 0.875);
  EXPECT_EQ(box.width, 224);
  EXPECT_EQ(box.height, 175);
  EXPECT_EQ(box.x, 16);
  EXPECT_EQ(box.y, 12);
}

TEST(DataTransforms, PadCropFlipIsAShiftedPossiblyMirroredCopy) {
  const int w = 28, h = 28, pad = 2;
  auto src = RandomImage(w, h, 1, 4);
  for (uint8_t& p : src) p = static_cast<uint8_t>(p | 1);  // no zero pixel: padding is visible
  const Normalization norm = FashionMnistNormalization();
  std::vector<float> plain(static_cast<size_t>(w * h));
  PadCropFlipNormalize(src.data(), w, h, pad, true, norm, nullptr, plain.data());
  for (int i = 0; i < w * h; ++i)
    EXPECT_NEAR(plain[static_cast<size_t>(i)], Normalized(src[static_cast<size_t>(i)], norm, 0),
                1e-5);

  std::set<std::vector<float>> distinct;
  int flips = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    SplitMix64 rng(seed);
    std::vector<float> out(plain.size());
    PadCropFlipNormalize(src.data(), w, h, pad, true, norm, &rng, out.data());
    // Find the (dx, dy, flip) that explains the output.
    int matches = 0;
    for (int flip = 0; flip < 2; ++flip) {
      for (int dy = -pad; dy <= pad; ++dy) {
        for (int dx = -pad; dx <= pad; ++dx) {
          bool same = true;
          for (int y = 0; y < h && same; ++y) {
            for (int x = 0; x < w && same; ++x) {
              const int sx = (flip ? w - 1 - x : x) + dx;
              const int sy = y + dy;
              const uint8_t v = (sx >= 0 && sx < w && sy >= 0 && sy < h)
                                    ? src[static_cast<size_t>(sy * w + sx)]
                                    : 0;
              same = std::fabs(out[static_cast<size_t>(y * w + x)] - Normalized(v, norm, 0)) < 1e-5;
            }
          }
          if (same) {
            ++matches;
            flips += flip;
          }
        }
      }
    }
    EXPECT_EQ(matches, 1) << "seed " << seed;
    distinct.insert(out);
  }
  EXPECT_GT(distinct.size(), 20u);
  EXPECT_GT(flips, 10);
  EXPECT_LT(flips, 50);
}

// The geometry every decoder shares: reproducible per seed, the documented draw order
// (crop, then one draw for the flip), about half of the seeds mirrored, and the central crop
// without a flip for evaluation (seed 0).
TEST(DataTransforms, SampleGeometryIsTheSeedsCropThenFlip) {
  const RandomResizedCropOptions crop;
  int flips = 0;
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    const SampleGeometry g = ChooseSampleGeometry(500, 375, seed, crop, true, 0.875);
    SplitMix64 rng(seed);
    const CropBox expected = RandomResizedCropBox(500, 375, crop, rng);
    EXPECT_EQ(g.box.x, expected.x);
    EXPECT_EQ(g.box.y, expected.y);
    EXPECT_EQ(g.box.width, expected.width);
    EXPECT_EQ(g.box.height, expected.height);
    EXPECT_EQ(g.flip, (rng.Next() >> 63) != 0) << "seed " << seed;
    const SampleGeometry again = ChooseSampleGeometry(500, 375, seed, crop, true, 0.875);
    EXPECT_EQ(again.box.x, g.box.x);
    EXPECT_EQ(again.flip, g.flip);
    EXPECT_FALSE(ChooseSampleGeometry(500, 375, seed, crop, false, 0.875).flip);
    flips += g.flip ? 1 : 0;
  }
  EXPECT_GT(flips, 150);
  EXPECT_LT(flips, 250);
  const SampleGeometry eval = ChooseSampleGeometry(256, 200, 0, crop, true, 0.875);
  const CropBox center = CenterCropBox(256, 200, 0.875);
  EXPECT_EQ(eval.box.x, center.x);
  EXPECT_EQ(eval.box.width, center.width);
  EXPECT_FALSE(eval.flip);
}

}  // namespace
}  // namespace retort::trainer::data

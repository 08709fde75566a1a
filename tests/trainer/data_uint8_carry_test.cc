// Why a CUDA worker does not carry its CPU-decoded image batches to the GPU as uint8 and
// normalise there (4x fewer bytes; worker/README.md): the image-folder path normalises the
// resampled value (a weighted mean of source pixels, a fraction of a grey level) before any
// rounding, and the nvJPEG decoder computes the same floats, so a uint8 batch would round
// every sample by up to half a grey level: other inputs than today's, and than the GPU
// decoder's for the same (seed, sample). Only plain pixel moves (Fashion-MNIST's pad, crop and
// flip; a crop the size of the output) are whole grey levels, exact in uint8, and their
// batches are small (28x28x1). If resampled values ever become whole grey levels (rounded as
// PIL rounds), this test fails: the uint8 carry is then exact and worth doing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "trainer/data/image_transforms.h"
#include "trainer/data/random.h"

namespace retort::trainer::data {
namespace {

TEST(DataUint8Carry, ResampledSamplesAreNotWholeGreyLevels) {
  // A 3-channel 160x120 image cropped and resized to 64x64, as RandomResizedCrop does.
  const int w = 160, h = 120, out_size = 64;
  SplitMix64 rng(7);
  std::vector<uint8_t> src(static_cast<size_t>(w) * h * 3);
  for (uint8_t& p : src) p = static_cast<uint8_t>(rng.Below(256));
  const Normalization norm = ImageNetNormalization();
  const Normalization identity;  // out = grey level / 255
  const size_t n = static_cast<size_t>(3) * out_size * out_size;
  std::vector<float> normalised(n), grey(n);
  const CropBox box{13, 9, 131, 97};
  CropResizeNormalize(src.data(), w, h, 3, box, out_size, out_size, false, norm, normalised.data());
  CropResizeNormalize(src.data(), w, h, 3, box, out_size, out_size, false, identity, grey.data());
  // What a uint8 batch normalised on the device would hold: the grey level rounded, then
  // (x / 255 - mean) / std.
  double max_diff = 0;
  size_t changed = 0;
  const size_t plane = static_cast<size_t>(out_size) * out_size;
  for (size_t i = 0; i < n; ++i) {
    const int c = static_cast<int>(i / plane);
    const float level = std::round(std::clamp(grey[i] * 255.0f, 0.0f, 255.0f));
    const float via_uint8 = (level / 255.0f - norm.mean[c]) / norm.std[c];
    const double diff = std::fabs(via_uint8 - normalised[i]);
    max_diff = std::max(max_diff, diff);
    changed += diff > 1e-4 ? 1 : 0;
  }
  std::printf("uint8 carry: %zu of %zu values change, by at most %.5f (normalised units)\n",
              changed, n, max_diff);
  EXPECT_GT(changed, n / 2) << "resampled values are whole grey levels: carry uint8";
  // Bounded by half a grey level over the smallest std.
  EXPECT_LE(max_diff, 0.5 / (255.0 * 0.224) + 1e-4);
}

}  // namespace
}  // namespace retort::trainer::data

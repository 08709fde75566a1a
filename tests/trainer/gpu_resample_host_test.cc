// The GPU decoder's crop-resize-flip-normalise, run on the host: every index of both kernel
// passes (resample_launch.h, the functions the CUDA kernels run per thread) set up as the
// nvJPEG decoder sets them up (MakeResampleLaunch), against the CPU path's CropResizeNormalize
// on the same pixels and geometry. Same arithmetic in the same order: the outputs must agree
// to float rounding, so an indexing slip in the kernels (flip, row offset, scratch layout,
// channel planes) fails here without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "trainer/data/gpu/resample_launch.h"
#include "trainer/data/image_transforms.h"
#include "trainer/data/random.h"

namespace retort::trainer::data {
namespace {

std::vector<uint8_t> RandomRgb(int width, int height, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<uint8_t> pixels(static_cast<size_t>(width) * height * 3);
  for (uint8_t& p : pixels) p = static_cast<uint8_t>(rng.Next() >> 56);
  return pixels;
}

// The kernels' passes on the host, with the taps and buffers where the decoder would upload
// them.
std::vector<float> HostKernels(const std::vector<uint8_t>& image, int width, int height,
                               const SampleGeometry& geometry, int out_size,
                               const Normalization& norm) {
  const ResamplePlan plan = PlanResample(width, height, geometry.box, out_size, out_size);
  gpu::ResampleLaunch l = gpu::MakeResampleLaunch(plan, width, geometry.flip, norm);
  std::vector<float> scratch(static_cast<size_t>(gpu::ScratchFloats(l)));
  std::vector<float> out(static_cast<size_t>(3) * out_size * out_size, NAN);
  l.image = image.data();
  l.x_start = plan.xs.start.data();
  l.x_count = plan.xs.count.data();
  l.x_weights = plan.xs.weights.data();
  l.y_start = plan.ys.start.data();
  l.y_count = plan.ys.count.data();
  l.y_weights = plan.ys.weights.data();
  l.scratch = scratch.data();
  l.out = out.data();
  gpu::RunResampleOnHost(l);
  return out;
}

struct Case {
  int width;
  int height;
  int out_size;
};

TEST(GpuResampleOnHostTest, EqualsTheCpuPathForRandomCropsFlipsAndTheEvalCrop) {
  const Case cases[] = {{500, 375, 224}, {97, 61, 56},   {224, 224, 224},
                        {31, 400, 32},   {640, 480, 96}, {7, 5, 16}};
  const Normalization norm = ImageNetNormalization();
  int flipped = 0;
  int compared = 0;
  for (const Case& c : cases) {
    const std::vector<uint8_t> image = RandomRgb(c.width, c.height, 1000 + c.width);
    for (uint64_t seed = 0; seed < 12; ++seed) {  // seed 0: the evaluation crop
      const SampleGeometry geometry = ChooseSampleGeometry(
          c.width, c.height, seed, RandomResizedCropOptions{}, /*horizontal_flip=*/true, 0.875);
      flipped += geometry.flip ? 1 : 0;
      std::vector<float> expected(static_cast<size_t>(3) * c.out_size * c.out_size);
      CropResizeNormalize(image.data(), c.width, c.height, 3, geometry.box, c.out_size, c.out_size,
                          geometry.flip, norm, expected.data());
      const std::vector<float> got =
          HostKernels(image, c.width, c.height, geometry, c.out_size, norm);
      float worst = 0;
      size_t worst_at = 0;
      for (size_t i = 0; i < expected.size(); ++i) {
        const float d = std::isnan(got[i]) ? INFINITY : std::fabs(got[i] - expected[i]);
        if (d > worst) worst = d, worst_at = i;
      }
      ++compared;
      // Normalised units: one 8-bit level is about 0.017 here; float rounding is ~1e-6.
      EXPECT_LE(worst, 1e-4f) << c.width << "x" << c.height << " -> " << c.out_size << ", seed "
                              << seed << ", flip " << geometry.flip << ", box " << geometry.box.x
                              << "," << geometry.box.y << " " << geometry.box.width << "x"
                              << geometry.box.height << ": worst at output " << worst_at << " ("
                              << got[worst_at] << " vs " << expected[worst_at] << ")";
    }
  }
  EXPECT_GT(flipped, 0) << "no flipped crop among the cases: the flip path went untested";
  EXPECT_EQ(compared, 6 * 12);
}

TEST(GpuResampleOnHostTest, TheLaunchCoversExactlyTheRowsTheVerticalTapsRead) {
  const ResamplePlan plan = PlanResample(300, 200, CropRegion(40.5, 30.25, 120, 90), 64, 64);
  const gpu::ResampleLaunch l = gpu::MakeResampleLaunch(plan, 300, false, Normalization{});
  int first = 1 << 30;
  int end = 0;
  for (size_t o = 0; o < plan.ys.start.size(); ++o) {
    first = std::min(first, plan.ys.start[o]);
    end = std::max(end, plan.ys.start[o] + plan.ys.count[o]);
  }
  EXPECT_EQ(l.row_begin, first);
  EXPECT_EQ(l.row_end, end);
  EXPECT_EQ(l.pitch, 300 * 3);
  EXPECT_EQ(l.out_size, 64);
  EXPECT_EQ(gpu::HorizontalPassSize(l), static_cast<long long>(end - first) * 64);
  EXPECT_EQ(gpu::ScratchFloats(l), static_cast<long long>(end - first) * 64 * 3);
}

}  // namespace
}  // namespace retort::trainer::data

#include "trainer/data/gpu/resample_launch.h"

#include "trainer/data/image_transforms.h"

namespace retort::trainer::data::gpu {

ResampleLaunch MakeResampleLaunch(const ResamplePlan& plan, int width, bool flip,
                                  const Normalization& norm) {
  ResampleLaunch l;
  l.pitch = width * 3;
  l.row_begin = plan.source.y;
  l.row_end = plan.source.y + plan.source.height;
  l.out_size = static_cast<int>(plan.xs.start.size());
  l.x_max_taps = plan.xs.max_taps;
  l.y_max_taps = plan.ys.max_taps;
  l.flip = flip;
  for (int c = 0; c < 3; ++c) {
    l.scale[c] = 1.0f / (255.0f * norm.std[c]);
    l.shift[c] = -norm.mean[c] / norm.std[c];
  }
  return l;
}

void RunResampleOnHost(const ResampleLaunch& l) {
  for (long long i = 0; i < HorizontalPassSize(l); ++i) HorizontalPassAt(l, i);
  for (long long i = 0; i < VerticalPassSize(l); ++i) VerticalPassAt(l, i);
}

}  // namespace retort::trainer::data::gpu

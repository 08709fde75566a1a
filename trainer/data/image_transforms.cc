#include "trainer/data/image_transforms.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace retort::trainer::data {

SampleGeometry ChooseSampleGeometry(int width, int height, uint64_t augmentation_seed,
                                    const RandomResizedCropOptions& crop, bool horizontal_flip,
                                    double eval_crop_fraction) {
  SampleGeometry g;
  if (augmentation_seed == 0) {
    g.box = CenterCropBox(width, height, eval_crop_fraction);
    return g;
  }
  SplitMix64 rng(augmentation_seed);
  g.box = RandomResizedCropBox(width, height, crop, rng);
  g.flip = horizontal_flip && (rng.Next() >> 63) != 0;
  return g;
}

CropBox RandomResizedCropBox(int width, int height, const RandomResizedCropOptions& options,
                             SplitMix64& rng) {
  const double area = static_cast<double>(width) * height;
  const double log_min = std::log(options.min_ratio);
  const double log_max = std::log(options.max_ratio);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.Uniform(options.min_scale, options.max_scale);
    const double ratio = std::exp(rng.Uniform(log_min, log_max));
    const int w = static_cast<int>(std::lround(std::sqrt(target_area * ratio)));
    const int h = static_cast<int>(std::lround(std::sqrt(target_area / ratio)));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      CropBox box;
      box.width = w;
      box.height = h;
      box.y = static_cast<int>(rng.Between(0, height - h));
      box.x = static_cast<int>(rng.Between(0, width - w));
      return box;
    }
  }
  // Fallback: whole-image central crop with the ratio clamped into [min_ratio, max_ratio].
  const double in_ratio = static_cast<double>(width) / height;
  CropBox box;
  if (in_ratio < options.min_ratio) {
    box.width = width;
    box.height = std::max(1, static_cast<int>(std::lround(width / options.min_ratio)));
  } else if (in_ratio > options.max_ratio) {
    box.height = height;
    box.width = std::max(1, static_cast<int>(std::lround(height * options.max_ratio)));
  } else {
    box.width = width;
    box.height = height;
  }
  box.width = std::min(box.width, width);
  box.height = std::min(box.height, height);
  box.x = (width - box.width) / 2;
  box.y = (height - box.height) / 2;
  return box;
}

CropBox CenterCropBox(int width, int height, double fraction) {
  CropBox box;
  box.width = std::clamp(static_cast<int>(std::lround(width * fraction)), 1, width);
  box.height = std::clamp(static_cast<int>(std::lround(height * fraction)), 1, height);
  box.x = (width - box.width) / 2;
  box.y = (height - box.height) / 2;
  return box;
}

Normalization ImageNetNormalization() {
  return Normalization{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
}

Normalization FashionMnistNormalization() {
  return Normalization{{0.2860f, 0.2860f, 0.2860f}, {0.3530f, 0.3530f, 0.3530f}};
}

ResampleAxis ResampleTaps(int out_size, double offset, double extent, int src_size) {
  const double scale = extent / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = filter_scale;  // triangle support 1, stretched
  const int lo_limit = std::max(0, static_cast<int>(std::floor(offset)));
  const int hi_limit =
      std::max(lo_limit + 1, std::min(src_size, static_cast<int>(std::ceil(offset + extent))));
  ResampleAxis taps;
  taps.max_taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  taps.start.resize(static_cast<size_t>(out_size));
  taps.count.resize(static_cast<size_t>(out_size));
  taps.weights.assign(static_cast<size_t>(out_size) * taps.max_taps, 0.0f);
  for (int o = 0; o < out_size; ++o) {
    const double center = offset + (o + 0.5) * scale;
    int lo = std::max(lo_limit, static_cast<int>(std::floor(center - support + 0.5)));
    int hi = std::min(hi_limit, static_cast<int>(std::floor(center + support + 0.5)));
    hi = std::min(hi, lo + taps.max_taps);
    float* w = &taps.weights[static_cast<size_t>(o) * taps.max_taps];
    double total = 0;
    for (int x = lo; x < hi; ++x) {
      const double t = std::fabs((x + 0.5 - center) / filter_scale);
      const double v = t < 1.0 ? 1.0 - t : 0.0;
      w[x - lo] = static_cast<float>(v);
      total += v;
    }
    if (total <= 0) {  // degenerate (region narrower than a pixel): nearest sample
      lo = std::clamp(static_cast<int>(std::floor(center)), lo_limit, hi_limit - 1);
      hi = lo + 1;
      w[0] = 1.0f;
      total = 1.0;
    }
    for (int k = 0; k < hi - lo; ++k) w[k] = static_cast<float>(w[k] / total);
    taps.start[static_cast<size_t>(o)] = lo;
    taps.count[static_cast<size_t>(o)] = hi - lo;
  }
  return taps;
}

namespace {

// [begin, end) of the samples any output of `axis` reads.
void TapRange(const ResampleAxis& axis, int* begin, int* end) {
  *begin = 0;
  *end = 0;
  for (size_t o = 0; o < axis.start.size(); ++o) {
    const int lo = axis.start[o];
    const int hi = axis.start[o] + axis.count[o];
    *begin = o == 0 ? lo : std::min(*begin, lo);
    *end = o == 0 ? hi : std::max(*end, hi);
  }
}

}  // namespace

ResamplePlan PlanResample(int width, int height, const CropRegion& region, int out_width,
                          int out_height) {
  ResamplePlan plan;
  plan.xs = ResampleTaps(out_width, region.x, region.width, width);
  plan.ys = ResampleTaps(out_height, region.y, region.height, height);
  int x_end = 0;
  int y_end = 0;
  TapRange(plan.xs, &plan.source.x, &x_end);
  TapRange(plan.ys, &plan.source.y, &y_end);
  plan.source.width = x_end - plan.source.x;
  plan.source.height = y_end - plan.source.y;
  return plan;
}

void CropResizeNormalize(const uint8_t* src, int width, int height, int channels,
                         const CropRegion& region, int out_width, int out_height, bool flip,
                         const Normalization& norm, float* out) {
  CropBox whole;
  whole.width = width;
  whole.height = height;
  CropResizeNormalizeWindow(src, whole, channels,
                            PlanResample(width, height, region, out_width, out_height), flip, norm,
                            out);
}

namespace {

// CropResizeNormalizeWindow's passes for a channel count known at compile time: the per-pixel
// channel loops unroll instead of becoming library calls. The arithmetic (and so every output
// bit) is the same for every kChannels.
template <int kChannels>
void ResampleNormalize(const uint8_t* src, const CropBox& window, const ResamplePlan& plan,
                       bool flip, const Normalization& norm, float* out) {
  const ResampleAxis& xs = plan.xs;
  const ResampleAxis& ys = plan.ys;
  const int out_width = static_cast<int>(xs.start.size());
  const int out_height = static_cast<int>(ys.start.size());
  // Source rows any output row reads.
  const int row_begin = plan.source.y;
  const int row_end = plan.source.y + plan.source.height;
  // Horizontal pass into a float buffer: rows [row_begin, row_end) x out_width x channels, with
  // the flip applied here (output column ox reads source column taps of out_width - 1 - ox).
  // Image row y, column x is window pixel (y - window.y, x - window.x).
  const size_t tmp_row = static_cast<size_t>(out_width) * kChannels;
  std::vector<float> tmp(static_cast<size_t>(row_end - row_begin) * tmp_row);
  const size_t row_stride = static_cast<size_t>(window.width) * kChannels;
  for (int y = row_begin; y < row_end; ++y) {
    const uint8_t* row = src + static_cast<size_t>(y - window.y) * row_stride;
    float* dst = &tmp[static_cast<size_t>(y - row_begin) * tmp_row];
    for (int ox = 0; ox < out_width; ++ox) {
      const auto t = static_cast<size_t>(flip ? out_width - 1 - ox : ox);
      const float* w = &xs.weights[t * xs.max_taps];
      const uint8_t* p = row + static_cast<size_t>(xs.start[t] - window.x) * kChannels;
      float acc[kChannels] = {};
      for (int k = 0; k < xs.count[t]; ++k) {
        for (int c = 0; c < kChannels; ++c)
          acc[c] += w[k] * p[static_cast<size_t>(k) * kChannels + c];
      }
      for (int c = 0; c < kChannels; ++c) dst[static_cast<size_t>(ox) * kChannels + c] = acc[c];
    }
  }
  // Vertical pass, normalisation and HWC -> CHW.
  const size_t plane = static_cast<size_t>(out_width) * out_height;
  float scale[kChannels];
  float shift[kChannels];
  for (int c = 0; c < kChannels; ++c) {
    scale[c] = 1.0f / (255.0f * norm.std[c]);
    shift[c] = -norm.mean[c] / norm.std[c];
  }
  for (int oy = 0; oy < out_height; ++oy) {
    const auto t = static_cast<size_t>(oy);
    const float* w = &ys.weights[t * ys.max_taps];
    const float* base = &tmp[static_cast<size_t>(ys.start[t] - row_begin) * tmp_row];
    for (int ox = 0; ox < out_width; ++ox) {
      float acc[kChannels] = {};
      for (int k = 0; k < ys.count[t]; ++k) {
        const float* p =
            base + static_cast<size_t>(k) * tmp_row + static_cast<size_t>(ox) * kChannels;
        for (int c = 0; c < kChannels; ++c) acc[c] += w[k] * p[c];
      }
      const size_t o = t * out_width + ox;
      for (int c = 0; c < kChannels; ++c)
        out[static_cast<size_t>(c) * plane + o] = acc[c] * scale[c] + shift[c];
    }
  }
}

}  // namespace

void CropResizeNormalizeWindow(const uint8_t* src, const CropBox& window, int channels,
                               const ResamplePlan& plan, bool flip, const Normalization& norm,
                               float* out) {
  switch (channels) {
    case 1:
      return ResampleNormalize<1>(src, window, plan, flip, norm, out);
    case 2:
      return ResampleNormalize<2>(src, window, plan, flip, norm, out);
    default:
      return ResampleNormalize<3>(src, window, plan, flip, norm, out);
  }
}

void PadCropFlipNormalize(const uint8_t* src, int width, int height, int padding, bool allow_flip,
                          const Normalization& norm, SplitMix64* rng, float* out) {
  const float scale = 1.0f / (255.0f * norm.std[0]);
  const float shift = -norm.mean[0] / norm.std[0];
  int dx = 0;
  int dy = 0;
  bool flip = false;
  if (rng != nullptr) {
    // Window origin in padded coordinates is in [0, 2*padding]; shift relative to the image.
    dy = static_cast<int>(rng->Between(0, 2 * padding)) - padding;
    dx = static_cast<int>(rng->Between(0, 2 * padding)) - padding;
    flip = allow_flip && (rng->Next() >> 63) != 0;
  }
  for (int y = 0; y < height; ++y) {
    const int sy = y + dy;
    for (int x = 0; x < width; ++x) {
      const int wx = flip ? width - 1 - x : x;
      const int sx = wx + dx;
      const float v = (sy >= 0 && sy < height && sx >= 0 && sx < width)
                          ? static_cast<float>(src[static_cast<size_t>(sy) * width + sx])
                          : 0.0f;
      out[static_cast<size_t>(y) * width + x] = v * scale + shift;
    }
  }
}

}  // namespace retort::trainer::data

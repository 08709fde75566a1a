#include "trainer/data/image_transforms.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace retort::trainer::data {

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

namespace {

// Source sampling position for each output coordinate: lower index, upper index, upper weight.
struct Tap {
  int lo;
  int hi;
  float frac;
};

std::vector<Tap> BilinearTaps(int out_size, double offset, double extent, int src_size) {
  std::vector<Tap> taps(static_cast<size_t>(out_size));
  const double scale = extent / out_size;
  // Valid sample centres: inside the region and inside the image.
  const double lo_limit = std::max(0.0, std::floor(offset));
  const double hi_limit =
      std::max(lo_limit, std::min<double>(src_size - 1, std::ceil(offset + extent) - 1));
  for (int o = 0; o < out_size; ++o) {
    const double s = std::clamp(offset + (o + 0.5) * scale - 0.5, lo_limit, hi_limit);
    const int lo = static_cast<int>(std::floor(s));
    const int hi = std::min(lo + 1, static_cast<int>(hi_limit));
    taps[static_cast<size_t>(o)] = Tap{lo, hi, static_cast<float>(s - lo)};
  }
  return taps;
}

}  // namespace

void CropResizeNormalize(const uint8_t* src, int width, int height, int channels,
                         const CropRegion& region, int out_width, int out_height, bool flip,
                         const Normalization& norm, float* out) {
  const std::vector<Tap> xs = BilinearTaps(out_width, region.x, region.width, width);
  const std::vector<Tap> ys = BilinearTaps(out_height, region.y, region.height, height);
  const size_t plane = static_cast<size_t>(out_width) * out_height;
  float scale[3];
  float shift[3];
  for (int c = 0; c < channels; ++c) {
    scale[c] = 1.0f / (255.0f * norm.std[c]);
    shift[c] = -norm.mean[c] / norm.std[c];
  }
  const size_t row_stride = static_cast<size_t>(width) * channels;
  for (int oy = 0; oy < out_height; ++oy) {
    const Tap& ty = ys[static_cast<size_t>(oy)];
    const uint8_t* row0 = src + static_cast<size_t>(ty.lo) * row_stride;
    const uint8_t* row1 = src + static_cast<size_t>(ty.hi) * row_stride;
    for (int ox = 0; ox < out_width; ++ox) {
      const Tap& tx = xs[static_cast<size_t>(flip ? out_width - 1 - ox : ox)];
      const size_t a = static_cast<size_t>(tx.lo) * channels;
      const size_t b = static_cast<size_t>(tx.hi) * channels;
      const size_t o = static_cast<size_t>(oy) * out_width + ox;
      for (int c = 0; c < channels; ++c) {
        const float top = row0[a + c] + tx.frac * (static_cast<float>(row0[b + c]) - row0[a + c]);
        const float bottom =
            row1[a + c] + tx.frac * (static_cast<float>(row1[b + c]) - row1[a + c]);
        const float v = top + ty.frac * (bottom - top);
        out[static_cast<size_t>(c) * plane + o] = v * scale[c] + shift[c];
      }
    }
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

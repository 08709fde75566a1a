#include "trainer/data/color_jitter.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "trainer/data/batch.h"
#include "trainer/data/random.h"

namespace retort::trainer::data {
namespace {

constexpr uint64_t kJitterTag = 0x4A4954544552ull;  // "JITTER"

torch::Tensor Gray(const torch::Tensor& image) {
  if (image.size(0) == 1) return image;
  return (0.2989 * image[0] + 0.587 * image[1] + 0.114 * image[2]).unsqueeze(0);
}

void Blend(torch::Tensor& image, const torch::Tensor& other, double factor) {
  image.mul_(factor).add_(other, 1.0 - factor).clamp_(0.0, 1.0);
}

}  // namespace

Status ValidateColorJitterOptions(const ColorJitterOptions& o) {
  if (!(o.strength >= 0 && o.strength <= 1))
    return InvalidArgumentError("colour jitter: strength must be in [0, 1], got " +
                                std::to_string(o.strength));
  for (float s : o.std)
    if (!(s > 0)) return InvalidArgumentError("colour jitter: normalisation std must be > 0");
  return Status::Ok();
}

ColorJitterDraw DrawColorJitter(const ColorJitterOptions& o, uint64_t augmentation_seed) {
  SplitMix64 rng(MixSeed(augmentation_seed, kJitterTag));
  ColorJitterDraw d;
  // Fisher-Yates over the three ops.
  for (int i = 2; i > 0; --i)
    std::swap(d.order[static_cast<size_t>(i)],
              d.order[static_cast<size_t>(rng.Below(static_cast<uint64_t>(i) + 1))]);
  const double lo = std::max(0.0, 1.0 - o.strength), hi = 1.0 + o.strength;
  d.brightness = rng.Uniform(lo, hi);
  d.contrast = rng.Uniform(lo, hi);
  d.saturation = rng.Uniform(lo, hi);
  return d;
}

void ApplyColorJitter(const ColorJitterDraw& d, torch::Tensor image) {
  torch::NoGradGuard no_grad;
  for (JitterOp op : d.order) {
    switch (op) {
      case JitterOp::kBrightness:
        Blend(image, torch::zeros_like(image), d.brightness);
        break;
      case JitterOp::kContrast:
        Blend(image, Gray(image).mean().expand_as(image), d.contrast);
        break;
      case JitterOp::kSaturation:
        if (image.size(0) > 1) Blend(image, Gray(image).expand_as(image), d.saturation);
        break;
    }
  }
}

Status JitterBatch(const ColorJitterOptions& o, Batch* batch) {
  torch::Tensor& images = batch->images;
  if (!images.defined() || images.dim() != 4 || (images.size(1) != 1 && images.size(1) != 3))
    return InvalidArgumentError("colour jitter: images must be [n, 1 or 3, H, W]");
  const int64_t n = images.size(0), channels = images.size(1);
  if (static_cast<int64_t>(batch->augmentation_seeds.size()) != n)
    return InvalidArgumentError("colour jitter: step " + std::to_string(batch->step) + " has " +
                                std::to_string(batch->augmentation_seeds.size()) +
                                " augmentation seeds for " + std::to_string(n) + " samples");
  torch::NoGradGuard no_grad;
  auto mean = torch::tensor(std::vector<float>(o.mean.begin(), o.mean.begin() + channels))
                  .to(images.device())
                  .view({channels, 1, 1});
  auto std = torch::tensor(std::vector<float>(o.std.begin(), o.std.begin() + channels))
                 .to(images.device())
                 .view({channels, 1, 1});
  for (int64_t k = 0; k < n; ++k) {
    const uint64_t seed = batch->augmentation_seeds[static_cast<size_t>(k)];
    if (seed == 0) continue;
    auto image = images.select(0, k);
    auto raw = (image * std + mean).clamp_(0.0, 1.0);
    ApplyColorJitter(DrawColorJitter(o, seed), raw);
    image.copy_((raw - mean) / std);
  }
  return Status::Ok();
}

}  // namespace retort::trainer::data

#include "trainer/data/random_erasing.h"

#include <torch/torch.h>

#include <cmath>

#include "trainer/data/batch.h"
#include "trainer/data/random.h"

namespace retort::trainer::data {
namespace {

constexpr uint64_t kBoxesTag = 0x4552415345ull;       // "ERASE"
constexpr uint64_t kValuesTag = 0x45524153455058ull;  // "ERASEPX"
constexpr int kAttempts = 10;                         // timm's

// The fill of one box: [channels, h, w] float32 on the host.
torch::Tensor FillValues(EraseFill fill, uint64_t seed, int64_t channels, int64_t h, int64_t w) {
  if (fill == EraseFill::kZero) return torch::zeros({channels, h, w});
  SplitMix64 rng(seed);
  if (fill == EraseFill::kPerChannel) {
    auto values = torch::empty({channels, 1, 1});
    for (int64_t c = 0; c < channels; ++c) values[c] = static_cast<float>(Normal(rng));
    return values.expand({channels, h, w});
  }
  auto values = torch::empty({channels, h, w});
  float* out = values.data_ptr<float>();
  for (int64_t i = 0; i < channels * h * w; ++i) out[i] = static_cast<float>(Normal(rng));
  return values;
}

}  // namespace

Status ValidateRandomErasingOptions(const RandomErasingOptions& o) {
  if (!(o.probability >= 0 && o.probability <= 1))
    return InvalidArgumentError("random erasing: probability must be in [0, 1]");
  if (o.count < 1 || o.count > 64)
    return InvalidArgumentError("random erasing: count must be in [1, 64], got " +
                                std::to_string(o.count));
  if (!(o.min_area > 0 && o.min_area <= o.max_area && o.max_area <= 1) ||
      !(o.min_aspect > 0 && o.min_aspect <= 1))
    return InvalidArgumentError(
        "random erasing: need 0 < min_area <= max_area <= 1 and "
        "0 < min_aspect <= 1");
  return Status::Ok();
}

std::vector<ErasedBox> DrawErasedBoxes(const RandomErasingOptions& o, uint64_t augmentation_seed,
                                       int64_t height, int64_t width) {
  std::vector<ErasedBox> boxes;
  SplitMix64 rng(MixSeed(augmentation_seed, kBoxesTag));
  if (rng.Uniform() >= o.probability) return boxes;
  const double area = static_cast<double>(height * width);
  const double log_lo = std::log(o.min_aspect), log_hi = std::log(1.0 / o.min_aspect);
  for (int box = 0; box < o.count; ++box) {
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
      const double target = rng.Uniform(o.min_area, o.max_area) * area / o.count;
      const double aspect = std::exp(rng.Uniform(log_lo, log_hi));
      const auto h = static_cast<int64_t>(std::lround(std::sqrt(target * aspect)));
      const auto w = static_cast<int64_t>(std::lround(std::sqrt(target / aspect)));
      if (w < width && h < height && w > 0 && h > 0) {
        ErasedBox b;
        b.height = h;
        b.width = w;
        b.top = rng.Between(0, height - h);
        b.left = rng.Between(0, width - w);
        boxes.push_back(b);
        break;
      }
    }
  }
  return boxes;
}

Status EraseBatch(const RandomErasingOptions& o, Batch* batch) {
  torch::Tensor& images = batch->images;
  if (!images.defined() || images.dim() != 4)
    return InvalidArgumentError("random erasing: images must be [n, C, H, W]");
  const int64_t n = images.size(0), channels = images.size(1);
  const int64_t height = images.size(2), width = images.size(3);
  if (static_cast<int64_t>(batch->augmentation_seeds.size()) != n)
    return InvalidArgumentError("random erasing: step " + std::to_string(batch->step) + " has " +
                                std::to_string(batch->augmentation_seeds.size()) +
                                " augmentation seeds for " + std::to_string(n) + " samples");
  torch::NoGradGuard no_grad;
  for (int64_t k = 0; k < n; ++k) {
    const uint64_t seed = batch->augmentation_seeds[static_cast<size_t>(k)];
    if (seed == 0) continue;
    const auto boxes = DrawErasedBoxes(o, seed, height, width);
    for (size_t i = 0; i < boxes.size(); ++i) {
      const ErasedBox& b = boxes[i];
      auto values =
          FillValues(o.fill, MixSeed(MixSeed(seed, kValuesTag), i), channels, b.height, b.width);
      images.select(0, k)
          .slice(1, b.top, b.top + b.height)
          .slice(2, b.left, b.left + b.width)
          .copy_(values.to(images.device(), /*non_blocking=*/false));
    }
  }
  return Status::Ok();
}

}  // namespace retort::trainer::data

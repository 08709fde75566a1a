#include "trainer/data/batch_mixing.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "trainer/data/batch.h"
#include "trainer/data/random.h"

namespace retort::trainer::data {
namespace {

constexpr uint64_t kMixingTag = 0x4D4958494E47ull;  // "MIXING"

// Gamma(shape, 1) by Marsaglia and Tsang (2000); shape < 1 through Gamma(shape + 1) U^(1/shape).
double Gamma(double shape, SplitMix64& rng) {
  if (shape < 1.0) {
    const double u = 1.0 - rng.Uniform();
    return Gamma(shape + 1.0, rng) * std::pow(u, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {  // accepts with probability > 0.95 per round
    double x, v;
    do {
      x = Normal(rng);
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = 1.0 - rng.Uniform();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

double Beta(double alpha, SplitMix64& rng) {
  const double a = Gamma(alpha, rng);
  const double b = Gamma(alpha, rng);
  return a + b > 0 ? a / (a + b) : 0.5;
}

// timm's rand_bbox: a box of side sqrt(1 - lam) of each dimension, centred uniformly, clipped.
void CutMixBox(double lam, int64_t h, int64_t w, SplitMix64& rng, PairMix* out) {
  const double ratio = std::sqrt(1.0 - lam);
  const auto cut_h = static_cast<int64_t>(static_cast<double>(h) * ratio);
  const auto cut_w = static_cast<int64_t>(static_cast<double>(w) * ratio);
  const auto cy = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(h)));
  const auto cx = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(w)));
  out->y0 = std::clamp<int64_t>(cy - cut_h / 2, 0, h);
  out->y1 = std::clamp<int64_t>(cy + cut_h / 2, 0, h);
  out->x0 = std::clamp<int64_t>(cx - cut_w / 2, 0, w);
  out->x1 = std::clamp<int64_t>(cx + cut_w / 2, 0, w);
  const double area = static_cast<double>((out->y1 - out->y0) * (out->x1 - out->x0));
  out->lambda = 1.0 - area / static_cast<double>(h * w);
}

}  // namespace

Status ValidateMixingOptions(const MixingOptions& o) {
  auto in = [](double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v <= hi; };
  if (!in(o.mixup_alpha, 0, 100) || !in(o.cutmix_alpha, 0, 100))
    return InvalidArgumentError("mixing: alphas must be in [0, 100], got mixup " +
                                std::to_string(o.mixup_alpha) + ", cutmix " +
                                std::to_string(o.cutmix_alpha));
  if (!in(o.prob, 0, 1) || !in(o.switch_prob, 0, 1))
    return InvalidArgumentError("mixing: prob and switch_prob must be in [0, 1]");
  return Status::Ok();
}

double DrawSymmetricBeta(double alpha, uint64_t seed) {
  SplitMix64 rng(seed);
  return Beta(alpha, rng);
}

PairMix DrawPairMix(const MixingOptions& o, int64_t epoch, int64_t step, int64_t pair,
                    int64_t height, int64_t width) {
  uint64_t seed = MixSeed(MixSeed(MixSeed(o.seed, kMixingTag), static_cast<uint64_t>(epoch)),
                          static_cast<uint64_t>(step));
  if (!o.per_batch) seed = MixSeed(seed, static_cast<uint64_t>(pair));
  SplitMix64 rng(seed);
  PairMix out;
  if (rng.Uniform() >= o.prob) return out;
  out.mixed = true;
  if (o.mixup_alpha > 0 && o.cutmix_alpha > 0)
    out.cutmix = rng.Uniform() < o.switch_prob;
  else
    out.cutmix = o.cutmix_alpha > 0;
  const double lam = Beta(out.cutmix ? o.cutmix_alpha : o.mixup_alpha, rng);
  if (out.cutmix)
    CutMixBox(lam, height, width, rng, &out);
  else
    out.lambda = lam;
  return out;
}

Status MixBatch(const MixingOptions& o, int64_t step_batch_size, Batch* batch) {
  const int64_t n = batch->images.size(0);
  const int64_t first = batch->position_in_step;
  if (first % 2 != 0)
    return InvalidArgumentError("mixing: step " + std::to_string(batch->step) +
                                ": the slice starts at position " + std::to_string(first) +
                                ", inside a pair (the loader's split_unit must be 2)");
  if (n % 2 != 0 && first + n != step_batch_size)
    return InvalidArgumentError("mixing: step " + std::to_string(batch->step) +
                                ": the slice ends inside a pair (the loader's split_unit must "
                                "be 2)");
  const int64_t h = batch->images.size(2), w = batch->images.size(3);
  std::vector<float> own(static_cast<size_t>(n), 1.0f);
  std::vector<int64_t> partner_index(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) partner_index[static_cast<size_t>(k)] = k ^ 1;
  if (n % 2 != 0) partner_index[static_cast<size_t>(n - 1)] = n - 1;  // the lone last sample

  // Mixup for all its pairs at once (x' = w x + (1 - w) x_partner, w = 1 for the other rows),
  // then CutMix's boxes pair by pair.
  std::vector<float> blend(static_cast<size_t>(n), 1.0f);
  std::vector<PairMix> boxes;
  std::vector<int64_t> box_pairs;
  for (int64_t k = 0; k + 1 < n; k += 2) {
    const PairMix mix = DrawPairMix(o, batch->epoch, batch->step, (first + k) / 2, h, w);
    if (!mix.mixed) continue;
    const auto lam = static_cast<float>(mix.lambda);
    own[static_cast<size_t>(k)] = own[static_cast<size_t>(k + 1)] = lam;
    if (mix.cutmix) {
      if (mix.y1 > mix.y0 && mix.x1 > mix.x0) {
        boxes.push_back(mix);
        box_pairs.push_back(k);
      }
    } else {
      blend[static_cast<size_t>(k)] = blend[static_cast<size_t>(k + 1)] = lam;
    }
  }
  torch::NoGradGuard no_grad;
  torch::Tensor& images = batch->images;
  const auto device = images.device();
  auto index = torch::tensor(partner_index, torch::kLong).to(device);
  auto partners = images.index_select(0, index);
  auto weights = torch::tensor(blend, torch::kFloat).to(device).view({n, 1, 1, 1});
  images.mul_(weights).add_(partners * (1 - weights));
  for (size_t i = 0; i < boxes.size(); ++i) {
    const PairMix& mix = boxes[i];
    const int64_t k = box_pairs[i];
    auto box = [&](const torch::Tensor& t, int64_t row) {
      return t.select(0, row).slice(1, mix.y0, mix.y1).slice(2, mix.x0, mix.x1);
    };
    box(images, k).copy_(box(partners, k));
    box(images, k + 1).copy_(box(partners, k + 1));
  }
  batch->mix_partner_labels = batch->labels.index_select(
      0, torch::tensor(partner_index, torch::kLong).to(batch->labels.device()));
  batch->mix_own_weight = torch::tensor(own, torch::kFloat).to(batch->labels.device());
  return Status::Ok();
}

}  // namespace retort::trainer::data

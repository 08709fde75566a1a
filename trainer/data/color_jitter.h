// Colour jitter with torchvision's semantics (transforms.v2.ColorJitter with hue 0, as timm's
// `color_jitter` float gives): brightness, contrast and saturation factors drawn uniformly from
// [max(0, 1 - s), 1 + s] and applied in a random order, each a blend clamped to [0, 1]:
//   brightness: f * x;  contrast: f * x + (1 - f) * mean(gray(x));  saturation: f * x + (1 - f)
//   * gray(x) (a one-channel image is left as it is), gray = 0.2989 R + 0.587 G + 0.114 B.
// Batches hold normalised images, so each sample is taken back to [0, 1] with the dataset's
// normalisation, jittered and normalised again (float32 throughout: torchvision on a float
// image; on 8-bit PIL images, as timm feeds it, each op also rounds to 1/255).
//
// The order and the factors come from the sample's augmentation seed (Batch::augmentation_seeds)
// through the portable SplitMix64 stream: the same on every rank, world size, restart and
// decoder. Thread-compatible; no state.
#pragma once

#include <torch/types.h>

#include <array>
#include <cstdint>

#include "common/status.h"

namespace retort::trainer {
struct Batch;
}  // namespace retort::trainer

namespace retort::trainer::data {

struct ColorJitterOptions {
  double strength = 0;  // s of brightness, contrast and saturation; 0 = off
  // The batch's normalisation: x_normalised = (x - mean[c]) / std[c] (channels beyond the
  // first use their own entries; one-channel images use entry 0).
  std::array<float, 3> mean = {0.f, 0.f, 0.f};
  std::array<float, 3> std = {1.f, 1.f, 1.f};
};
Status ValidateColorJitterOptions(const ColorJitterOptions& options);

enum class JitterOp { kBrightness, kContrast, kSaturation };

struct ColorJitterDraw {
  std::array<JitterOp, 3> order = {JitterOp::kBrightness, JitterOp::kContrast,
                                   JitterOp::kSaturation};
  double brightness = 1, contrast = 1, saturation = 1;
};

ColorJitterDraw DrawColorJitter(const ColorJitterOptions& options, uint64_t augmentation_seed);

// Applies `draw` to one [C, H, W] float image with values in [0, 1], in place.
void ApplyColorJitter(const ColorJitterDraw& draw, torch::Tensor image);

// Jitters every augmented sample of `batch` in place (seed 0: left as it is).
Status JitterBatch(const ColorJitterOptions& options, Batch* batch);

}  // namespace retort::trainer::data

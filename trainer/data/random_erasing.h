// Random erasing (Zhong et al. 2020) with timm's semantics (timm.data.RandomErasing, DeiT's
// `reprob 0.25, remode pixel, recount 1`): with probability p, `count` boxes of each sample are
// replaced, each of area in [0.02, 1/3] of the image divided by count and log-uniform aspect
// ratio in [0.3, 1/0.3], placed uniformly, up to 10 attempts per box; filled with per-pixel
// standard normal values ("pixel"), one normal value per channel ("rand") or zeros ("const").
// Applied to normalised images, as timm does after Normalize.
//
// Every choice, the fill values included, is drawn from the sample's augmentation seed
// (Batch::augmentation_seeds: job seed, epoch, sample) through the portable SplitMix64 stream,
// so a view is the same on any rank, world size, restart and decoder (the values are made on
// the host and copied to the batch's device). Thread-compatible; no state.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace retort::trainer {
struct Batch;
}  // namespace retort::trainer

namespace retort::trainer::data {

enum class EraseFill { kPixel, kPerChannel, kZero };

struct RandomErasingOptions {
  double probability = 0;  // per sample; 0 = off
  EraseFill fill = EraseFill::kPixel;
  int count = 1;  // boxes per erased sample, >= 1
  double min_area = 0.02, max_area = 1.0 / 3.0;
  double min_aspect = 0.3;  // and 1 / min_aspect at most
};
Status ValidateRandomErasingOptions(const RandomErasingOptions& options);

struct ErasedBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
};

// The boxes erased in a sample of height x width drawn with `augmentation_seed` (none when the
// draw skips the sample, or no attempt fits).
std::vector<ErasedBox> DrawErasedBoxes(const RandomErasingOptions& options,
                                       uint64_t augmentation_seed, int64_t height, int64_t width);

// Erases the boxes of every sample of `batch` in place (its images, on any device). Samples
// with augmentation seed 0 (not augmented) are left as they are.
Status EraseBatch(const RandomErasingOptions& options, Batch* batch);

}  // namespace retort::trainer::data

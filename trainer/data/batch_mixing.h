// Batch mixing: mixup (Zhang et al. 2018) and CutMix (Yun et al. 2019) with timm's semantics
// (timm.data.Mixup: Beta(alpha, alpha) draws, a mixing probability, a switch probability between
// the two when both are on, CutMix's lambda corrected to the box actually pasted), made
// independent of the world size.
//
// Partners are fixed pairs of the global batch: positions 2j and 2j+1 of a step (the sampler's
// split unit is 2, so a pair is never cut between ranks). A pair's draw is a pure function of
// (seed, epoch, step, j) in "pair" mode, of (seed, epoch, step) in "batch" mode: any rank, any
// world size and any restart mixes the same images the same way. Both samples of a pair get the
// same lambda, each keeping its own image as the larger part for lambda > 0.5 (as timm's pair
// mode does with the flipped batch): mixup blends x_a' = lam x_a + (1 - lam) x_b (and the mirror
// for b); CutMix pastes b's box into a and a's same box into b. A lone last sample (odd batch)
// is left as it is. The targets carry own weight lam and the partner's label (batch.h).
//
// Applied after the loader, before the step, on the batch's device (torch ops): the teacher sees
// the mixed images. Thread-compatible; no state.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace retort::trainer {
struct Batch;
}  // namespace retort::trainer

namespace retort::trainer::data {

struct MixingOptions {
  double mixup_alpha = 0;    // Beta(alpha, alpha) for mixup; 0 = mixup off
  double cutmix_alpha = 0;   // Beta(alpha, alpha) for CutMix; 0 = CutMix off
  double prob = 1.0;         // probability that a pair (or the step, in batch mode) is mixed
  double switch_prob = 0.5;  // with both on: probability of CutMix
  bool per_batch = false;    // one draw per step instead of one per pair
  uint64_t seed = 0;         // the job's seed
};
Status ValidateMixingOptions(const MixingOptions& options);
inline bool MixingEnabled(const MixingOptions& o) {
  return o.mixup_alpha > 0 || o.cutmix_alpha > 0;
}

// One pair's draw. `lambda` is the weight of each sample's own label (after CutMix's box
// correction); the box [y0, y1) x [x0, x1) is what CutMix swaps (empty for mixup).
struct PairMix {
  bool mixed = false;
  bool cutmix = false;
  double lambda = 1.0;
  int64_t y0 = 0, y1 = 0, x0 = 0, x1 = 0;
};
PairMix DrawPairMix(const MixingOptions& options, int64_t epoch, int64_t step, int64_t pair,
                    int64_t height, int64_t width);

// Mixes the pairs of `batch` in place (its images) and sets its mix_partner_labels and
// mix_own_weight. InvalidArgument when the slice starts inside a pair (position_in_step odd)
// or ends inside one that is not the step's last sample (`step_batch_size` is the step's
// global batch size). Options must be valid and MixingEnabled.
Status MixBatch(const MixingOptions& options, int64_t step_batch_size, Batch* batch);

// Beta(a, a) from a portable stream (Marsaglia-Tsang gamma draws): exposed for tests.
double DrawSymmetricBeta(double alpha, uint64_t seed);

}  // namespace retort::trainer::data

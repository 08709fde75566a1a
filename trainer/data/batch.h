// The contract between the data pipeline (trainer/data) and the training step.
// A Batch is this rank's slice of one global batch: produced by a loader thread, handed over
// by value (tensors are reference counted), consumed by exactly one step.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace retort::trainer {

struct Batch {
  // float32 [n, C, H, W], already augmented and normalised.
  torch::Tensor images;
  // int64 [n] class labels.
  torch::Tensor labels;
  // Position of each sample in the dataset (for the teacher-logit cache and for tests that
  // check no sample is skipped or repeated).
  std::vector<int64_t> sample_indices;
  // Seed of the augmentation applied to each sample (0 when not augmented), so a cached
  // teacher target stays exact for (sample, seed).
  std::vector<uint64_t> augmentation_seeds;
  // Epoch and step of the global batch this slice belongs to, and the position of the slice's
  // first sample within that global batch (0 on rank 0).
  int64_t epoch = 0;
  int64_t step = 0;
  int64_t position_in_step = 0;
  // Batch mixing (trainer/data/batch_mixing.h), defined only when the images were mixed:
  // sample k's image is a blend of its own and its partner's, and its target is
  // mix_own_weight[k] x its label + (1 - mix_own_weight[k]) x mix_partner_labels[k]
  // (int64 [n] and float32 [n]).
  torch::Tensor mix_partner_labels;
  torch::Tensor mix_own_weight;
  // This slice's share of the global batch: n / global_batch. The loss of the slice is scaled
  // by this weight so that summing over ranks gives the global-batch mean exactly, whatever
  // the split.
  double weight = 1.0;
};

}  // namespace retort::trainer

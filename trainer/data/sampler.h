// World-size-invariant, resumable sampler (DESIGN.md "World-size invariance").
//
// Epoch e is a permutation P_e of [0, dataset_size) that depends only on (seed, e): Fisher-Yates
// driven by SplitMix64 (trainer/data/random.h), identical on every platform. The global batch B
// is fixed by the job. Step s of epoch e consumes positions [s*B, (s+1)*B) of P_e. That global
// batch is split among the R ranks of the current generation as contiguous slices whose sizes
// differ by at most one (the first `n % R` ranks get one extra sample; with a split unit u > 1
// the slices are whole runs of u consecutive positions, e.g. the pairs of batch mixing: no unit
// is cut, and the ranks' numbers of units differ by at most one); rank r's loss is scaled
// by weight = slice size / global batch size, so the sum over ranks of the weighted per-rank
// mean losses is exactly the mean over the global batch, whatever R is.
//
// Uneven splits (straggler rebalancing): a full batch may instead be split by given shares
// (samples per rank, in rank order: ValidateBatchShares). The slices are still contiguous, in
// rank order, made of whole units, and weighted by their size, so the math is the even split's
// but for float reassociation; a kept last partial batch is always split evenly.
//
// Last partial batch: with drop_last (the default) the trailing dataset_size % B positions of
// each epoch's permutation are not used in that epoch (every step has exactly B samples; since
// the permutation changes per epoch, a different tail is dropped each time). Without drop_last
// the last step has the remaining samples and its weights are relative to that smaller size.
//
// The resumable state is (epoch, step) only: anything else (R, r) may change at any step
// boundary and no sample of the epoch is skipped or repeated.
//
// Thread-safety: all methods are const and thread-safe (the permutation cache is locked).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"

namespace retort::trainer::data {

struct SamplerConfig {
  int64_t dataset_size = 0;
  int64_t global_batch = 0;
  uint64_t seed = 0;
  bool drop_last = true;
  // Slices are made of whole units of this many consecutive positions of a step (the last unit
  // of a step may be shorter); >= 1.
  int64_t split_unit = 1;
};

// Position in the training schedule: the next step to run.
struct SamplerState {
  int64_t epoch = 0;
  int64_t step = 0;
  friend bool operator==(const SamplerState& a, const SamplerState& b) {
    return a.epoch == b.epoch && a.step == b.step;
  }
};

// One rank's share of one global batch.
struct RankSlice {
  int64_t epoch = 0;
  int64_t step = 0;
  int rank = 0;
  int world_size = 1;
  // Number of samples in the whole global batch of this step (B, or less for a kept last
  // partial batch).
  int64_t batch_size = 0;
  // Positions [begin, end) of the epoch permutation that this rank takes.
  int64_t begin = 0;
  int64_t end = 0;
  // (end - begin) / batch_size.
  double weight = 0.0;
  // Dataset indices: permutation[begin..end).
  std::vector<int64_t> indices;

  int64_t size() const { return end - begin; }
};

// Deterministic permutation of [0, n) for (seed, epoch). Portable (same on every platform).
std::vector<int64_t> EpochPermutation(uint64_t seed, int64_t epoch, int64_t n);

// Splits `n` items among `world_size` ranks as contiguous ranges of whole units of `unit`
// items (the last unit may be shorter), differing by at most one unit; returns [begin, end) of
// `rank`'s range.
std::pair<int64_t, int64_t> ContiguousSplit(int64_t n, int rank, int world_size, int64_t unit = 1);

// Checks `shares` as a split of a full batch of `global_batch` among `world_size` ranks: one
// share per rank, each >= 0, summing to global_batch, every share but the last a whole number of
// `unit` positions (the last rank's ends the batch, whose last unit may be shorter).
Status ValidateBatchShares(const std::vector<int64_t>& shares, int64_t global_batch, int64_t unit,
                           int world_size);

class Sampler {
 public:
  // InvalidArgument when dataset_size <= 0, global_batch <= 0, or global_batch > dataset_size
  // with drop_last (an epoch would have no step).
  static StatusOr<Sampler> Create(const SamplerConfig& config);

  const SamplerConfig& config() const { return config_; }
  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  // Global batch size of `step` (B, or the remainder for a kept last partial batch).
  int64_t BatchSize(int64_t step) const;

  // The state after `state` (next step, rolling over to the next epoch).
  SamplerState Advance(SamplerState state) const;

  // Rank `rank` of `world_size`'s share of step `step` of `epoch`. InvalidArgument when the
  // step is outside the epoch, epoch < 0, or rank/world_size are out of range.
  StatusOr<RankSlice> Slice(int64_t epoch, int64_t step, int rank, int world_size) const;
  // The same with a full batch split by `shares` (ValidateBatchShares against this sampler's
  // global batch and split unit; empty: the even split). InvalidArgument for bad shares.
  StatusOr<RankSlice> Slice(int64_t epoch, int64_t step, int rank, int world_size,
                            const std::vector<int64_t>& shares) const;
  // The global index of (epoch, step): epoch * steps_per_epoch() + step.
  int64_t GlobalStep(SamplerState state) const {
    return state.epoch * steps_per_epoch_ + state.step;
  }

  // The (cached) permutation of `epoch`.
  std::shared_ptr<const std::vector<int64_t>> Permutation(int64_t epoch) const;

 private:
  explicit Sampler(const SamplerConfig& config);

  SamplerConfig config_;
  int64_t steps_per_epoch_ = 0;
  // Cache of the most recently used epoch's permutation (shared so Sampler stays copyable).
  struct Cache {
    Mutex mu;
    int64_t epoch RETORT_GUARDED_BY(mu) = -1;
    std::shared_ptr<const std::vector<int64_t>> permutation RETORT_GUARDED_BY(mu);
  };
  std::shared_ptr<Cache> cache_;
};

}  // namespace retort::trainer::data

#include "trainer/data/sampler.h"

#include <algorithm>
#include <numeric>
#include <tuple>
#include <utility>

#include "trainer/data/random.h"

namespace retort::trainer::data {

std::vector<int64_t> EpochPermutation(uint64_t seed, int64_t epoch, int64_t n) {
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  SplitMix64 rng(EpochSeed(seed, epoch));
  // Fisher-Yates: for i from n-1 down to 1, swap perm[i] with perm[j], j uniform in [0, i].
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(i) + 1));
    std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
  }
  return perm;
}

std::pair<int64_t, int64_t> ContiguousSplit(int64_t n, int rank, int world_size, int64_t unit) {
  const int64_t units = (n + unit - 1) / unit;
  const int64_t base = units / world_size;
  const int64_t extra = units % world_size;
  const int64_t begin = rank * base + std::min<int64_t>(rank, extra);
  const int64_t size = base + (rank < extra ? 1 : 0);
  return {std::min(begin * unit, n), std::min((begin + size) * unit, n)};
}

StatusOr<Sampler> Sampler::Create(const SamplerConfig& config) {
  if (config.dataset_size <= 0) {
    return InvalidArgumentError("sampler: dataset_size must be > 0, got " +
                                std::to_string(config.dataset_size));
  }
  if (config.global_batch <= 0) {
    return InvalidArgumentError("sampler: global_batch must be > 0, got " +
                                std::to_string(config.global_batch));
  }
  if (config.split_unit < 1) {
    return InvalidArgumentError("sampler: split_unit must be >= 1, got " +
                                std::to_string(config.split_unit));
  }
  if (config.drop_last && config.global_batch > config.dataset_size) {
    return InvalidArgumentError("sampler: global_batch " + std::to_string(config.global_batch) +
                                " exceeds dataset_size " + std::to_string(config.dataset_size) +
                                " with drop_last: an epoch would have no step");
  }
  return Sampler(config);
}

Sampler::Sampler(const SamplerConfig& config) : config_(config), cache_(std::make_shared<Cache>()) {
  const int64_t n = config.dataset_size;
  const int64_t b = config.global_batch;
  steps_per_epoch_ = config.drop_last ? n / b : (n + b - 1) / b;
}

int64_t Sampler::BatchSize(int64_t step) const {
  const int64_t begin = step * config_.global_batch;
  return std::min(config_.global_batch, config_.dataset_size - begin);
}

SamplerState Sampler::Advance(SamplerState state) const {
  if (++state.step >= steps_per_epoch_) {
    state.step = 0;
    ++state.epoch;
  }
  return state;
}

std::shared_ptr<const std::vector<int64_t>> Sampler::Permutation(int64_t epoch) const {
  {
    MutexLock lock(cache_->mu);
    if (cache_->epoch == epoch) return cache_->permutation;
  }
  // Computed outside the lock: concurrent callers for a new epoch may both compute it (same
  // result), which is cheaper than serialising every other epoch's readers behind it.
  auto perm = std::make_shared<const std::vector<int64_t>>(
      EpochPermutation(config_.seed, epoch, config_.dataset_size));
  MutexLock lock(cache_->mu);
  cache_->epoch = epoch;
  cache_->permutation = perm;
  return perm;
}

Status ValidateBatchShares(const std::vector<int64_t>& shares, int64_t global_batch, int64_t unit,
                           int world_size) {
  if (static_cast<int64_t>(shares.size()) != world_size)
    return InvalidArgumentError("batch shares: " + std::to_string(shares.size()) +
                                " shares for a world of " + std::to_string(world_size));
  int64_t sum = 0;
  for (size_t r = 0; r < shares.size(); ++r) {
    if (shares[r] < 0)
      return InvalidArgumentError("batch shares: rank " + std::to_string(r) + "'s share " +
                                  std::to_string(shares[r]) + " is negative");
    if (r + 1 < shares.size() && unit > 1 && shares[r] % unit != 0)
      return InvalidArgumentError("batch shares: rank " + std::to_string(r) + "'s share " +
                                  std::to_string(shares[r]) +
                                  " is not a whole number of units of " + std::to_string(unit));
    sum += shares[r];
  }
  if (sum != global_batch)
    return InvalidArgumentError("batch shares sum to " + std::to_string(sum) +
                                ", not the global batch " + std::to_string(global_batch));
  return Status::Ok();
}

StatusOr<RankSlice> Sampler::Slice(int64_t epoch, int64_t step, int rank, int world_size) const {
  return Slice(epoch, step, rank, world_size, {});
}

StatusOr<RankSlice> Sampler::Slice(int64_t epoch, int64_t step, int rank, int world_size,
                                   const std::vector<int64_t>& shares) const {
  if (epoch < 0)
    return InvalidArgumentError("sampler: epoch must be >= 0, got " + std::to_string(epoch));
  if (step < 0 || step >= steps_per_epoch_) {
    return InvalidArgumentError("sampler: step " + std::to_string(step) + " outside epoch of " +
                                std::to_string(steps_per_epoch_) + " steps");
  }
  if (world_size <= 0 || rank < 0 || rank >= world_size) {
    return InvalidArgumentError("sampler: rank " + std::to_string(rank) + " of world_size " +
                                std::to_string(world_size) + " is out of range");
  }
  RankSlice slice;
  slice.epoch = epoch;
  slice.step = step;
  slice.rank = rank;
  slice.world_size = world_size;
  slice.batch_size = BatchSize(step);
  int64_t lo = 0, hi = 0;
  if (!shares.empty() && slice.batch_size == config_.global_batch) {
    RETORT_RETURN_IF_ERROR(
        ValidateBatchShares(shares, config_.global_batch, config_.split_unit, world_size));
    for (int r = 0; r < rank; ++r) lo += shares[static_cast<size_t>(r)];
    hi = lo + shares[static_cast<size_t>(rank)];
  } else {
    std::tie(lo, hi) = ContiguousSplit(slice.batch_size, rank, world_size, config_.split_unit);
  }
  slice.begin = step * config_.global_batch + lo;
  slice.end = step * config_.global_batch + hi;
  slice.weight = static_cast<double>(hi - lo) / static_cast<double>(slice.batch_size);
  auto perm = Permutation(epoch);
  slice.indices.assign(perm->begin() + slice.begin, perm->begin() + slice.end);
  return slice;
}

}  // namespace retort::trainer::data

#include "worker/batch_rebalancer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace retort::worker {
namespace {

// Shares in samples from shares in units, in rank order: whole units until the batch ends (its
// last unit may be shorter than `unit`), the last rank taking what is left, as the sampler's
// ContiguousSplit cuts them.
std::vector<int64_t> UnitsToSamples(const std::vector<int64_t>& units, int64_t global_batch,
                                    int64_t unit) {
  std::vector<int64_t> shares(units.size());
  int64_t left = global_batch;
  for (size_t r = 0; r + 1 < units.size(); ++r) {
    shares[r] = std::min(units[r] * unit, left);
    left -= shares[r];
  }
  if (!shares.empty()) shares.back() = left;
  return shares;
}

// Seconds a step takes under `shares` at `throughputs`: its slowest rank's.
double PredictedStepSeconds(const std::vector<int64_t>& shares,
                            const std::vector<double>& throughputs) {
  double slowest = 0;
  for (size_t r = 0; r < shares.size(); ++r)
    slowest = std::max(slowest, static_cast<double>(shares[r]) / throughputs[r]);
  return slowest;
}

}  // namespace

BatchRebalancer::BatchRebalancer(const RebalanceOptions& options, int world_size)
    : options_(options),
      world_size_(world_size),
      shares_(EvenShares(options.global_batch, world_size, options.unit)),
      samples_(static_cast<size_t>(world_size), 0.0),
      seconds_(static_cast<size_t>(world_size), 0.0) {}

std::vector<int64_t> BatchRebalancer::EvenShares(int64_t global_batch, int world_size,
                                                 int64_t unit) {
  const int64_t units = (global_batch + unit - 1) / unit;
  std::vector<int64_t> in_units(static_cast<size_t>(world_size));
  for (int r = 0; r < world_size; ++r)
    in_units[static_cast<size_t>(r)] = units / world_size + (r < units % world_size ? 1 : 0);
  return UnitsToSamples(in_units, global_batch, unit);
}

std::vector<int64_t> BatchRebalancer::ProportionalShares(const std::vector<double>& throughputs,
                                                         int64_t global_batch, int64_t unit,
                                                         double min_share) {
  const int world = static_cast<int>(throughputs.size());
  const int64_t units = (global_batch + unit - 1) / unit;
  if (world == 0 || units < world) return EvenShares(global_batch, world, unit);
  // The floor, in units: min_share of an even share, at least one unit (an empty slice would
  // leave a rank idle and unmeasured), at most an even share.
  int64_t floor_units = static_cast<int64_t>(
      std::floor(min_share * static_cast<double>(units) / static_cast<double>(world)));
  floor_units = std::clamp<int64_t>(floor_units, 1, units / world);
  // Water-filling: ranks whose proportional share falls below the floor get the floor; the
  // rest share what is left in proportion to their throughputs.
  std::vector<bool> floored(static_cast<size_t>(world), false);
  std::vector<double> ideal(static_cast<size_t>(world), 0.0);
  for (bool changed = true; changed;) {
    changed = false;
    double free_throughput = 0;
    int64_t floored_count = 0;
    for (int r = 0; r < world; ++r) {
      if (floored[static_cast<size_t>(r)])
        ++floored_count;
      else
        free_throughput += throughputs[static_cast<size_t>(r)];
    }
    const double available = static_cast<double>(units - floor_units * floored_count);
    for (int r = 0; r < world; ++r) {
      const size_t i = static_cast<size_t>(r);
      if (floored[i]) {
        ideal[i] = static_cast<double>(floor_units);
        continue;
      }
      ideal[i] = available * throughputs[i] / free_throughput;
      if (ideal[i] < static_cast<double>(floor_units)) {
        floored[i] = true;
        changed = true;
      }
    }
  }
  // Whole units by largest remainders (ties to the lower rank), summing to `units`.
  std::vector<int64_t> in_units(static_cast<size_t>(world));
  int64_t given = 0;
  for (int r = 0; r < world; ++r) {
    const size_t i = static_cast<size_t>(r);
    in_units[i] = std::max<int64_t>(floor_units, static_cast<int64_t>(std::floor(ideal[i])));
    given += in_units[i];
  }
  std::vector<int> order(static_cast<size_t>(world));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return ideal[static_cast<size_t>(a)] - std::floor(ideal[static_cast<size_t>(a)]) >
           ideal[static_cast<size_t>(b)] - std::floor(ideal[static_cast<size_t>(b)]);
  });
  for (size_t k = 0; given < units; k = (k + 1) % order.size(), ++given)
    ++in_units[static_cast<size_t>(order[k])];
  // Rounding up to the floor can overshoot: take the excess from the largest shares.
  while (given > units) {
    const auto largest = std::max_element(in_units.begin(), in_units.end());
    --*largest;
    --given;
  }
  return UnitsToSamples(in_units, global_batch, unit);
}

void BatchRebalancer::Observe(int64_t step, const std::vector<double>& samples,
                              const std::vector<double>& seconds) {
  if (step < window_from_ || static_cast<int>(samples.size()) != world_size_ ||
      static_cast<int>(seconds.size()) != world_size_)
    return;
  for (int r = 0; r < world_size_; ++r)
    if (!(samples[static_cast<size_t>(r)] > 0) || !(seconds[static_cast<size_t>(r)] > 0)) return;
  for (int r = 0; r < world_size_; ++r) {
    samples_[static_cast<size_t>(r)] += samples[static_cast<size_t>(r)];
    seconds_[static_cast<size_t>(r)] += seconds[static_cast<size_t>(r)];
  }
  ++steps_;
}

std::vector<double> BatchRebalancer::Throughputs() const {
  std::vector<double> t(static_cast<size_t>(world_size_), 0.0);
  for (size_t r = 0; r < t.size(); ++r)
    if (seconds_[r] > 0) t[r] = samples_[r] / seconds_[r];
  return t;
}

std::optional<RebalanceProposal> BatchRebalancer::Propose() const {
  if (world_size_ < 2 || steps_ < options_.window_steps) return std::nullopt;
  const std::vector<double> t = Throughputs();
  double total = 0;
  for (double v : t) {
    if (!(v > 0)) return std::nullopt;
    total += v;
  }
  const double ideal = static_cast<double>(options_.global_batch) / total;
  const double now = PredictedStepSeconds(shares_, t);
  if (!(now > (1.0 + options_.threshold) * ideal)) return std::nullopt;
  RebalanceProposal p;
  p.shares = ProportionalShares(t, options_.global_batch, options_.unit, options_.min_share);
  const double after = PredictedStepSeconds(p.shares, t);
  if (p.shares == shares_ || !(after < now)) return std::nullopt;
  const auto [slowest, fastest] = std::minmax_element(t.begin(), t.end());
  char reason[200];
  std::snprintf(reason, sizeof(reason),
                "rank %d at %.0f%% of the fastest rank's throughput: predicted step %.2fx the "
                "ideal, %.2fx with the new shares",
                static_cast<int>(slowest - t.begin()), 100.0 * *slowest / *fastest, now / ideal,
                after / ideal);
  p.reason = reason;
  return p;
}

void BatchRebalancer::Adopt(const std::vector<int64_t>& shares, int64_t from_step) {
  shares_ = shares;
  window_from_ = from_step;
  std::fill(samples_.begin(), samples_.end(), 0.0);
  std::fill(seconds_.begin(), seconds_.end(), 0.0);
  steps_ = 0;
}

}  // namespace retort::worker

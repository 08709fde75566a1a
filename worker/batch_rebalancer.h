// BatchRebalancer: straggler rebalancing's decisions, a pure function of what it is shown.
//
// Every rank of a generation feeds it the same measurements (each step, every rank's samples
// and compute seconds: its own teacher forward, student forward and backward, its waits for
// data and for the others excluded; exchanged in the step-boundary all-reduce of the training
// session), so every rank could decide alike; the session lets rank 0 propose and sends the
// proposal to all in that all-reduce, so that the ranks adopt bit-identical shares from one
// step on (an uneven split changes only float reassociation: slices are weighted by size).
//
// Rule: over the last `window_steps` steps measured under the current shares, rank r's
// throughput is t_r = its samples / its compute seconds. A step under shares n takes about
// max_r n_r / t_r; shares proportional to t take B / sum_r t_r. When the first exceeds the
// second by more than `threshold` (a fraction), the proposal is shares proportional to t, each
// at least min_share of an even share (B / W), in whole units of `unit` positions (the last
// rank takes the remainder of the batch), summing to B. The window starts over when shares are
// adopted, so a proposal is measured before the next one (no oscillation on noise below the
// threshold). Not thread-safe: the training thread owns it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace retort::worker {

struct RebalanceOptions {
  int64_t global_batch = 0;
  int64_t unit = 1;  // the sampler's split unit (2 with batch mixing: pairs are never cut)
  double threshold = 0.1;
  int window_steps = 20;
  double min_share = 0.25;
};

struct RebalanceProposal {
  std::vector<int64_t> shares;  // samples per rank, rank order
  std::string reason;           // "rank 2 at 48% of the fastest: step 1.52x the ideal" ...
};

class BatchRebalancer {
 public:
  BatchRebalancer(const RebalanceOptions& options, int world_size);

  // Global step `step`'s measurements, in rank order. A step before the current shares took
  // effect, or where some rank reports no samples or no time (the first boundary of a
  // generation, a paused boundary), is ignored.
  void Observe(int64_t step, const std::vector<double>& samples,
               const std::vector<double>& seconds);
  // New shares when a full window calls for them (see the rule), else nullopt.
  std::optional<RebalanceProposal> Propose() const;
  // Makes `shares` current from global step `from_step` on (every rank, the same) and starts a
  // new window there.
  void Adopt(const std::vector<int64_t>& shares, int64_t from_step = 0);

  const std::vector<int64_t>& shares() const { return shares_; }
  // Throughputs of the window so far (samples/s per rank; 0 where nothing was measured).
  std::vector<double> Throughputs() const;
  int steps_in_window() const { return steps_; }

  // The sampler's even split in whole units (trainer/data/sampler.h ContiguousSplit's sizes).
  static std::vector<int64_t> EvenShares(int64_t global_batch, int world_size, int64_t unit);
  // Shares proportional to `throughputs`, each >= min_share x an even share, whole units (the
  // last rank's ends the batch), summing to global_batch: largest remainders, ties to the lower
  // rank. Needs every throughput > 0.
  static std::vector<int64_t> ProportionalShares(const std::vector<double>& throughputs,
                                                 int64_t global_batch, int64_t unit,
                                                 double min_share);

 private:
  RebalanceOptions options_;
  int world_size_;
  std::vector<int64_t> shares_;
  std::vector<double> samples_, seconds_;  // sums over the window, per rank
  int steps_ = 0;
  int64_t window_from_ = 0;  // the first step the window measures
};

}  // namespace retort::worker

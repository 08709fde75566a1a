// StepBoundaryExchange: the payload of the tiny all-reduce every step of a generation starts
// with (training_session.cc), laid out so that a sum over the ranks delivers to every rank:
//   [0, 3)            flags: a newer generation seen, this member leaving, the job paused
//                     (each rank 0 or 1: the sum is how many ranks saw it);
// and with straggler rebalancing on (BatchRebalancer), also
//   [3, 3 + W)        rank r's samples of its last step, in slot r (the others write 0);
//   [3 + W, 3 + 2W)   rank r's compute seconds of its last step, in slot r;
//   [3 + 2W, 5 + 2W)  rank 0's proposal's first step, as two 16-bit halves (exact in float),
//                     0 and 0 for none (only rank 0 writes it);
//   [5 + 2W, 5 + 3W)  rank 0's proposal: samples per rank.
// Every value is an integer below 2^24 or a time (seconds) and every slot has one writer, so
// the sum is exact and the same on every rank: the ranks adopt a proposal bit for bit alike.
// Std-only. Not thread-safe: the training thread owns it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace retort::worker {

class StepBoundaryExchange {
 public:
  StepBoundaryExchange(int rank, int world_size, bool rebalancing)
      : rank_(rank), world_(world_size), rebalancing_(rebalancing) {
    values_.assign(rebalancing ? 5 + 3 * static_cast<size_t>(world_size) : 3, 0.f);
  }

  // Zeroes the payload (before this rank writes its part of the next boundary).
  void Clear() { std::fill(values_.begin(), values_.end(), 0.f); }
  void SetFlags(bool newer_generation, bool leaving, bool paused) {
    values_[0] = newer_generation ? 1.f : 0.f;
    values_[1] = leaving ? 1.f : 0.f;
    values_[2] = paused ? 1.f : 0.f;
  }
  // This rank's last step (ignored without rebalancing).
  void SetMeasurement(double samples, double compute_seconds) {
    if (!rebalancing_) return;
    values_[3 + Slot(rank_)] = static_cast<float>(samples);
    values_[3 + Slot(world_) + Slot(rank_)] = static_cast<float>(compute_seconds);
  }
  // Rank 0's proposal: `shares` (world_size values) from global step `from_step` (>= 1).
  void SetProposal(int64_t from_step, const std::vector<int64_t>& shares) {
    if (!rebalancing_ || shares.size() != Slot(world_)) return;
    const size_t at = 3 + 2 * Slot(world_);
    values_[at] = static_cast<float>(from_step >> 16);
    values_[at + 1] = static_cast<float>(from_step & 0xffff);
    for (size_t r = 0; r < shares.size(); ++r) values_[at + 2 + r] = static_cast<float>(shares[r]);
  }

  float* data() { return values_.data(); }
  size_t size() const { return values_.size(); }

  // After the sum:
  bool newer_generation() const { return values_[0] > 0; }
  bool leaving() const { return values_[1] > 0; }
  bool paused() const { return values_[2] > 0; }
  std::vector<double> samples() const { return Range(3); }
  std::vector<double> seconds() const { return Range(3 + Slot(world_)); }
  struct Proposal {
    int64_t from_step = 0;
    std::vector<int64_t> shares;
  };
  std::optional<Proposal> proposal() const {
    if (!rebalancing_) return std::nullopt;
    const size_t at = 3 + 2 * Slot(world_);
    Proposal p;
    p.from_step = (static_cast<int64_t>(values_[at]) << 16) + static_cast<int64_t>(values_[at + 1]);
    if (p.from_step <= 0) return std::nullopt;
    for (size_t r = 0; r < Slot(world_); ++r)
      p.shares.push_back(static_cast<int64_t>(values_[at + 2 + r]));
    return p;
  }

 private:
  static size_t Slot(int i) { return static_cast<size_t>(i); }
  std::vector<double> Range(size_t at) const {
    if (!rebalancing_) return {};
    return std::vector<double>(values_.begin() + static_cast<std::ptrdiff_t>(at),
                               values_.begin() + static_cast<std::ptrdiff_t>(at + Slot(world_)));
  }

  int rank_, world_;
  bool rebalancing_;
  std::vector<float> values_;
};

}  // namespace retort::worker

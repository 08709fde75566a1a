// The split of the global batch among a generation's ranks as its members last reported it
// (StepMetrics.local_batch in their heartbeats): what status, `retortctl status` and the
// "batch_split" event show of straggler rebalancing. Pure and std-only.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace retort::coordinator {

// Samples per rank, rank order, from (rank, local batch) pairs; empty unless every rank of
// [0, world) reported a share and the shares sum to `global_batch` (members reporting from
// different steps while shares change do not, and are not shown half changed).
inline std::vector<int64_t> ReportedBatchSplit(
    const std::vector<std::pair<int, int64_t>>& rank_and_local_batch, int world,
    int64_t global_batch) {
  if (world <= 0) return {};
  std::vector<int64_t> shares(static_cast<size_t>(world), -1);
  for (const auto& [rank, local] : rank_and_local_batch)
    if (rank >= 0 && rank < world && local > 0) shares[static_cast<size_t>(rank)] = local;
  int64_t sum = 0;
  for (int64_t n : shares) {
    if (n < 0) return {};
    sum += n;
  }
  return sum == global_batch ? shares : std::vector<int64_t>{};
}

}  // namespace retort::coordinator

#include "trainer/shard_plan.h"

#include <algorithm>
#include <string>

namespace retort::trainer {

Status ValidateShardPlan(const ShardPlan& plan, int64_t numel, int world_size) {
  if (static_cast<int>(plan.ranges.size()) != world_size)
    return InvalidArgumentError("shard plan has " + std::to_string(plan.ranges.size()) +
                                " ranges for world size " + std::to_string(world_size));
  int64_t expected = 0;
  for (size_t r = 0; r < plan.ranges.size(); ++r) {
    const ShardRange& range = plan.ranges[r];
    if (range.count < 0)
      return InvalidArgumentError("shard plan: rank " + std::to_string(r) + " has negative count " +
                                  std::to_string(range.count));
    if (range.offset != expected)
      return InvalidArgumentError("shard plan: rank " + std::to_string(r) + " starts at " +
                                  std::to_string(range.offset) + ", expected " +
                                  std::to_string(expected) +
                                  " (ranges must tile the buffer in rank order)");
    expected = range.end();
  }
  if (expected != numel)
    return InvalidArgumentError("shard plan covers " + std::to_string(expected) +
                                " elements but the flat buffer has " + std::to_string(numel));
  return Status::Ok();
}

ShardPlan MakeEvenShardPlan(int64_t numel, int world_size, int64_t alignment) {
  ShardPlan plan;
  const int64_t per_rank = (numel + world_size - 1) / world_size;
  const int64_t chunk = (per_rank + alignment - 1) / alignment * alignment;
  int64_t offset = 0;
  for (int r = 0; r < world_size; ++r) {
    const int64_t count = std::max<int64_t>(0, std::min(chunk, numel - offset));
    plan.ranges.push_back({offset, count});
    offset += count;
  }
  return plan;
}

std::vector<int64_t> SplitSpanByPlan(const ShardPlan& plan, int64_t begin, int64_t end) {
  std::vector<int64_t> counts;
  counts.reserve(plan.ranges.size());
  for (const ShardRange& r : plan.ranges)
    counts.push_back(std::max<int64_t>(0, std::min(end, r.end()) - std::max(begin, r.offset)));
  return counts;
}

}  // namespace retort::trainer

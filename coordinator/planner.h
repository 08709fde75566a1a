// Pure functions that turn a member set into a generation: node-major ranks and the ZeRO-1
// sharding plan. No state, no locking; safe from any thread.
#pragma once

#include <cstdint>
#include <vector>

#include "retort/v1/retort.pb.h"

namespace retort::coordinator {

// Elements per alignment unit of a shard range start (64 fp32 = 256 bytes).
constexpr int64_t kDefaultShardAlignment = 64;

// Splits [0, total) into `world` contiguous ranges whose starts are multiples of `alignment`;
// sizes differ by at most one alignment unit (the last range may be shorter, and trailing ranges
// may be empty when total is small). Precondition: world >= 1, alignment >= 1, total >= 0.
v1::ShardingPlan ComputeShardingPlan(int64_t total, int world,
                                     int64_t alignment = kDefaultShardAlignment);

// Orders members node-major (nodes by name, then local rank, then member id) and assigns global
// ranks 0..n-1 and node groups. `members` carry identity and member_id; rank/node_index are set.
void AssignRanks(std::vector<v1::Member>* members, std::vector<v1::NodeGroup>* nodes);

}  // namespace retort::coordinator

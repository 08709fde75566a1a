// ShardPlan: which contiguous range [offset, offset + count) of the flat parameter buffer each
// rank owns for ZeRO-1. Ranges are listed per rank, in rank order, and must tile the buffer
// (range r starts where range r-1 ends; counts may be 0), which is what the coordinator's
// aligned plan produces. Std-only header.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace retort::trainer {

struct ShardRange {
  int64_t offset = 0;
  int64_t count = 0;
  int64_t end() const { return offset + count; }
};

struct ShardPlan {
  std::vector<ShardRange> ranges;  // one per rank
};

// Checks that `plan` has `world_size` ranges tiling [0, numel) in rank order.
Status ValidateShardPlan(const ShardPlan& plan, int64_t numel, int world_size);

// An even plan with every boundary a multiple of `alignment` elements (the last range takes
// the remainder). Used by tests and single-process runs.
ShardPlan MakeEvenShardPlan(int64_t numel, int world_size, int64_t alignment = 64);

// Elements of [begin, end) that fall into each rank's range (the ReduceScatterV/AllGatherV
// counts for that span of the buffer).
std::vector<int64_t> SplitSpanByPlan(const ShardPlan& plan, int64_t begin, int64_t end);

}  // namespace retort::trainer

#include "coordinator/planner.h"

#include <algorithm>
#include <tuple>

namespace retort::coordinator {

v1::ShardingPlan ComputeShardingPlan(int64_t total, int world, int64_t alignment) {
  v1::ShardingPlan plan;
  plan.set_total_elements(total);
  plan.set_alignment(alignment);
  // 128-bit intermediates: the count comes from the first worker's report or from state.json and
  // may be anything up to 2^63 - 1 (total + alignment - 1 and units * world overflowed int64).
  using Wide = __int128;
  const int64_t units = total / alignment + (total % alignment != 0 ? 1 : 0);
  auto unit_start = [&](int r) {
    const Wide unit = static_cast<Wide>(units) * r / world;
    return static_cast<int64_t>(std::min<Wide>(total, unit * alignment));
  };
  for (int r = 0; r < world; ++r) {
    const int64_t begin = unit_start(r);
    const int64_t end = unit_start(r + 1);
    auto* range = plan.add_ranges();
    range->set_rank(r);
    range->set_offset(begin);
    range->set_count(end - begin);
  }
  return plan;
}

void AssignRanks(std::vector<v1::Member>* members, std::vector<v1::NodeGroup>* nodes) {
  std::sort(members->begin(), members->end(), [](const v1::Member& a, const v1::Member& b) {
    return std::forward_as_tuple(a.identity().node(), a.identity().local_rank(), a.member_id()) <
           std::forward_as_tuple(b.identity().node(), b.identity().local_rank(), b.member_id());
  });
  nodes->clear();
  for (size_t i = 0; i < members->size(); ++i) {
    auto& m = (*members)[i];
    if (nodes->empty() || nodes->back().node() != m.identity().node()) {
      nodes->emplace_back();
      nodes->back().set_node(m.identity().node());
    }
    m.set_rank(static_cast<int32_t>(i));
    m.set_node_index(static_cast<int32_t>(nodes->size() - 1));
    nodes->back().add_ranks(static_cast<int32_t>(i));
  }
}

}  // namespace retort::coordinator

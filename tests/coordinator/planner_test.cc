#include "coordinator/planner.h"

#include <gtest/gtest.h>

namespace retort::coordinator {
namespace {

void ExpectValidPlan(const v1::ShardingPlan& plan, int64_t total, int world, int64_t align) {
  ASSERT_EQ(plan.ranges_size(), world);
  int64_t next = 0, max_count = 0, min_count = INT64_MAX;
  for (int r = 0; r < world; ++r) {
    const auto& range = plan.ranges(r);
    EXPECT_EQ(range.rank(), r);
    EXPECT_EQ(range.offset(), next) << "ranges must be contiguous";
    if (range.count() > 0) {
      EXPECT_EQ(range.offset() % align, 0) << "rank " << r << " start is not aligned";
    }
    next = range.offset() + range.count();
    max_count = std::max(max_count, range.count());
    min_count = std::min(min_count, range.count());
  }
  EXPECT_EQ(next, total) << "ranges must cover the buffer";
  EXPECT_LE(max_count - min_count, align) << "ranges must be balanced to one alignment unit";
}

TEST(PlannerTest, PlansAreContiguousAlignedBalancedAndCovering) {
  for (int64_t total : {0LL, 1LL, 63LL, 64LL, 65LL, 1000LL, 99991LL, 5'000'000LL})
    for (int world : {1, 2, 3, 4, 7, 16})
      for (int64_t align : {1LL, 64LL}) {
        SCOPED_TRACE(testing::Message()
                     << "total=" << total << " world=" << world << " align=" << align);
        ExpectValidPlan(ComputeShardingPlan(total, world, align), total, world, align);
      }
}

// Found by tests/fuzz (fuzz_state_store): a parameter count of 2^63 - 1 (restored from
// state.json, or reported by the first worker to join) overflowed total + alignment - 1.
TEST(PlannerTest, HugeCountsStillTileWithoutOverflow) {
  for (int64_t total : {INT64_MAX, INT64_MAX - 63, int64_t{1} << 62})
    for (int world : {1, 3, 100000})
      for (int64_t align : {1LL, 64LL}) {
        SCOPED_TRACE(testing::Message()
                     << "total=" << total << " world=" << world << " align=" << align);
        ExpectValidPlan(ComputeShardingPlan(total, world, align), total, world, align);
      }
}

TEST(PlannerTest, RanksAreNodeMajorAndNodeGroupsConsecutive) {
  std::vector<v1::Member> members;
  auto add = [&](const char* id, const char* node, int local) {
    v1::Member m;
    m.set_member_id(id);
    m.mutable_identity()->set_node(node);
    m.mutable_identity()->set_local_rank(local);
    members.push_back(m);
  };
  add("a", "node-b", 1);
  add("b", "node-a", 0);
  add("c", "node-b", 0);
  add("d", "node-a", 1);
  add("e", "node-c", 0);
  std::vector<v1::NodeGroup> nodes;
  AssignRanks(&members, &nodes);
  std::vector<std::string> order;
  for (const auto& m : members) order.push_back(m.member_id());
  EXPECT_EQ(order, (std::vector<std::string>{"b", "d", "c", "a", "e"}));
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].node(), "node-a");
  EXPECT_EQ(std::vector<int>(nodes[1].ranks().begin(), nodes[1].ranks().end()),
            (std::vector<int>{2, 3}));
  for (size_t i = 0; i < members.size(); ++i) {
    EXPECT_EQ(members[i].rank(), static_cast<int>(i));
    EXPECT_EQ(nodes[members[i].node_index()].node(), members[i].identity().node());
  }
}

// ZeRO-1 shards follow the node hierarchy: with node-major ranks and contiguous ranges, the
// ranks of one node together hold one contiguous slice of the flat buffer (what the hierarchical
// reduce-scatter leaves on that node after its intra-node level).
TEST(PlannerTest, EachNodesRanksHoldOneContiguousSliceOfTheBuffer) {
  std::vector<v1::Member> members;
  const char* nodes[] = {"gpu-c", "gpu-a", "gpu-b"};
  for (int i = 0; i < 12; ++i) {
    v1::Member m;
    m.set_member_id("m" + std::to_string(i));
    m.mutable_identity()->set_node(nodes[i % 3]);
    m.mutable_identity()->set_local_rank(i / 3);
    members.push_back(m);
  }
  std::vector<v1::NodeGroup> groups;
  AssignRanks(&members, &groups);
  ASSERT_EQ(groups.size(), 3u);
  const v1::ShardingPlan plan = ComputeShardingPlan(22'050'664, 12);
  int64_t next = 0;
  for (const auto& g : groups) {
    ASSERT_EQ(g.ranks_size(), 4) << g.node();
    for (int i = 0; i < g.ranks_size(); ++i) {
      const auto& range = plan.ranges(g.ranks(i));
      EXPECT_EQ(range.offset(), next)
          << g.node() << " rank " << g.ranks(i) << ": the node's slice is not contiguous";
      next = range.offset() + range.count();
    }
  }
  EXPECT_EQ(next, 22'050'664);
}

}  // namespace
}  // namespace retort::coordinator

// Which NCCL calls the NCCL communicator issues (collectives/nccl/nccl_call_plan.h), checked on
// the CPU: equal counts go straight to ncclReduceScatter / ncclAllGather, the coordinator's
// aligned plans (nearly even) are padded into one such call, sparse bucket counts stay grouped
// ncclReduce / ncclBroadcast; and a plan, run on host memory as the communicator runs it on the
// device, gives the reduce-scatter-v / all-gather-v results.
#include "collectives/nccl/nccl_call_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "collectives/types.h"
#include "coordinator/planner.h"

namespace retort::collectives::nccl {
namespace {

using ::testing::ElementsAre;

// The per-rank counts of the coordinator's sharding plan for `total` elements over `world`.
std::vector<size_t> PlannerCounts(int64_t total, int world) {
  const auto plan = coordinator::ComputeShardingPlan(total, world);
  std::vector<size_t> counts;
  for (const auto& range : plan.ranges()) counts.push_back(static_cast<size_t>(range.count()));
  return counts;
}

// Runs `plan` over host vectors the way NcclCommunicator runs it on its stream, with NCCL's
// semantics simulated over all ranks at once: every rank's plan must issue the same NCCL calls
// in the same order (what NCCL requires), which this checks too.
struct HostRank {
  std::vector<float> input, output, scratch;
  float* Ptr(const PlanRef& ref) {
    std::vector<float>& v = ref.buffer == PlanBuffer::kInput    ? input
                            : ref.buffer == PlanBuffer::kOutput ? output
                                                                : scratch;
    return v.data() + ref.offset;
  }
};

void RunOnHost(const std::vector<NcclCallPlan>& plans, std::vector<HostRank>* ranks) {
  const size_t n = ranks->size();
  for (size_t r = 0; r < n; ++r) {
    // NaN in the scratch: a padded slot that leaks into a result shows.
    (*ranks)[r].scratch.assign(plans[r].scratch_elements, std::numeric_limits<float>::quiet_NaN());
  }
  std::vector<size_t> at(n, 0);  // next call per rank
  for (;;) {
    // Copies are local: run each rank's up to its next NCCL call.
    for (size_t r = 0; r < n; ++r) {
      HostRank& me = (*ranks)[r];
      while (at[r] < plans[r].calls.size() && plans[r].calls[at[r]].kind == NcclCallKind::kCopy) {
        const NcclCall& c = plans[r].calls[at[r]++];
        std::copy_n(me.Ptr(c.send), c.count, me.Ptr(c.recv));
      }
    }
    if (at[0] == plans[0].calls.size()) break;
    const NcclCall& call = plans[0].calls[at[0]];
    for (size_t r = 0; r < n; ++r) {
      ASSERT_LT(at[r], plans[r].calls.size()) << "rank " << r << " issues fewer NCCL calls";
      const NcclCall& mine = plans[r].calls[at[r]];
      ASSERT_EQ(mine.kind, call.kind) << "rank " << r << ": " << Describe(mine);
      ASSERT_EQ(mine.count, call.count) << "rank " << r << ": " << Describe(mine);
      ASSERT_EQ(mine.root, call.root) << "rank " << r << ": " << Describe(mine);
    }
    const size_t m = call.count;
    switch (call.kind) {
      case NcclCallKind::kReduceScatter: {
        std::vector<std::vector<float>> result(n, std::vector<float>(m, 0.f));
        for (size_t src = 0; src < n; ++src) {
          const NcclCall& c = plans[src].calls[at[src]];
          for (size_t dst = 0; dst < n; ++dst)
            for (size_t i = 0; i < m; ++i) result[dst][i] += (*ranks)[src].Ptr(c.send)[dst * m + i];
        }
        for (size_t r = 0; r < n; ++r)
          std::copy_n(result[r].data(), m, (*ranks)[r].Ptr(plans[r].calls[at[r]].recv));
        break;
      }
      case NcclCallKind::kAllGather: {
        std::vector<float> gathered(n * m);
        for (size_t src = 0; src < n; ++src)
          std::copy_n((*ranks)[src].Ptr(plans[src].calls[at[src]].send), m, &gathered[src * m]);
        for (size_t r = 0; r < n; ++r)
          std::copy_n(gathered.data(), n * m, (*ranks)[r].Ptr(plans[r].calls[at[r]].recv));
        break;
      }
      case NcclCallKind::kAllReduce: {
        std::vector<float> sum(m, 0.f);
        for (size_t src = 0; src < n; ++src)
          for (size_t i = 0; i < m; ++i)
            sum[i] += (*ranks)[src].Ptr(plans[src].calls[at[src]].send)[i];
        for (size_t r = 0; r < n; ++r)
          std::copy_n(sum.data(), m, (*ranks)[r].Ptr(plans[r].calls[at[r]].recv));
        break;
      }
      case NcclCallKind::kReduce: {
        std::vector<float> sum(m, 0.f);
        for (size_t src = 0; src < n; ++src)
          for (size_t i = 0; i < m; ++i)
            sum[i] += (*ranks)[src].Ptr(plans[src].calls[at[src]].send)[i];
        const size_t root = static_cast<size_t>(call.root);
        std::copy_n(sum.data(), m, (*ranks)[root].Ptr(plans[root].calls[at[root]].recv));
        break;
      }
      case NcclCallKind::kBroadcast: {
        const size_t root = static_cast<size_t>(call.root);
        std::vector<float> data((*ranks)[root].Ptr(plans[root].calls[at[root]].send),
                                (*ranks)[root].Ptr(plans[root].calls[at[root]].send) + m);
        for (size_t r = 0; r < n; ++r)
          std::copy_n(data.data(), m, (*ranks)[r].Ptr(plans[r].calls[at[r]].recv));
        break;
      }
      case NcclCallKind::kCopy:
        break;
    }
    for (size_t r = 0; r < n; ++r) ++at[r];
  }
  for (size_t r = 0; r < n; ++r)
    EXPECT_EQ(at[r], plans[r].calls.size()) << "rank " << r << " issues more NCCL calls";
}

float InputValue(size_t rank, size_t i) { return static_cast<float>(rank * 1000 + i % 997); }

// Reduce-scatter-v and all-gather-v of `counts` through the plans, checked element by element.
void CheckResults(const std::vector<size_t>& counts) {
  const size_t n = counts.size();
  const size_t total = TotalCount(counts);
  const auto offsets = Offsets(counts);
  std::vector<HostRank> ranks(n);
  std::vector<NcclCallPlan> plans;
  for (size_t r = 0; r < n; ++r) {
    ranks[r].input.resize(total);
    for (size_t i = 0; i < total; ++i) ranks[r].input[i] = InputValue(r, i);
    ranks[r].output.assign(counts[r], -1.f);
    plans.push_back(PlanReduceScatterV(counts, static_cast<int>(r)));
  }
  RunOnHost(plans, &ranks);
  for (size_t r = 0; r < n; ++r) {
    for (size_t i = 0; i < counts[r]; ++i) {
      float want = 0;
      for (size_t src = 0; src < n; ++src) want += InputValue(src, offsets[r] + i);
      ASSERT_EQ(ranks[r].output[i], want) << "reduce-scatter rank " << r << " element " << i;
    }
  }
  plans.clear();
  for (size_t r = 0; r < n; ++r) {
    ranks[r].input.resize(counts[r]);
    for (size_t i = 0; i < counts[r]; ++i) ranks[r].input[i] = InputValue(r, i);
    ranks[r].output.assign(total, -1.f);
    plans.push_back(PlanAllGatherV(counts, static_cast<int>(r)));
  }
  RunOnHost(plans, &ranks);
  for (size_t r = 0; r < n; ++r)
    for (size_t src = 0; src < n; ++src)
      for (size_t i = 0; i < counts[src]; ++i)
        ASSERT_EQ(ranks[r].output[offsets[src] + i], InputValue(src, i))
            << "all-gather rank " << r << " part " << src << " element " << i;
}

TEST(NcclCallPlanTest, EqualCountsAreOneCallOnTheCallersBuffers) {
  const NcclCallPlan rs = PlanReduceScatterV({64, 64, 64, 64}, 2);
  EXPECT_EQ(rs.scratch_elements, 0u);
  EXPECT_FALSE(rs.grouped);
  EXPECT_THAT(Describe(rs), ElementsAre("ncclReduceScatter input+0 -> output+0 x64"));
  EXPECT_THAT(Describe(PlanAllGatherV({64, 64, 64, 64}, 2)),
              ElementsAre("ncclAllGather input+0 -> output+0 x64"));
}

TEST(NcclCallPlanTest, NearlyEvenCountsArePaddedIntoOneCall) {
  // As the aligned planner splits 1000 elements over 4 ranks in units of 64: 256, 256, 256, 232.
  const std::vector<size_t> counts = {256, 256, 256, 232};
  ASSERT_TRUE(PadsToEqualCounts(counts));
  const NcclCallPlan short_rank = PlanReduceScatterV(counts, 3);
  EXPECT_EQ(short_rank.scratch_elements, 4u * 256 + 256);
  EXPECT_FALSE(short_rank.grouped);
  EXPECT_THAT(Describe(short_rank), ElementsAre("copy input+0 -> scratch+0 x1000",
                                                "ncclReduceScatter scratch+0 -> scratch+1024 x256",
                                                "copy scratch+1024 -> output+0 x232"));
  EXPECT_THAT(Describe(PlanReduceScatterV(counts, 0)),
              ElementsAre("copy input+0 -> scratch+0 x1000",
                          "ncclReduceScatter scratch+0 -> output+0 x256"));
  EXPECT_THAT(
      Describe(PlanAllGatherV(counts, 3)),
      ElementsAre("copy input+0 -> scratch+768 x232", "ncclAllGather scratch+768 -> scratch+0 x256",
                  "copy scratch+0 -> output+0 x1000"));
  EXPECT_THAT(
      Describe(PlanAllGatherV(counts, 1)),
      ElementsAre("ncclAllGather input+0 -> scratch+0 x256", "copy scratch+0 -> output+0 x1000"));
  // A short rank in the middle: the chunks after it move by the padding.
  EXPECT_THAT(Describe(PlanReduceScatterV({128, 120, 128, 128}, 0)),
              ElementsAre("copy input+0 -> scratch+0 x248", "copy input+248 -> scratch+256 x256",
                          "ncclReduceScatter scratch+0 -> output+0 x128"));
  // More than 1/8 padding is not worth it: grouped.
  EXPECT_FALSE(PadsToEqualCounts({128, 64, 128, 128}));
}

TEST(NcclCallPlanTest, TheCoordinatorsPlansForAModelArePadded) {
  // ViT-S/16's 22,050,664 parameters over 2..8 ranks: every whole-buffer collective of the
  // step (parameter all-gather, a rank's last bucket) is one NCCL call.
  for (int world = 2; world <= 8; ++world) {
    const auto counts = PlannerCounts(22050664, world);
    EXPECT_TRUE(PadsToEqualCounts(counts) || counts == std::vector<size_t>(world, counts[0]))
        << "world " << world;
    for (int r = 0; r < world; ++r) {
      for (const NcclCallPlan& plan : {PlanReduceScatterV(counts, r), PlanAllGatherV(counts, r)}) {
        EXPECT_FALSE(plan.grouped) << "world " << world;
        int nccl_calls = 0;
        for (const NcclCall& c : plan.calls) nccl_calls += c.kind != NcclCallKind::kCopy;
        EXPECT_EQ(nccl_calls, 1) << "world " << world;
      }
    }
  }
}

TEST(NcclCallPlanTest, SparseCountsStayGroupedReduceAndBroadcast) {
  // A gradient bucket that spans the end of rank 1's range and the start of rank 2's.
  const std::vector<size_t> counts = {0, 300, 100, 0};
  EXPECT_FALSE(PadsToEqualCounts(counts));
  const NcclCallPlan rs = PlanReduceScatterV(counts, 1);
  EXPECT_TRUE(rs.grouped);
  EXPECT_EQ(rs.scratch_elements, 0u);
  EXPECT_THAT(Describe(rs), ElementsAre("ncclReduce input+0 -> output+0 x300 root 1",
                                        "ncclReduce input+300 -> output+0 x100 root 2"));
  EXPECT_THAT(Describe(PlanAllGatherV(counts, 2)),
              ElementsAre("ncclBroadcast output+0 -> output+0 x300 root 1",
                          "ncclBroadcast input+0 -> output+300 x100 root 2"));
  EXPECT_TRUE(PlanReduceScatterV({0, 0, 0}, 1).calls.empty());
}

TEST(NcclCallPlanTest, PlansGiveTheCollectivesResults) {
  for (const std::vector<size_t>& counts :
       std::vector<std::vector<size_t>>{{7, 7, 7},
                                        {256, 256, 256, 232},
                                        {128, 120, 128, 128},
                                        {128, 64, 128, 128},
                                        {64, 64, 64, 0},
                                        {0, 300, 100, 0},
                                        {5},
                                        PlannerCounts(5000, 3),
                                        PlannerCounts(100, 8)}) {
    SCOPED_TRACE(::testing::PrintToString(counts));
    CheckResults(counts);
  }
}

TEST(NcclCallPlanTest, WarmUpIssuesEveryKindOfStepCallSmallAndLargeInPlace) {
  const NcclCallPlan plan = PlanWarmUp(4, 2, 8);
  EXPECT_EQ(plan.scratch_elements, 32u);
  EXPECT_FALSE(plan.grouped);
  // In place as NCCL defines it: recvbuff == sendbuff + rank * count, and the mirror image;
  // one element per rank, then the large size (NCCL picks its algorithm by size).
  EXPECT_THAT(Describe(plan), ElementsAre("ncclReduceScatter scratch+0 -> scratch+2 x1",
                                          "ncclAllGather scratch+2 -> scratch+0 x1",
                                          "ncclAllReduce scratch+0 -> scratch+0 x4",
                                          "ncclBroadcast scratch+0 -> scratch+0 x4 root 0",
                                          "ncclReduceScatter scratch+0 -> scratch+16 x8",
                                          "ncclAllGather scratch+16 -> scratch+0 x8",
                                          "ncclAllReduce scratch+0 -> scratch+0 x32",
                                          "ncclBroadcast scratch+0 -> scratch+0 x32 root 0"));
  // The default large size is the default gradient bucket; a large size of 1 issues no repeat.
  EXPECT_EQ(PlanWarmUp(4, 0).scratch_elements, 4 * kWarmUpLargeElements);
  EXPECT_EQ(PlanWarmUp(4, 0, 1).calls.size(), 4u);
  // Every rank issues the same calls (else the warm-up itself would hang), within its scratch.
  std::vector<HostRank> ranks(4);
  std::vector<NcclCallPlan> plans;
  for (int r = 0; r < 4; ++r) {
    plans.push_back(PlanWarmUp(4, r, 8));
    for (const NcclCall& c : plans.back().calls) {
      const size_t span = c.kind == NcclCallKind::kReduceScatter ? 4 * c.count : c.count;
      const size_t gathered = c.kind == NcclCallKind::kAllGather ? 4 * c.count : c.count;
      EXPECT_LE(c.send.offset + span, plans.back().scratch_elements) << Describe(c);
      EXPECT_LE(c.recv.offset + gathered, plans.back().scratch_elements) << Describe(c);
    }
  }
  RunOnHost(plans, &ranks);
}

}  // namespace
}  // namespace retort::collectives::nccl

// PlanRecovery: which copy of the training state a new generation starts from.
#include "worker/recovery_plan.h"

#include <gtest/gtest.h>

namespace retort::worker {
namespace {

StateMeta At(int64_t step) { return StateMeta{step, step, 0, step}; }

// A rank that trained in `generation` as `rank` of `world`, with snapshots at `a` and `b`,
// holding the replica of rank (rank - distance) mod world.
StateDescriptor Survivor(int64_t generation, int rank, int world, int64_t a, int64_t b,
                         int64_t distance = 1) {
  StateDescriptor d;
  d.old_generation = generation;
  d.old_rank = rank;
  d.old_world = world;
  d.old_replica_distance = distance;
  d.snapshot[0] = a >= 0 ? At(a) : StateMeta();
  d.snapshot[1] = b >= 0 ? At(b) : StateMeta();
  return d;
}

TEST(RecoveryPlanTest, DescriptorRoundTripsThroughItsPackedForm) {
  StateDescriptor d = Survivor(7, 2, 5, 11, 12, 3);
  d.full = StateMeta{12, 10, 3, 4};
  int64_t packed[StateDescriptor::kFields];
  d.Pack(packed);
  StateDescriptor back = StateDescriptor::Unpack(packed);
  EXPECT_EQ(back.full.optimizer_step, 10);
  EXPECT_EQ(back.full.epoch, 3);
  EXPECT_EQ(back.old_generation, 7);
  EXPECT_EQ(back.old_rank, 2);
  EXPECT_EQ(back.old_world, 5);
  EXPECT_EQ(back.snapshot[0].global_step, 11);
  EXPECT_EQ(back.snapshot[1].step_in_epoch, 12);
  EXPECT_EQ(back.old_replica_distance, 3);
}

TEST(RecoveryPlanTest, NobodyWithStateStartsFresh) {
  EXPECT_EQ(PlanRecovery({StateDescriptor(), StateDescriptor()}).kind, RecoveryPlan::kFresh);
}

TEST(RecoveryPlanTest, AgreedSwitchBroadcastsTheFullStateOfTheNewestGeneration) {
  StateDescriptor newcomer;
  StateDescriptor a = Survivor(4, 0, 2, 9, 10), b = Survivor(4, 1, 2, 9, 10);
  a.full = b.full = At(10);
  auto plan = PlanRecovery({newcomer, b, a});
  EXPECT_EQ(plan.kind, RecoveryPlan::kFullState);
  EXPECT_EQ(plan.source, 1);
  EXPECT_EQ(plan.meta.global_step, 10);
}

TEST(RecoveryPlanTest, OneDeadRankIsCoveredByItsSuccessorsReplica) {
  // Generation 3 had 3 ranks; old rank 1 died. Old rank 2 holds rank 1's range as replica.
  auto plan = PlanRecovery({Survivor(3, 0, 3, 20, 21), Survivor(3, 2, 3, 20, 21)});
  ASSERT_EQ(plan.kind, RecoveryPlan::kReplicas) << plan.reason;
  EXPECT_EQ(plan.meta.global_step, 21);
  EXPECT_EQ(plan.contributes_own, (std::vector<bool>{true, true}));
  EXPECT_EQ(plan.contributes_predecessor, (std::vector<bool>{false, true}));
}

TEST(RecoveryPlanTest, RanksOneSnapshotApartAgreeOnTheNewestCoveredStep) {
  // Rank 0 finished the step-31 snapshot; rank 2 died before sending its moments, so rank 0
  // (its successor) has no step-31 copy of range 2 and rank 1 did not finish step 31 either.
  auto plan = PlanRecovery({Survivor(5, 0, 3, 30, 31), Survivor(5, 1, 3, 29, 30)});
  ASSERT_EQ(plan.kind, RecoveryPlan::kReplicas) << plan.reason;
  EXPECT_EQ(plan.meta.global_step, 30);
  // Range 2 comes from its successor, old rank 0 (new rank 0).
  EXPECT_EQ(plan.contributes_own, (std::vector<bool>{true, true}));
  EXPECT_EQ(plan.contributes_predecessor, (std::vector<bool>{true, false}));
}

TEST(RecoveryPlanTest, NewcomersAreFedAndOwnRangesWinOverReplicas) {
  auto plan = PlanRecovery(
      {StateDescriptor(), Survivor(2, 1, 2, 7, 8), Survivor(2, 0, 2, 7, 8), StateDescriptor()});
  ASSERT_EQ(plan.kind, RecoveryPlan::kReplicas);
  EXPECT_EQ(plan.meta.global_step, 8);
  EXPECT_EQ(plan.contributes_own, (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ(plan.contributes_predecessor, (std::vector<bool>{false, false, false, false}));
}

TEST(RecoveryPlanTest, TwoAdjacentDeadRanksNeedTheCheckpoint) {
  // 4 ranks, old ranks 1 and 2 dead: range 1 was replicated only on rank 2.
  auto plan = PlanRecovery({Survivor(6, 0, 4, 40, 41), Survivor(6, 3, 4, 40, 41)});
  EXPECT_EQ(plan.kind, RecoveryPlan::kCheckpoint);
}

TEST(RecoveryPlanTest, TwoNonAdjacentDeadRanksAreStillCovered) {
  auto plan = PlanRecovery({Survivor(6, 0, 4, 40, 41), Survivor(6, 2, 4, 40, 41)});
  ASSERT_EQ(plan.kind, RecoveryPlan::kReplicas);
  EXPECT_EQ(plan.contributes_predecessor, (std::vector<bool>{true, true}));
}

TEST(RecoveryPlanTest, ReplicaDistancePutsEveryReplicaOnAnotherNodeWhenTheLayoutAllows) {
  EXPECT_EQ(ReplicaDistance({}), 1);
  EXPECT_EQ(ReplicaDistance({0}), 1);
  EXPECT_EQ(ReplicaDistance({0, 1, 2}), 1);           // one rank per node
  EXPECT_EQ(ReplicaDistance({0, 0, 0}), 1);           // one node: nothing better than 1
  EXPECT_EQ(ReplicaDistance({0, 0, 1, 1}), 2);        // 2 nodes x 2 ranks
  EXPECT_EQ(ReplicaDistance({0, 0, 1, 1, 2, 2}), 2);  // 3 nodes x 2 ranks
  EXPECT_EQ(ReplicaDistance({0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2}), 4);
  EXPECT_EQ(ReplicaDistance({0, 0, 0, 1, 1, 1, 2, 2}), 3);  // unequal nodes, still possible
  // A node with more than half the ranks: no distance avoids it; the fewest same-node pairs.
  const std::vector<int> lopsided = {0, 0, 0, 1};
  const int d = ReplicaDistance(lopsided);
  int same_node = 0;
  for (int r = 0; r < 4; ++r) same_node += lopsided[r] == lopsided[(r + d) % 4];
  EXPECT_EQ(same_node, 2) << "distance " << d;
}

TEST(RecoveryPlanTest, AWholeNodeLostIsCoveredByReplicasOnTheOtherNodes) {
  // Generation 9: 3 nodes x 2 ranks, replicas 2 ranks along the ring. Node 1 (old ranks 2 and
  // 3) died: their ranges are held by old ranks 4 and 5.
  auto plan = PlanRecovery({Survivor(9, 0, 6, 50, 51, 2), Survivor(9, 1, 6, 50, 51, 2),
                            Survivor(9, 4, 6, 50, 51, 2), Survivor(9, 5, 6, 50, 51, 2)});
  ASSERT_EQ(plan.kind, RecoveryPlan::kReplicas) << plan.reason;
  EXPECT_EQ(plan.meta.global_step, 51);
  EXPECT_EQ(plan.contributes_own, (std::vector<bool>{true, true, true, true}));
  EXPECT_EQ(plan.contributes_predecessor, (std::vector<bool>{false, false, true, true}));
  // With the old placement (distance 1) old rank 3 held rank 2's replica: lost with it.
  plan = PlanRecovery({Survivor(9, 0, 6, 50, 51), Survivor(9, 1, 6, 50, 51),
                       Survivor(9, 4, 6, 50, 51), Survivor(9, 5, 6, 50, 51)});
  EXPECT_EQ(plan.kind, RecoveryPlan::kCheckpoint) << plan.reason;
}

TEST(RecoveryPlanTest, RanksThatDisagreeOnTheReplicaDistanceAreNotTrusted) {
  auto plan = PlanRecovery({Survivor(9, 0, 4, 50, 51, 2), Survivor(9, 1, 4, 50, 51, 1)});
  EXPECT_EQ(plan.kind, RecoveryPlan::kCheckpoint) << plan.reason;
}

TEST(RecoveryPlanTest, SingleRankGenerationCannotReplicate) {
  EXPECT_EQ(PlanRecovery({StateDescriptor(), StateDescriptor()}).kind, RecoveryPlan::kFresh);
  auto plan = PlanRecovery({Survivor(2, 0, 1, 5, 6)});
  ASSERT_EQ(plan.kind, RecoveryPlan::kReplicas);
  EXPECT_EQ(plan.meta.global_step, 6);
}

TEST(RecoveryPlanTest, ZombieStateFromAnOlderGenerationIsIgnored) {
  // The zombie trained in generation 4 up to step 50; the others moved on in generation 5.
  StateDescriptor zombie = Survivor(4, 1, 2, 49, 50);
  zombie.full = At(50);
  auto plan = PlanRecovery({Survivor(5, 0, 1, 60, 61), zombie});
  ASSERT_EQ(plan.kind, RecoveryPlan::kReplicas) << plan.reason;
  EXPECT_EQ(plan.meta.global_step, 61);
  EXPECT_EQ(plan.contributes_own, (std::vector<bool>{true, false}));
}

TEST(RecoveryPlanTest, IncompleteFirstSnapshotOfANewGenerationFallsBackToTheOlderOne) {
  // Generation 8 restored at step 12; only rank 0 completed its first snapshot before rank 1
  // of generation 8 died. Generation 7's replicas still hold step 12.
  auto plan = PlanRecovery({Survivor(8, 0, 3, 12, -1), Survivor(7, 1, 2, 11, 12)});
  // Generation 8 (3 ranks) cannot be covered by one survivor; generation 7 can (rank 1 holds
  // its own range and its predecessor's).
  ASSERT_EQ(plan.kind, RecoveryPlan::kReplicas) << plan.reason;
  EXPECT_EQ(plan.meta.global_step, 12);
  EXPECT_EQ(plan.contributes_own, (std::vector<bool>{false, true}));
  EXPECT_EQ(plan.contributes_predecessor, (std::vector<bool>{false, true}));
}

TEST(RecoveryPlanTest, SurvivorsMemoryWinsOverANewerGenerationThatWentBackToDisk) {
  // Generation 5 had 3 ranks at step 181. After a coordinator restart old rank 0 re-joined
  // alone: generation 6 could not cover generation 5's ranges, loaded the checkpoint at step
  // 109 and reached step 115. Old ranks 1 and 2 come back holding step 181 in memory.
  StateDescriptor lone = Survivor(6, 0, 1, 114, 115);
  auto plan = PlanRecovery({lone, Survivor(5, 1, 3, 180, 181), Survivor(5, 2, 3, 180, 181)});
  ASSERT_EQ(plan.kind, RecoveryPlan::kReplicas) << plan.reason;
  EXPECT_EQ(plan.meta.global_step, 181) << plan.reason;
  EXPECT_EQ(plan.contributes_own, (std::vector<bool>{false, true, true}));
  // Range 0 comes from old rank 1's replica of its predecessor.
  EXPECT_EQ(plan.contributes_predecessor, (std::vector<bool>{false, true, false}));
  // The same with an agreed switch in generation 5: its full state at 181 wins as well.
  StateDescriptor saved = Survivor(5, 1, 3, 180, 181);
  saved.full = At(181);
  plan = PlanRecovery({lone, saved});
  ASSERT_EQ(plan.kind, RecoveryPlan::kFullState) << plan.reason;
  EXPECT_EQ(plan.source, 1);
  EXPECT_EQ(plan.meta.global_step, 181);
}

TEST(RecoveryPlanTest, EqualStepsPreferTheNewerGeneration) {
  auto plan = PlanRecovery({Survivor(6, 0, 1, 40, 41), Survivor(5, 0, 1, 40, 41)});
  ASSERT_EQ(plan.kind, RecoveryPlan::kReplicas);
  EXPECT_EQ(plan.contributes_own, (std::vector<bool>{true, false}));
}

}  // namespace
}  // namespace retort::worker

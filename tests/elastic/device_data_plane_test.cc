// The data plane GPU workers use, in real jobs on this CPU machine: every worker runs with
// --emulate-device-data-plane (host memory stands in for device memory, UCX for NCCL;
// worker/data_plane.h), on two "nodes" of two workers (the device hierarchy: node level, then
// staged UCX between nodes). kill -9 of one worker, and of both workers of one node at once:
// the survivors rebuild the state from replicas held on the other node and lose no completed
// step, on the loss curve of the uninterrupted run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <set>

#include "elastic/scenario_test.h"

namespace retort::elastic_testing {
namespace {

using std::chrono::milliseconds;

class DeviceDataPlaneTest : public ElasticScenarioTest {
 protected:
  static ClusterOptions Emulated() {
    ClusterOptions o;
    o.worker_args = {"--emulate-device-data-plane"};
    return o;
  }

  // Two nodes of two workers, all ranked in one generation that trained `step` steps.
  void StartTwoNodesOfTwo(const JobOptions& job, std::unique_ptr<ElasticCluster>* c,
                          StatusView* st) {
    LoadReference(job);
    if (HasFatalFailure()) return;
    *c = std::make_unique<ElasticCluster>(job, Emulated());
    dirs_.push_back((*c)->dir());
    std::string error;
    ASSERT_TRUE((*c)->StartCoordinator(milliseconds(15000), &error)) << error;
    for (const char* node : {"nodeA", "nodeB"})
      for (int local = 0; local < 2; ++local) (*c)->StartWorkerOnNode(node, local);
    ASSERT_TRUE((*c)->WaitForWorld(4, 10, kStartup)) << (*c)->Logs();
    ASSERT_TRUE(WaitAllRanked(**c, 4, kEvent, st));
  }

  // The worker process of the member holding `rank` (workers are started nodeA 0, 1, nodeB 0, 1).
  static int WorkerOfRank(const StatusView& st, int rank) {
    const MemberView* m = st.ByRank(rank);
    if (m == nullptr) return -1;
    return (m->node == "nodeB" ? 2 : 0) + m->local_rank;
  }

  // The first generation's data plane, from a worker's log: the composition GPU workers build.
  static void ExpectDeviceHierarchyWasUsed(const ElasticCluster& c) {
    EXPECT_THAT(c.Logs(200000), ::testing::HasSubstr("routed(hierarchical(staged(ucx)"))
        << "the workers did not build the emulated device hierarchy";
  }

  // Waits for a generation of `members` after `st`, then for the job's end; checks that no
  // completed step was lost or run again and the curve is the reference's.
  void ExpectRecoveredWithoutLoss(ElasticCluster& c, const JobOptions& job, const StatusView& st,
                                  size_t members, const MetricsMark& before,
                                  const std::vector<int>& killed, const std::string& what) {
    StatusView after;
    ASSERT_TRUE(c.WaitForStatus(
        [&](const StatusView& s) {
          return s.generation > st.generation && s.members.size() == members && s.AllRanked();
        },
        kEvent, &after))
        << what << ": no generation of " << members << " after the kill: " << after.raw << "\n"
        << c.Logs();
    ExpectCompletedCleanly(c, killed);
    if (HasFatalFailure()) return;
    MetricsFile m = c.Metrics();
    // The step in flight at the kill may complete twice (rank 0 logged it, the rebuilt state
    // is one step older); no step completed before the kill runs again.
    ExpectNoLostSteps(m, job, before);
    ExpectSameTrajectory(m.lines, what);
    EXPECT_THAT(c.Logs(200000), ::testing::Not(::testing::HasSubstr("restarts from step 0")))
        << what << ": the state was not rebuilt from memory";
  }
};

TEST_F(DeviceDataPlaneTest, KillNineOfOneWorkerLosesNoStep) {
  const JobOptions job{.min_workers = 2, .max_workers = 4};
  std::unique_ptr<ElasticCluster> c;
  StatusView st;
  ASSERT_NO_FATAL_FAILURE(StartTwoNodesOfTwo(job, &c, &st));
  ExpectDeviceHierarchyWasUsed(*c);
  const int victim = WorkerOfRank(st, 3);
  ASSERT_GE(victim, 0) << st.raw;
  c->worker(victim).Signal(SIGKILL);
  const MetricsMark before = c->Mark();
  // Three survivors on nodes of 2 and 1: the staged flat ring takes over.
  ExpectRecoveredWithoutLoss(*c, job, st, 3, before, {victim}, "kill -9 of rank 3 (of 4)");
}

TEST_F(DeviceDataPlaneTest, KillNineOfAWholeNodeRecoversFromReplicasOnTheOther) {
  const JobOptions job{.min_workers = 2, .max_workers = 4};
  std::unique_ptr<ElasticCluster> c;
  StatusView st;
  ASSERT_NO_FATAL_FAILURE(StartTwoNodesOfTwo(job, &c, &st));
  std::vector<int> victims = {WorkerOfRank(st, 2), WorkerOfRank(st, 3)};
  for (int v : victims) ASSERT_GE(v, 0) << st.raw;
  for (int v : victims) c->worker(v).Signal(SIGKILL);
  const MetricsMark before = c->Mark();
  // Two survivors on one node: NCCL's place (the node level) alone carries the gradients.
  ExpectRecoveredWithoutLoss(*c, job, st, 2, before, victims, "kill -9 of node B (ranks 2, 3)");
}

}  // namespace
}  // namespace retort::elastic_testing

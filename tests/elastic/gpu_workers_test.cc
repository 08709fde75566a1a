// Two worker processes on one GPU, each its own node (so between them UCX through pinned
// staging, the path GPU workers on different nodes take), train the KD job: the loss curve
// equals the CPU run's within the scenarios' tolerance, and kill -9 of one of them is recovered
// from the replica the other holds, with no completed step lost. Skipped without a GPU.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>

#include "elastic/scenario_test.h"

namespace retort::elastic_testing {
namespace {

using std::chrono::milliseconds;
using testing::UnixMs;

class GpuWorkersTest : public ElasticScenarioTest {};

TEST_F(GpuWorkersTest, TwoWorkersOnOneGpuAsTwoNodesTrainAndSurviveAKillNine) {
  // The CPU reference first, also without a GPU: scripts/gpu-check --prepare runs this test on
  // the CPU machine with RETORT_REFERENCE_LOSSES_DIR set to carry the reference to the GPU one.
  const JobOptions job{.min_workers = 1, .max_workers = 2};
  LoadReference(job);
  if (HasFatalFailure()) return;
  if (!std::filesystem::exists("/dev/nvidiactl")) GTEST_SKIP() << "no GPU visible (/dev/nvidiactl)";
  ClusterOptions options;
  options.worker_args = {"--device=cuda:0"};
  options.comm_timeout_ms = 20000;
  auto c = std::make_unique<ElasticCluster>(job, options);
  dirs_.push_back(c->dir());
  std::string error;
  ASSERT_TRUE(c->StartCoordinator(milliseconds(15000), &error)) << error;
  c->StartWorkerOnNode("gpu-node-a", 0);
  c->StartWorkerOnNode("gpu-node-b", 0);
  ASSERT_TRUE(c->WaitForWorld(2, 10, kStartup)) << c->Logs();
  StatusView st;
  ASSERT_TRUE(WaitAllRanked(*c, 2, kEvent, &st));
  EXPECT_NE(c->Logs(200000).find("staged(ucx)"), std::string::npos)
      << "the workers did not stage their device buffers over UCX";
  const MemberView* victim = st.ByRank(1);
  ASSERT_NE(victim, nullptr) << st.raw;
  const int index = victim->node == "gpu-node-a" ? 0 : 1;
  const int64_t kill_ms = UnixMs();
  c->worker(index).Signal(SIGKILL);
  const MetricsMark before = c->Mark();
  ExpectCompletedCleanly(*c, {index});
  if (HasFatalFailure()) return;
  MetricsFile m = c->Metrics();
  // Recovery time on a GPU (the data-plane issue's figure).
  PrintRecoveryTime(m, st.generation, kill_ms, "GPU: kill -9 of rank 1 (of 2)");
  ExpectNoLostSteps(m, job, before);
  ExpectSameTrajectory(m.lines, "2 GPU workers (one GPU), kill -9 of rank 1");
}

}  // namespace
}  // namespace retort::elastic_testing

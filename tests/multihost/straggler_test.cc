// A planted slow host: the worker on host 2 gets a tenth of a CPU (TestHosts::LimitCpu), the
// worker on host 1 is unthrottled. The run report's straggler rule (tools/report), reading the
// step logs the two workers wrote, names the worker on host 2 and nobody else. With straggler
// rebalancing on (elastic.straggler.rebalance), the throttled worker is given a smaller share
// of each global batch, and the loss curve stays the even split's.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "multihost/multihost_fixture.h"
#include "tools/report/bottleneck_rules.h"
#include "tools/report/step_logs.h"

namespace retort::multihost {
namespace {

using elastic_testing::ClusterOptions;
using elastic_testing::ElasticCluster;
using elastic_testing::JobOptions;
using std::chrono::milliseconds;

constexpr int kFastHost = 1;
constexpr int kSlowHost = 2;
constexpr double kSlowHostCpus = 0.1;

class StragglerTest : public MultiHostScenarioTest {
 protected:
  // The coordinator on host 0 (the network to itself), workers on the fast and the slow host.
  static ClusterOptions OnHosts(const testing::TestHosts& hosts) {
    ClusterOptions options;
    options.hosts = &hosts;
    options.coordinator_host = 0;
    options.port = 7070;
    options.comm_timeout_ms = 60000;  // the slow host's steps are several times longer
    return options;
  }
  // Starts the coordinator and one worker on each of kFastHost and kSlowHost, and waits until
  // the job completed and every process exited 0.
  void RunToCompletion(ElasticCluster& c) {
    dirs_.push_back(c.dir());
    std::string why;
    ASSERT_TRUE(c.StartCoordinator(milliseconds(30000), &why)) << why;
    c.StartWorkerOnHost(kFastHost, 0);
    c.StartWorkerOnHost(kSlowHost, 0);
    ExpectCompletedCleanly(c);
  }
};

TEST_F(StragglerTest, TheWorkerOnACpuThrottledHostIsNamedTheStraggler) {
  auto hosts = MakeHosts(3);
  if (!hosts) GTEST_SKIP() << skip_reason();
  std::string why;
  if (!hosts->LimitCpu(kSlowHost, kSlowHostCpus, &why))
    GTEST_SKIP() << "cannot plant a slow host here: " << why;

  JobOptions job;
  job.steps = 30;
  job.min_workers = 2;
  job.max_workers = 2;
  ElasticCluster c(job, OnHosts(*hosts));
  ASSERT_NO_FATAL_FAILURE(RunToCompletion(c));

  auto run = report::ReadRunLogs(c.dir() + "/out");
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->workers.size(), 2u);
  const report::Analysis analysis = report::Analyze(*run);
  std::vector<report::Finding> stragglers;
  for (const auto& f : analysis.findings) {
    std::cout << "[ finding  ] " << f.rule << ": " << f.text << "\n";
    if (f.rule == "straggler") stragglers.push_back(f);
  }
  ASSERT_EQ(stragglers.size(), 1u)
      << "expected exactly one straggler (the worker on " << hosts->name(kSlowHost) << ")";
  ASSERT_EQ(stragglers[0].workers.size(), 1u);
  EXPECT_EQ(stragglers[0].workers[0], hosts->name(kSlowHost) + "-0")
      << "the straggler named is not the throttled host's worker";
}

// Each step's local batch in a worker's step log (steps/<host>-0.jsonl), by step (the last line
// of a step wins, as the report reads them).
std::map<int64_t, int64_t> LocalBatches(const std::string& path) {
  std::map<int64_t, int64_t> by_step;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    try {
      const auto j = nlohmann::json::parse(line);
      by_step[j.at("step").get<int64_t>()] = j.at("local_batch").get<int64_t>();
    } catch (const std::exception&) {
    }
  }
  return by_step;
}

TEST_F(StragglerTest, RebalancingGivesTheThrottledWorkerASmallerShareOnTheSameLossCurve) {
  auto hosts = MakeHosts(3);
  if (!hosts) GTEST_SKIP() << skip_reason();
  std::string why;
  // A quarter of a CPU: the throttled worker computes several times slower than the other.
  if (!hosts->LimitCpu(kSlowHost, 0.25, &why))
    GTEST_SKIP() << "cannot plant a slow host here: " << why;

  JobOptions job;
  job.steps = 40;
  job.min_workers = 2;
  job.max_workers = 2;
  job.elastic_extra = "straggler: {rebalance: true, window_steps: 4, threshold: 0.1}";
  LoadReference(job);
  if (HasFatalFailure()) return;
  ElasticCluster c(job, OnHosts(*hosts));
  ASSERT_NO_FATAL_FAILURE(RunToCompletion(c));

  const auto fast = LocalBatches(c.dir() + "/out/steps/" + hosts->name(kFastHost) + "-0.jsonl");
  const auto slow = LocalBatches(c.dir() + "/out/steps/" + hosts->name(kSlowHost) + "-0.jsonl");
  ASSERT_EQ(fast.size(), static_cast<size_t>(job.steps));
  ASSERT_EQ(slow.size(), static_cast<size_t>(job.steps));
  // Even at first (24 + 24), then the throttled worker's share shrinks; the shares always add
  // up to the global batch.
  EXPECT_EQ(slow.at(1), job.global_batch / 2);
  for (const auto& [step, n] : slow)
    EXPECT_EQ(n + fast.at(step), job.global_batch) << "step " << step;
  const int64_t last = slow.at(job.steps);
  std::cout << "[ measured ] throttled worker's share at the last step: " << last << " of "
            << job.global_batch << "\n";
  EXPECT_LT(last, job.global_batch / 2) << "the throttled worker kept an even share";
  EXPECT_GE(last, job.global_batch / 2 / 4) << "below the floor (min_share 0.25)";
  EXPECT_NE(c.Logs(400000).find("batch shares from step"), std::string::npos)
      << "rank 0 did not log the new shares";
  EXPECT_NE(c.Logs(400000).find("batch_split: samples by rank"), std::string::npos)
      << "the coordinator did not report the new split as an event";
  // The math is the even split's but for float reassociation.
  ExpectSameTrajectory(c.Metrics().lines, "rebalanced 2 workers, one at a quarter CPU");
}

TEST_F(StragglerTest, AWorkerFarSlowerThanTheOthersIsDrainedWithoutLosingAStep) {
  auto hosts = MakeHosts(4);
  if (!hosts) GTEST_SKIP() << skip_reason();
  std::string why;
  if (!hosts->LimitCpu(kSlowHost, kSlowHostCpus, &why))
    GTEST_SKIP() << "cannot plant a slow host here: " << why;
  JobOptions job;
  job.steps = 60;
  job.min_workers = 2;
  job.max_workers = 3;
  job.elastic_extra = "straggler: {drain_below: 0.5, drain_after_steps: 8}";
  LoadReference(job);
  if (HasFatalFailure()) return;
  ElasticCluster c(job, OnHosts(*hosts));
  dirs_.push_back(c.dir());
  ASSERT_TRUE(c.StartCoordinator(milliseconds(30000), &why)) << why;
  c.StartWorkerOnHost(kFastHost, 0);
  const int slow = c.StartWorkerOnHost(kSlowHost, 0);
  c.StartWorkerOnHost(3, 0);
  ExpectCompletedCleanly(c);
  if (HasFatalFailure()) return;
  const std::string slow_log = c.worker(slow).Log();
  EXPECT_NE(slow_log.find("left the job (straggler:"), std::string::npos) << slow_log;
  EXPECT_NE(c.Logs(400000).find("member_draining"), std::string::npos);
  const auto m = c.Metrics();
  EXPECT_EQ(elastic_testing::MissingSteps(m.lines, job.steps), "") << "steps never completed";
  EXPECT_EQ(m.lines.back().world_size, 2) << "the job did not go on without the straggler";
  ExpectSameTrajectory(m.lines, "straggler drained (one of 3 workers at 0.1 CPU)");
}

}  // namespace
}  // namespace retort::multihost

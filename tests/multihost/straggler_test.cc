// A planted slow host: the worker on host 2 gets a tenth of a CPU (TestHosts::LimitCpu), the
// worker on host 1 is unthrottled. The run report's straggler rule (tools/report), reading the
// step logs the two workers wrote, names the worker on host 2 and nobody else.
#include <gtest/gtest.h>

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

using StragglerTest = MultiHostScenarioTest;

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
  ClusterOptions options;
  options.hosts = hosts.get();
  options.coordinator_host = 0;
  options.port = 7070;              // the coordinator has host 0's network to itself
  options.comm_timeout_ms = 60000;  // the slow host's steps are several times longer
  ElasticCluster c(job, options);
  dirs_.push_back(c.dir());
  ASSERT_TRUE(c.StartCoordinator(milliseconds(30000), &why)) << why;
  c.StartWorkerOnHost(kFastHost, 0);
  c.StartWorkerOnHost(kSlowHost, 0);
  ExpectCompletedCleanly(c);
  if (HasFatalFailure()) return;

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

}  // namespace
}  // namespace retort::multihost

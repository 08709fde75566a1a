// What the coordinator tells its observer (metrics): evictions and recoveries by cause,
// checkpoint commits with their bytes; the Prometheus counters built on it; and the step trace
// window it passes on in heartbeat directives.
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <chrono>

#include "coordinator/coordinator_metrics.h"
#include "coordinator_fixture.h"

namespace retort::coordinator {
namespace {

using std::chrono::milliseconds;

class RecordingObserver final : public CoordinatorObserver {
 public:
  void OnEviction(const std::string& cause) override { evictions.push_back(cause); }
  void OnRecovery(const std::string& cause) override { recoveries.push_back(cause); }
  void OnCheckpointCommitted(int64_t bytes) override { committed_bytes.push_back(bytes); }
  void OnCheckpointAborted() override { ++aborted; }
  void OnOwnPause(double seconds) override { own_pauses.push_back(seconds); }
  std::vector<std::string> evictions, recoveries;
  std::vector<double> own_pauses;
  std::vector<int64_t> committed_bytes;
  int aborted = 0;
};

class ObservedCoordinatorTest : public CoordinatorTest {
 protected:
  void SetUp() override {
    opts_.observer = &observer_;
    CoordinatorTest::SetUp();
  }
  RecordingObserver observer_;
};

using Causes = std::vector<std::string>;

TEST_F(ObservedCoordinatorTest, SilentMemberIsAHeartbeatTimeoutThenARecovery) {
  auto a = JoinOk("n0", 0);
  JoinOk("n0", 1);
  Settle();
  EXPECT_TRUE(observer_.recoveries.empty()) << "the first generation recovers from nothing";
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(milliseconds(900));
    HeartbeatAll({a});
    c_->Tick();
  }
  EXPECT_EQ(observer_.evictions, Causes{"heartbeat_timeout"});
  EXPECT_TRUE(observer_.recoveries.empty()) << "no generation formed yet";
  Settle();
  EXPECT_EQ(observer_.recoveries, Causes{"heartbeat_timeout"});
  Settle();
  EXPECT_EQ(observer_.recoveries.size(), 1u) << "one recovery per loss";
}

TEST_F(ObservedCoordinatorTest, ClosedStreamIsDisconnectedAndPeerReportIsPeerFailure) {
  auto a = JoinOk("n0", 0), b = JoinOk("n1", 0), c = JoinOk("n2", 0);
  Settle();
  ASSERT_TRUE(c_->WatchOpened(b).ok());
  c_->WatchClosed(b);
  clock_.Advance(milliseconds(opts_.disconnect_grace_ms + 1));
  c_->Tick();
  EXPECT_EQ(observer_.evictions, Causes{"disconnected"});
  Settle();
  v1::PeerFailureReport r;
  r.set_member_id(a);
  r.set_generation(c_->CurrentGeneration()->number());
  r.set_failed_member_id(c);
  auto resp = c_->ReportPeerFailure(r);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_TRUE(resp->evicted());
  EXPECT_EQ(observer_.evictions, (Causes{"disconnected", "peer_failure"}));
  Settle();
  EXPECT_EQ(observer_.recoveries, (Causes{"disconnected", "peer_failure"}));
}

TEST_F(ObservedCoordinatorTest, RestartedProcessIsAWorkerRestartNotAnEviction) {
  JoinOk("n0", 0);
  JoinOk("n0", 1);
  Settle();
  JoinOk("n0", 1, "i2");  // the same slot, a new process
  Settle();
  EXPECT_TRUE(observer_.evictions.empty());
  EXPECT_EQ(observer_.recoveries, Causes{"worker_restart"});
}

TEST_F(ObservedCoordinatorTest, CommittedCheckpointReportsItsBytes) {
  auto a = JoinOk("n0", 0), b = JoinOk("n0", 1);
  Settle();
  ASSERT_TRUE(WriteAndAckCheckpoint({a, b}, c_->CurrentGeneration()->number(), 0));
  EXPECT_EQ(observer_.committed_bytes, std::vector<int64_t>{20});
  EXPECT_EQ(observer_.aborted, 0);
}

TEST_F(ObservedCoordinatorTest, PrometheusCountersFollowTheObserverCalls) {
  prometheus::Registry registry;
  CoordinatorMetrics metrics(registry);
  metrics.OnEviction("peer_failure");
  metrics.OnEviction("peer_failure");
  metrics.OnRecovery("worker_restart");
  metrics.OnCheckpointCommitted(1234);
  const std::string text = prometheus::TextSerializer().Serialize(registry.Collect());
  EXPECT_NE(text.find("retort_coordinator_evictions_total{cause=\"peer_failure\"} 2"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("retort_coordinator_evictions_total{cause=\"heartbeat_timeout\"} 0"),
            std::string::npos);
  EXPECT_NE(text.find("retort_coordinator_recoveries_total{cause=\"worker_restart\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("retort_coordinator_checkpoint_bytes_total 1234"), std::string::npos);
  EXPECT_NE(text.find("retort_coordinator_checkpoints_committed_total 1"), std::string::npos);
  // Scrape-time gauges from the status.
  auto families = MakeStatusCollector(c_.get())->Collect();
  const std::string status = prometheus::TextSerializer().Serialize(families);
  EXPECT_NE(status.find("retort_coordinator_members 0"), std::string::npos) << status;
  EXPECT_NE(status.find("retort_coordinator_job_total_steps 100"), std::string::npos) << status;
}

TEST_F(ObservedCoordinatorTest, TraceWindowReachesMembersAndPastStepsAreRefused) {
  auto a = JoinOk("n0", 0);
  Settle();
  HeartbeatAtStep(a, 10, 0.1);
  v1::TraceRequest req;
  req.set_first_step(11);
  req.set_last_step(20);
  auto refused = c_->RequestTrace(req);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("11:20"), std::string::npos) << refused.status();
  req.set_first_step(5);
  req.set_last_step(4);
  EXPECT_EQ(c_->RequestTrace(req).status().code(), StatusCode::kInvalidArgument);
  req.set_first_step(30);
  req.set_last_step(2000);
  EXPECT_EQ(c_->RequestTrace(req).status().code(), StatusCode::kInvalidArgument);
  req.set_last_step(40);
  ASSERT_TRUE(c_->RequestTrace(req).ok());
  const v1::Directives d = HeartbeatAtStep(a, 11, 0.1);
  EXPECT_EQ(d.trace_first_step(), 30);
  EXPECT_EQ(d.trace_last_step(), 40);
}

}  // namespace
}  // namespace retort::coordinator

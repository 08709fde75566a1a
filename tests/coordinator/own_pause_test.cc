// The coordinator's own pauses (SIGSTOP, a throttled pod, a migrated VM): a gap in its ticks
// gives every member the paused time back before heartbeats are judged, so it evicts nobody
// for its own stall; members that were already silent before the pause are still evicted.
// Also: where checkpoints go (the flag, the job spec's checkpoint.dir, the default).
#include <gtest/gtest.h>

#include <filesystem>

#include "coordinator/own_pause_detector.h"
#include "tests/coordinator/coordinator_fixture.h"

namespace retort::coordinator {
namespace {

using std::chrono::milliseconds;
using TimePoint = OwnPauseDetector::TimePoint;

TEST(OwnPauseDetectorTest, OrdinaryTicksAreNoPauseAndAGapCountsBeyondOneTick) {
  OwnPauseDetector d(milliseconds(50), milliseconds(1000));
  TimePoint t{std::chrono::seconds(100)};
  EXPECT_EQ(d.Observe(t).count(), 0) << "the first tick has nothing to compare with";
  for (int i = 0; i < 10; ++i) EXPECT_EQ(d.Observe(t += milliseconds(60)).count(), 0);
  EXPECT_EQ(d.Observe(t += milliseconds(1000)).count(), 0) << "at the threshold: no pause";
  EXPECT_EQ(d.Observe(t += milliseconds(12000)), milliseconds(11950));
  EXPECT_EQ(d.Observe(t += milliseconds(50)).count(), 0) << "only the gap's own tick counts";
  EXPECT_EQ(d.Observe(t - milliseconds(5)).count(), 0) << "a clock going back is no pause";
}

TEST(OwnPauseDetectorTest, ThresholdZeroIsOff) {
  OwnPauseDetector d(milliseconds(50), milliseconds(0));
  TimePoint t{std::chrono::seconds(1)};
  d.Observe(t);
  EXPECT_EQ(d.Observe(t + std::chrono::hours(1)).count(), 0);
}

class OwnPauseCoordinatorTest : public CoordinatorTest {
 protected:
  void SetUp() override {
    opts_.tick_ms = 50;
    opts_.own_pause_threshold_ms = 1000;
    CoordinatorTest::SetUp();
  }
  // Ticks every tick_ms for `d`, heartbeating `ids` every heartbeat interval.
  void RunFor(milliseconds d, const std::vector<std::string>& ids) {
    for (milliseconds t{0}; t < d; t += milliseconds(opts_.tick_ms)) {
      clock_.Advance(milliseconds(opts_.tick_ms));
      if (t.count() % opts_.heartbeat_interval_ms == 0) HeartbeatAll(ids);
      c_->Tick();
    }
  }
};

TEST_F(OwnPauseCoordinatorTest, TwelveSecondsOfItsOwnPauseEvictNobody) {
  auto a = JoinOk("n0", 0), b = JoinOk("n0", 1), c = JoinOk("n1", 0);
  Settle();
  ASSERT_EQ(listener_.seen.size(), 1u);
  RunFor(milliseconds(3000), {a, b, c});
  // SIGSTOP for 12 s (6x the 2 s eviction timeout): no tick, no heartbeat read.
  clock_.Advance(milliseconds(12000));
  c_->Tick();
  EXPECT_EQ(c_->GetStatus().members_size(), 3) << "the coordinator blamed its members";
  // After SIGCONT their heartbeats (queued meanwhile) arrive: all stay, no new generation.
  RunFor(milliseconds(3000), {a, b, c});
  EXPECT_EQ(c_->GetStatus().members_size(), 3);
  EXPECT_EQ(listener_.seen.size(), 1u) << "a pause of the coordinator must not re-form";
}

TEST_F(OwnPauseCoordinatorTest, TheSameJumpEvictsEveryoneWhenDetectionIsOff) {
  // The test above can fail: with detection off the same 12 s evict all three.
  opts_.own_pause_threshold_ms = 0;
  Restart(TestJob());
  auto a = JoinOk("n0", 0), b = JoinOk("n0", 1), c = JoinOk("n1", 0);
  Settle();
  RunFor(milliseconds(3000), {a, b, c});
  clock_.Advance(milliseconds(12000));
  c_->Tick();
  EXPECT_EQ(c_->GetStatus().members_size(), 0);
}

TEST_F(OwnPauseCoordinatorTest, AMemberSilentBeforeThePauseIsStillEvictedAfterIt) {
  auto a = JoinOk("n0", 0), b = JoinOk("n1", 0);
  Settle();
  RunFor(milliseconds(1000), {a, b});
  RunFor(milliseconds(1500), {a});  // b goes silent 1.5 s before the pause (timeout 2 s)
  clock_.Advance(milliseconds(12000));
  c_->Tick();
  EXPECT_EQ(c_->GetStatus().members_size(), 2) << "b had 0.5 s left when the pause began";
  RunFor(milliseconds(1000), {a});  // b's remaining time runs out, counted from the resume
  Settle();
  ASSERT_EQ(c_->GetStatus().members_size(), 1);
  EXPECT_EQ(c_->GetStatus().members(0).member_id(), a);
}

TEST_F(OwnPauseCoordinatorTest, AStreamLostBeforeThePauseKeepsOnlyItsRemainingGrace) {
  auto a = JoinOk("n0", 0), b = JoinOk("n1", 0);
  Settle();
  ASSERT_TRUE(c_->WatchOpened(a).ok());
  ASSERT_TRUE(c_->WatchOpened(b).ok());
  RunFor(milliseconds(500), {a, b});
  c_->WatchClosed(b);
  clock_.Advance(milliseconds(5000));  // paused right after b's stream closed
  c_->Tick();
  EXPECT_EQ(c_->GetStatus().members_size(), 2) << "the grace must not run out in the pause";
  RunFor(milliseconds(opts_.disconnect_grace_ms + 100), {a});  // b's process is gone
  Settle();
  EXPECT_EQ(c_->GetStatus().members_size(), 1) << "its process is gone: evicted after the grace";
}

TEST_F(OwnPauseCoordinatorTest, APauseIsAnEvent) {
  struct Events : EventListener {
    void OnEvent(const v1::Event& e) override { kinds.push_back(e.kind()); }
    std::vector<std::string> kinds;
  } events;
  c_->SubscribeEvents(&events);
  auto a = JoinOk("n0", 0);
  Settle();
  RunFor(milliseconds(500), {a});
  clock_.Advance(milliseconds(4000));
  c_->Tick();
  c_->UnsubscribeEvents(&events);
  EXPECT_NE(std::find(events.kinds.begin(), events.kinds.end(), "coordinator_paused"),
            events.kinds.end());
}

TEST_F(CoordinatorTest, AThresholdNotLongerThanTheTickIsRefused) {
  opts_.tick_ms = 50;
  opts_.own_pause_threshold_ms = 50;
  auto c = Coordinator::Create(opts_, TestJob(), &clock_);
  ASSERT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("own-pause threshold"), std::string::npos) << c.status();
}

// --- where checkpoints go ---

TEST(ResolveCheckpointDirTest, FlagThenSpecThenStateDir) {
  v1::JobSpec job = TestJob();
  EXPECT_EQ(ResolveCheckpointDir("", job, "/s"), "/s/checkpoints");
  job.mutable_checkpoint()->set_dir("/data/ckpt/");
  EXPECT_EQ(ResolveCheckpointDir("", job, "/s"), "/data/ckpt/");
  EXPECT_EQ(ResolveCheckpointDir("/flag/dir", job, "/s"), "/flag/dir");
  job.mutable_checkpoint()->set_dir("relative/ckpt");
  EXPECT_EQ(ResolveCheckpointDir("", job, "/s"),
            (std::filesystem::current_path() / "relative/ckpt").string())
      << "workers open the paths handed out: absolute";
}

TEST_F(CoordinatorTest, TheJobSpecsCheckpointDirIsUsedWithoutTheFlag) {
  v1::JobSpec job = TestJob();
  job.mutable_checkpoint()->set_dir(dir_ + "/from-spec");
  opts_.state_dir = dir_ + "/state-spec";
  Restart(job);
  auto a = JoinOk("n0", 0);
  Settle();
  ASSERT_TRUE(WriteAndAckCheckpoint({a}, 1, 5));
  EXPECT_TRUE(std::filesystem::is_directory(dir_ + "/from-spec"));
  v1::GetCheckpointRequest get;
  get.set_member_id(a);
  auto got = c_->GetCheckpoint(get);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->dir().rfind(dir_ + "/from-spec/", 0), 0u) << got->dir();
  // A restart without --job (the spec from state.json) keeps using it.
  Restart(std::nullopt);
  get.set_member_id(JoinOk("n0", 0, "i2"));
  got = c_->GetCheckpoint(get);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->dir().rfind(dir_ + "/from-spec/", 0), 0u) << got->dir();
}

TEST_F(CoordinatorTest, TheFlagOverridesTheJobSpecsCheckpointDir) {
  v1::JobSpec job = TestJob();
  job.mutable_checkpoint()->set_dir(dir_ + "/from-spec");
  opts_.state_dir = dir_ + "/state-flag";
  opts_.checkpoint_dir = dir_ + "/from-flag";
  Restart(job);
  auto a = JoinOk("n0", 0);
  Settle();
  ASSERT_TRUE(WriteAndAckCheckpoint({a}, 1, 5));
  EXPECT_TRUE(std::filesystem::is_directory(dir_ + "/from-flag"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/from-spec"));
}

}  // namespace
}  // namespace retort::coordinator

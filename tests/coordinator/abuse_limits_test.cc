// The coordinator against hostile members, with a fake clock: stale heartbeats, forged
// peer-failure reports, key-value and stream quotas, join floods. Every refusal must leave the
// membership, the generation and the stored state as they were.
#include <gtest/gtest.h>

#include <limits>

#include "coordinator/coordinator.h"
#include "coordinator/refusal_log.h"
#include "tests/coordinator/coordinator_fixture.h"

namespace retort::coordinator {
namespace {

using std::chrono::milliseconds;

class AbuseLimitsTest : public CoordinatorTest {
 protected:
  // Joins `n` members on distinct nodes and forms a generation; returns their ids by rank.
  std::vector<std::string> FormWorld(int n) {
    for (int i = 0; i < n; ++i) JoinOk("n" + std::to_string(i), 0);
    Settle();
    std::vector<std::string> by_rank(static_cast<size_t>(n));
    const auto& g = *listener_.seen.back();
    EXPECT_EQ(g.members_size(), n);
    for (const auto& m : g.members()) by_rank[static_cast<size_t>(m.rank())] = m.member_id();
    return by_rank;
  }
  uint64_t Gen() const { return listener_.seen.back()->number(); }
  StatusOr<v1::PeerFailureResponse> Report(const std::string& reporter, const std::string& target) {
    v1::PeerFailureReport r;
    r.set_member_id(reporter);
    r.set_generation(Gen());
    r.set_failed_member_id(target);
    r.set_detail("connection reset");
    return c_->ReportPeerFailure(r);
  }
  Status Put(const std::string& member, const std::string& key, size_t bytes) {
    v1::KvPutRequest put;
    put.set_member_id(member);
    put.set_generation(Gen());
    put.set_key(key);
    put.set_value(std::string(bytes, 'v'));
    return c_->KvPut(put);
  }
  bool IsMember(const std::string& id) {
    const v1::StatusResponse status = c_->GetStatus();
    for (const auto& m : status.members())
      if (m.member_id() == id) return true;
    return false;
  }
};

TEST_F(AbuseLimitsTest, StaleOrUnknownGenerationHeartbeatIsAbortedAndKeepsNobodyAlive) {
  auto ids = FormWorld(1);
  const std::string a = ids[0];
  v1::HeartbeatRequest hb;
  hb.set_member_id(a);
  hb.set_generation(Gen());
  ASSERT_TRUE(c_->Heartbeat(hb).ok());
  hb.set_generation(Gen() - 1);
  auto stale = c_->Heartbeat(hb);
  EXPECT_EQ(stale.status().code(), StatusCode::kAborted);
  EXPECT_NE(stale.status().message().find("stale"), std::string::npos) << stale.status();
  hb.set_generation(Gen() + 5);
  EXPECT_EQ(c_->Heartbeat(hb).status().code(), StatusCode::kAborted);
  // Only refused heartbeats from here on: the member is evicted on time, as if silent.
  clock_.Advance(milliseconds(opts_.eviction_timeout_ms - 100));
  hb.set_generation(0);
  EXPECT_EQ(c_->Heartbeat(hb).status().code(), StatusCode::kAborted);
  c_->Tick();
  EXPECT_TRUE(IsMember(a));
  clock_.Advance(milliseconds(200));
  c_->Tick();
  EXPECT_FALSE(IsMember(a)) << "a stale heartbeat must not count as a sign of life";
}

TEST_F(AbuseLimitsTest, ReportByOrAboutAMemberOutsideTheGenerationIsRefused) {
  auto ids = FormWorld(2);
  const std::string late = JoinOk("late", 0);  // joined, not yet in a generation
  EXPECT_EQ(Report(late, ids[0]).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Report(ids[0], late).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(c_->GetStatus().members_size(), 3) << "refusals change nothing";
}

TEST_F(AbuseLimitsTest, AReporterEvictsAtMostOnePeerPerGeneration) {
  auto ids = FormWorld(5);
  // 0 reports 2 (evicted), then 4, which is no ring neighbour of 2: refused all the same.
  auto first = Report(ids[0], ids[2]);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->evicted());
  auto second = Report(ids[0], ids[4]);
  EXPECT_EQ(second.status().code(), StatusCode::kResourceExhausted) << second.status();
  EXPECT_TRUE(IsMember(ids[4]));
  EXPECT_EQ(c_->GetStatus().members_size(), 4);
}

TEST_F(AbuseLimitsTest, ReportsAreRateLimitedPerReporter) {
  auto ids = FormWorld(3);
  v1::PeerFailureReport bad;
  bad.set_member_id(ids[0]);
  bad.set_generation(Gen());
  bad.set_failed_rank(99);  // not in the generation: refused, but counts
  for (int i = 0; i < opts_.max_peer_reports_per_window; ++i)
    EXPECT_EQ(c_->ReportPeerFailure(bad).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c_->ReportPeerFailure(bad).status().code(), StatusCode::kResourceExhausted);
  // Another reporter has its own budget; the window ends.
  bad.set_member_id(ids[1]);
  EXPECT_EQ(c_->ReportPeerFailure(bad).status().code(), StatusCode::kInvalidArgument);
  clock_.Advance(milliseconds(opts_.peer_report_window_ms));
  bad.set_member_id(ids[0]);
  EXPECT_EQ(c_->ReportPeerFailure(bad).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c_->GetStatus().members_size(), 3);
}

TEST_F(AbuseLimitsTest, ForgedReportsCannotEvictTheLastInMemoryCopyOfTheState) {
  auto ids = FormWorld(4);  // ring 0-1-2-3-0; rank r holds its range and r-1's
  for (const auto& id : ids) HeartbeatAtStep(id, 10, 0.1);
  ASSERT_TRUE(Report(ids[3], ids[1])->evicted());
  // Ranks 0 and 2 now hold the only copies of ranges 0 and 1: one report cannot evict them,
  // not even in the next generation.
  Settle();
  ASSERT_EQ(listener_.seen.back()->members_size(), 3);
  auto refused = Report(ids[3], ids[2]);
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_TRUE(IsMember(ids[2]));
  EXPECT_EQ(Report(ids[3], ids[2]).status().code(), StatusCode::kFailedPrecondition)
      << "the same reporter twice is still one reporter";
  EXPECT_TRUE(IsMember(ids[2]));
  // A second member's report corroborates it (a real failure seen by two data planes).
  auto corroborated = Report(ids[0], ids[2]);
  ASSERT_TRUE(corroborated.ok()) << corroborated.status();
  EXPECT_TRUE(corroborated->evicted());
}

TEST_F(AbuseLimitsTest, ProtectionEndsOnceTheNextGenerationTrainedAndReplicated) {
  auto ids = FormWorld(4);
  for (const auto& id : ids) HeartbeatAtStep(id, 10, 0.1);
  ASSERT_TRUE(Report(ids[3], ids[1])->evicted());
  Settle();
  EXPECT_EQ(Report(ids[3], ids[2]).status().code(), StatusCode::kFailedPrecondition);
  // The survivors train two more steps in the new generation: replicas exist again.
  for (const auto& id : {ids[0], ids[2], ids[3]}) HeartbeatAtStep(id, 12, 0.1);
  auto now_ok = Report(ids[0], ids[2]);
  ASSERT_TRUE(now_ok.ok()) << now_ok.status();
  EXPECT_TRUE(now_ok->evicted());
}

TEST_F(AbuseLimitsTest, KeyValueStoreIsBoundedPerMemberAndInTotalAndClearedWithItsGeneration) {
  opts_.max_kv_bytes_per_member = 1000;
  opts_.max_kv_bytes_total = 2500;
  opts_.max_kv_value_bytes = 600;
  Restart(TestJob());
  auto ids = FormWorld(4);
  ASSERT_TRUE(Put(ids[0], "a", 500).ok());
  ASSERT_TRUE(Put(ids[0], "a", 599).ok()) << "overwriting its own key costs the difference";
  auto over = Put(ids[0], "b", 500);
  EXPECT_EQ(over.code(), StatusCode::kResourceExhausted) << over;
  ASSERT_TRUE(Put(ids[1], "c", 599).ok());
  ASSERT_TRUE(Put(ids[2], "d", 599).ok());
  ASSERT_TRUE(Put(ids[3], "e", 599).ok());
  auto total = Put(ids[3], "f", 300);
  EXPECT_EQ(total.code(), StatusCode::kResourceExhausted) << total;
  EXPECT_NE(total.message().find("the store"), std::string::npos) << total;
  v1::KvGetRequest get;
  get.set_member_id(ids[1]);
  get.set_generation(Gen());
  get.set_key("b");
  EXPECT_FALSE(c_->KvGet(get)->found()) << "a refused put stores nothing";
  // Not in the generation: no access at all.
  const std::string late = JoinOk("late", 0);
  EXPECT_EQ(Put(late, "x", 1).code(), StatusCode::kFailedPrecondition);
  get.set_member_id(late);
  EXPECT_EQ(c_->KvGet(get).status().code(), StatusCode::kFailedPrecondition);
  // The next generation starts empty, quotas included.
  Settle();
  ASSERT_TRUE(Put(ids[0], "b", 599).ok());
  get.set_member_id(ids[0]);
  get.set_generation(Gen());
  get.set_key("a");
  EXPECT_FALSE(c_->KvGet(get)->found());
}

TEST_F(AbuseLimitsTest, GenerationStreamsAreBoundedPerMemberAndForNonMembers) {
  auto ids = FormWorld(1);
  for (int i = 0; i < opts_.max_generation_streams_per_member; ++i)
    ASSERT_TRUE(c_->WatchOpened(ids[0]).ok());
  EXPECT_EQ(c_->WatchOpened(ids[0]).status().code(), StatusCode::kResourceExhausted);
  const int others = c_->GetStatus().max_workers() + kStreamMargin;
  for (int i = 0; i < others; ++i) {
    auto kind = c_->WatchOpened("");
    ASSERT_TRUE(kind.ok());
    EXPECT_EQ(*kind, Coordinator::WatchKind::kOther);
  }
  EXPECT_EQ(c_->WatchOpened("w99-1").status().code(), StatusCode::kResourceExhausted);
  c_->WatchClosed("", Coordinator::WatchKind::kOther);
  EXPECT_TRUE(c_->WatchOpened("w99-1").ok()) << "a closed stream frees its place";
}

TEST_F(AbuseLimitsTest, JoinNamingALiveMembersNodeAndRankDoesNotReplaceIt) {
  const std::string a = JoinOk("n0", 0, "inc-a");
  ASSERT_TRUE(c_->WatchOpened(a).ok());
  auto forged = c_->Join(Identity("n0", 0, "inc-forged"));
  EXPECT_EQ(forged.status().code(), StatusCode::kAlreadyExists) << forged.status();
  EXPECT_TRUE(IsMember(a));
  EXPECT_EQ(c_->GetStatus().members_size(), 1);
  // Its process is gone (stream closed): a new incarnation replaces it at once.
  c_->WatchClosed(a);
  auto restarted = c_->Join(Identity("n0", 0, "inc-b"));
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  EXPECT_FALSE(IsMember(a));
}

TEST_F(AbuseLimitsTest, JoinFloodIsResourceExhaustedAndMembershipStaysBounded) {
  Restart(TestJob(1, 8));
  int refused = 0;
  for (int i = 0; i < 10000; ++i) {
    auto r = c_->Join(Identity("flood" + std::to_string(i), 0));
    if (!r.ok()) {
      ASSERT_EQ(r.status().code(), StatusCode::kResourceExhausted) << r.status();
      ++refused;
    }
  }
  EXPECT_EQ(refused, 10000 - 8);
  EXPECT_EQ(c_->GetStatus().members_size(), 8);
}

// Found by tests/fuzz (fuzz_coordinator): a step time of 1e-300 s made the checkpoint margin
// 2.5 s / 1e-300 s = inf steps, converted to int64 (undefined behaviour; UBSan stopped there).
TEST_F(AbuseLimitsTest, TinyReportedStepTimeKeepsTheCheckpointMarginBounded) {
  auto ids = FormWorld(1);
  v1::HeartbeatRequest hb;
  hb.set_member_id(ids[0]);
  hb.set_generation(Gen());
  hb.set_step(5);
  hb.mutable_metrics()->set_step_seconds(1e-300);
  ASSERT_TRUE(c_->Heartbeat(hb).ok());
  auto ckpt = c_->RequestCheckpoint();
  ASSERT_EQ(ckpt.status().code(), StatusCode::kFailedPrecondition) << ckpt.status();
  EXPECT_NE(ckpt.status().message().find("need 1000000000 steps of notice"), std::string::npos)
      << ckpt.status();
}

// Found by tests/fuzz (fuzz_coordinator): a heartbeat at step 2^63 - 1 overflowed the next
// periodic checkpoint's step ((step / every + 1) * every). Steps beyond 2^53 are refused and
// change nothing; so is such a BeginCheckpoint.
TEST_F(AbuseLimitsTest, StepBeyondTwoToThe53IsRefused) {
  v1::JobSpec job = TestJob();
  job.mutable_checkpoint()->set_every_steps(20);
  opts_.state_dir = dir_ + "/every-20";  // another spec is another job: its own state dir
  Restart(job);
  auto ids = FormWorld(1);
  v1::HeartbeatRequest hb;
  hb.set_member_id(ids[0]);
  hb.set_generation(Gen());
  hb.set_step(std::numeric_limits<int64_t>::max());
  auto r = c_->Heartbeat(hb);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status();
  hb.set_step(3);
  hb.set_epoch(kMaxReportedStep + 1);
  EXPECT_EQ(c_->Heartbeat(hb).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c_->GetStatus().step(), 0) << "a refused heartbeat records no step";
  v1::BeginCheckpointRequest begin;
  begin.set_member_id(ids[0]);
  begin.set_generation(Gen());
  begin.set_step(std::numeric_limits<int64_t>::max() - 19);
  EXPECT_EQ(c_->BeginCheckpoint(begin).status().code(), StatusCode::kInvalidArgument);
  hb.set_epoch(0);
  hb.set_step(kMaxReportedStep);
  EXPECT_TRUE(c_->Heartbeat(hb).ok()) << "2^53 itself is a step";
}

TEST(RefusalLogTest, LogsAtMostItsRatePerSecondAndCountsTheRest) {
  RefusalLog log;
  for (int i = 0; i < 100; ++i) log.Refused("Heartbeat", "ipv4:127.0.0.1:1", "forged");
  EXPECT_EQ(log.logged(), RefusalLog::kPerSecond);
  EXPECT_EQ(log.suppressed(), 100 - RefusalLog::kPerSecond);
}

}  // namespace
}  // namespace retort::coordinator

// Coordinator domain logic with a fake clock: generations, evictions, fencing, bad input.
#include "coordinator/coordinator.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/file_util.h"
#include "tests/coordinator/coordinator_fixture.h"

namespace retort::coordinator {
namespace {

using std::chrono::milliseconds;

TEST_F(CoordinatorTest, JoinsSettleIntoOneGenerationWithNodeMajorRanksAndPlan) {
  JoinOk("n1", 0);
  JoinOk("n0", 1);
  JoinOk("n0", 0);
  c_->Tick();
  EXPECT_TRUE(listener_.seen.empty()) << "must wait for membership to settle";
  Settle();
  ASSERT_EQ(listener_.seen.size(), 1u);
  const auto& g = *listener_.seen.back();
  EXPECT_EQ(g.number(), 1u);
  ASSERT_EQ(g.members_size(), 3);
  EXPECT_EQ(g.members(0).identity().node(), "n0");
  EXPECT_EQ(g.members(0).identity().local_rank(), 0);
  EXPECT_EQ(g.members(2).identity().node(), "n1");
  EXPECT_EQ(g.nodes_size(), 2);
  EXPECT_EQ(g.plan().total_elements(), 10000);
  EXPECT_EQ(g.plan().ranges_size(), 3);
  EXPECT_EQ(g.state(), v1::JOB_STATE_RUNNING);
}

TEST_F(CoordinatorTest, SilentMemberIsEvictedAfterDeadlineAndNewGenerationForms) {
  auto a = JoinOk("n0", 0), b = JoinOk("n0", 1), c = JoinOk("n1", 0);
  Settle();
  ASSERT_EQ(listener_.seen.size(), 1u);
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(milliseconds(900));
    HeartbeatAll({a, c});  // b is silent
    c_->Tick();
  }
  // 2.7 s of silence > 2 s timeout: b is gone and a 2-member generation has formed.
  Settle();
  ASSERT_EQ(listener_.seen.size(), 2u);
  EXPECT_EQ(listener_.seen.back()->number(), 2u);
  EXPECT_EQ(listener_.seen.back()->members_size(), 2);
  v1::HeartbeatRequest hb;
  hb.set_member_id(b);
  EXPECT_EQ(c_->Heartbeat(hb).status().code(), StatusCode::kNotFound);
}

TEST_F(CoordinatorTest, MemberWhoseGenerationStreamClosedIsEvictedAfterTheGrace) {
  auto a = JoinOk("n0", 0), b = JoinOk("n1", 0);
  Settle();
  ASSERT_EQ(listener_.seen.size(), 1u);
  ASSERT_TRUE(c_->WatchOpened(a).ok());
  ASSERT_TRUE(c_->WatchOpened(b).ok());
  // b's stream drops but a new one opens within the grace (a reconnect): b stays.
  c_->WatchClosed(b);
  clock_.Advance(milliseconds(opts_.disconnect_grace_ms / 2));
  ASSERT_TRUE(c_->WatchOpened(b).ok());
  clock_.Advance(milliseconds(opts_.disconnect_grace_ms));
  c_->Tick();
  Settle();
  EXPECT_EQ(listener_.seen.size(), 1u) << "a reopened stream must not evict";
  // Now b's process is gone: its stream closes for good, long before a heartbeat deadline.
  c_->WatchClosed(b);
  clock_.Advance(milliseconds(opts_.disconnect_grace_ms - 1));
  c_->Tick();
  EXPECT_EQ(c_->GetStatus().members_size(), 2) << "still inside the grace";
  clock_.Advance(milliseconds(2));
  c_->Tick();
  Settle();
  ASSERT_EQ(listener_.seen.size(), 2u);
  EXPECT_EQ(listener_.seen.back()->members_size(), 1);
  EXPECT_EQ(listener_.seen.back()->members(0).member_id(), a);
  // Unknown ids are ignored.
  c_->WatchClosed("nobody");
  EXPECT_EQ(*c_->WatchOpened("nobody"), Coordinator::WatchKind::kOther);
}

TEST_F(CoordinatorTest, DuplicateJoinIsRefusedAndChangesNothing) {
  JoinOk("n0", 0, "inc-a");
  Settle();
  auto before = c_->GetStatus();
  auto dup = c_->Join(Identity("n0", 0, "inc-a"));
  EXPECT_EQ(dup.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(dup.status().message().find("duplicate join"), std::string::npos);
  Settle();
  auto after = c_->GetStatus();
  EXPECT_EQ(after.members_size(), before.members_size());
  EXPECT_EQ(after.generation(), before.generation());
}

TEST_F(CoordinatorTest, NewIncarnationReplacesTheOldMember) {
  auto old_id = JoinOk("n0", 0, "inc-a");
  auto new_id = JoinOk("n0", 0, "inc-b");
  EXPECT_NE(old_id, new_id);
  Settle();
  ASSERT_EQ(listener_.seen.back()->members_size(), 1);
  EXPECT_EQ(listener_.seen.back()->members(0).member_id(), new_id);
}

TEST_F(CoordinatorTest, BadIdentitiesAreInvalidArgument) {
  auto bad_node = Identity("bad node!", 0);
  EXPECT_EQ(c_->Join(bad_node).status().code(), StatusCode::kInvalidArgument);
  auto long_node = Identity(std::string(300, 'a'), 0);
  EXPECT_EQ(c_->Join(long_node).status().code(), StatusCode::kInvalidArgument);
  auto neg_rank = Identity("n0", -1);
  EXPECT_EQ(c_->Join(neg_rank).status().code(), StatusCode::kInvalidArgument);
  auto no_inc = Identity("n0", 0, "");
  EXPECT_EQ(c_->Join(no_inc).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c_->GetStatus().members_size(), 0);
}

TEST_F(CoordinatorTest, ParameterCountMismatchIsFailedPrecondition) {
  JoinOk("n0", 0);
  auto r = Identity("n0", 1);
  r.set_parameter_count(999);
  auto resp = c_->Join(r);
  EXPECT_EQ(resp.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(resp.status().message().find("999"), std::string::npos);
}

TEST_F(CoordinatorTest, StaleGenerationIsFencedOnKvAndPeerReports) {
  auto a = JoinOk("n0", 0), b = JoinOk("n0", 1);
  Settle();
  uint64_t g1 = listener_.seen.back()->number();
  v1::KvPutRequest put;
  put.set_member_id(a);
  put.set_generation(g1);
  put.set_key("ucx/0");
  put.set_value("addr");
  ASSERT_TRUE(c_->KvPut(put).ok());
  v1::KvGetRequest get;
  get.set_member_id(b);
  get.set_generation(g1);
  get.set_key("ucx/0");
  auto got = c_->KvGet(get);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->found());
  EXPECT_EQ(got->value(), "addr");

  JoinOk("n1", 0);
  Settle();
  uint64_t g2 = listener_.seen.back()->number();
  ASSERT_GT(g2, g1);
  auto stale_put = c_->KvPut(put);
  EXPECT_EQ(stale_put.code(), StatusCode::kAborted);
  EXPECT_NE(stale_put.message().find("stale"), std::string::npos);
  EXPECT_EQ(c_->KvGet(get).status().code(), StatusCode::kAborted);
  get.set_generation(g2);
  auto fresh = c_->KvGet(get);
  ASSERT_TRUE(fresh.ok());
  EXPECT_FALSE(fresh->found()) << "key-value state is per generation";

  v1::PeerFailureReport report;
  report.set_member_id(a);
  report.set_generation(g1);
  report.set_failed_member_id(b);
  EXPECT_EQ(c_->ReportPeerFailure(report).status().code(), StatusCode::kAborted);
  EXPECT_EQ(c_->GetStatus().members_size(), 3) << "a stale report must not evict";
  report.set_generation(g2);
  auto ok = c_->ReportPeerFailure(report);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(ok->evicted());
  EXPECT_EQ(c_->GetStatus().members_size(), 2);
}

TEST_F(CoordinatorTest, UnknownMemberIsNotFoundAndOversizedValueRejected) {
  v1::HeartbeatRequest hb;
  hb.set_member_id("w9-99");
  EXPECT_EQ(c_->Heartbeat(hb).status().code(), StatusCode::kNotFound);
  v1::DrainRequest d;
  d.set_member_id("w9-99");
  EXPECT_EQ(c_->Drain(d).status().code(), StatusCode::kNotFound);
  auto a = JoinOk("n0", 0);
  Settle();
  v1::KvPutRequest put;
  put.set_member_id(a);
  put.set_generation(listener_.seen.back()->number());
  put.set_key("k");
  put.set_value(std::string(opts_.max_kv_value_bytes + 1, 'x'));
  EXPECT_EQ(c_->KvPut(put).code(), StatusCode::kInvalidArgument);
}

TEST_F(CoordinatorTest, MaxWorkersBoundsJoinsAndScaleDrainsExcess) {
  Restart(std::nullopt);
  ASSERT_TRUE(c_->Scale([] {
                  v1::ScaleRequest r;
                  r.set_max_workers(2);
                  return r;
                }())
                  .ok());
  auto a = JoinOk("n0", 0), b = JoinOk("n0", 1);
  EXPECT_EQ(c_->Join(Identity("n0", 2)).status().code(), StatusCode::kResourceExhausted);
  Settle();
  v1::ScaleRequest bad;
  bad.set_min_workers(3);
  bad.set_max_workers(2);
  EXPECT_EQ(c_->Scale(bad).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c_->GetStatus().max_workers(), 2) << "a refused scale changes nothing";
  v1::ScaleRequest down;
  down.set_max_workers(1);
  ASSERT_TRUE(c_->Scale(down).ok());
  v1::HeartbeatRequest hb;
  hb.set_member_id(b);
  auto resp = c_->Heartbeat(hb);
  ASSERT_TRUE(resp.ok());
  EXPECT_TRUE(resp->directives().leave()) << "the highest rank is drained";
  hb.set_member_id(a);
  EXPECT_FALSE(c_->Heartbeat(hb)->directives().leave());
}

TEST_F(CoordinatorTest, FirstReportedParameterCountFixesThePlanAndMismatchesAreRefused) {
  Restart(std::nullopt);
  auto r = Identity("n0", 0);
  r.set_parameter_count(0);  // a worker that learns its model size only after joining
  auto joined = c_->Join(r);
  ASSERT_TRUE(joined.ok());
  Settle();
  ASSERT_EQ(listener_.seen.back()->plan().total_elements(), 0);
  uint64_t first = listener_.seen.back()->number();
  v1::HeartbeatRequest hb;
  hb.set_member_id(joined->member_id());
  hb.set_parameter_count(4242);
  ASSERT_TRUE(c_->Heartbeat(hb).ok());
  Settle();
  EXPECT_GT(listener_.seen.back()->number(), first);
  EXPECT_EQ(listener_.seen.back()->plan().total_elements(), 4242);
  hb.set_parameter_count(99);
  auto bad = c_->Heartbeat(hb);
  EXPECT_EQ(bad.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(listener_.seen.back()->plan().total_elements(), 4242) << "a mismatch changes nothing";
}

TEST_F(CoordinatorTest, BelowMinWorkersTheJobWaits) {
  ASSERT_TRUE(c_->Scale([] {
                  v1::ScaleRequest r;
                  r.set_min_workers(2);
                  return r;
                }())
                  .ok());
  auto a = JoinOk("n0", 0);
  Settle();
  EXPECT_EQ(listener_.seen.back()->state(), v1::JOB_STATE_WAITING);
  v1::HeartbeatRequest hb;
  hb.set_member_id(a);
  EXPECT_TRUE(c_->Heartbeat(hb)->directives().paused());
  JoinOk("n0", 1);
  Settle();
  EXPECT_EQ(listener_.seen.back()->state(), v1::JOB_STATE_RUNNING);
  EXPECT_FALSE(c_->Heartbeat(hb)->directives().paused());
}

TEST_F(CoordinatorTest, PauseResumeAndStopLifecycle) {
  auto a = JoinOk("n0", 0);
  Settle();
  EXPECT_EQ(c_->Resume().status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(c_->Pause().ok());
  v1::HeartbeatRequest hb;
  hb.set_member_id(a);
  EXPECT_TRUE(c_->Heartbeat(hb)->directives().paused());
  ASSERT_TRUE(c_->Resume().ok());
  EXPECT_FALSE(c_->Heartbeat(hb)->directives().paused());
  ASSERT_TRUE(c_->Stop(v1::StopRequest()).ok());
  EXPECT_TRUE(c_->Heartbeat(hb)->directives().leave());
  EXPECT_FALSE(c_->Finished());
  auto late = c_->Join(Identity("n1", 0));
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(late->ended_state(), v1::JOB_STATE_STOPPING) << "a stopping job takes no members";
  EXPECT_EQ(late->member_id(), "");
  v1::LeaveRequest leave;
  leave.set_member_id(a);
  ASSERT_TRUE(c_->Leave(leave).ok());
  EXPECT_TRUE(c_->Finished());
  EXPECT_EQ(c_->GetStatus().state(), v1::JOB_STATE_STOPPED);
}

TEST_F(CoordinatorTest, AGenerationFormedWhilePausedIsFormedAgainRunningOnResume) {
  // Paused, then scaled down: the generation without the drained member forms paused, and
  // workers start only a running generation. Resuming must give them one.
  auto a = JoinOk("n0", 0), b = JoinOk("n0", 1);
  Settle();
  ASSERT_EQ(listener_.seen.back()->state(), v1::JOB_STATE_RUNNING);
  ASSERT_TRUE(c_->Pause().ok());
  v1::LeaveRequest leave;
  leave.set_member_id(b);
  ASSERT_TRUE(c_->Leave(leave).ok());
  Settle();
  const uint64_t paused = listener_.seen.back()->number();
  ASSERT_EQ(listener_.seen.back()->state(), v1::JOB_STATE_PAUSED);
  ASSERT_EQ(listener_.seen.back()->members_size(), 1);
  ASSERT_TRUE(c_->Resume().ok());
  Settle();
  ASSERT_GT(listener_.seen.back()->number(), paused);
  EXPECT_EQ(listener_.seen.back()->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(listener_.seen.back()->members(0).member_id(), a);

  // Paused and resumed without a membership change: the running generation goes on.
  const uint64_t running = listener_.seen.back()->number();
  ASSERT_TRUE(c_->Pause().ok());
  ASSERT_TRUE(c_->Resume().ok());
  Settle();
  EXPECT_EQ(listener_.seen.back()->number(), running);
}

// Completion is a typed field of the Leave, not a reason text a member could happen to write.
TEST_F(CoordinatorTest, OnlyTheJobCompletedFlagCompletesTheJob) {
  const std::string a = JoinOk("n0", 0), b = JoinOk("n0", 1);
  Settle();
  ASSERT_EQ(c_->GetStatus().state(), v1::JOB_STATE_RUNNING);
  v1::LeaveRequest leave;
  leave.set_member_id(a);
  leave.set_reason("completed");
  ASSERT_TRUE(c_->Leave(leave).ok());
  EXPECT_NE(c_->GetStatus().state(), v1::JOB_STATE_COMPLETED) << "a reason text completed the job";
  leave.set_member_id(b);
  leave.set_reason("finished the last step");
  leave.set_job_completed(true);
  ASSERT_TRUE(c_->Leave(leave).ok());
  EXPECT_EQ(c_->GetStatus().state(), v1::JOB_STATE_COMPLETED);
  EXPECT_TRUE(c_->Finished());
}

TEST_F(CoordinatorTest, GenerationNumbersSurviveRestartAndGrow) {
  JoinOk("n0", 0);
  Settle();
  JoinOk("n0", 1);
  Settle();
  uint64_t before = listener_.seen.back()->number();
  ASSERT_EQ(before, 2u);
  Restart(std::nullopt);  // resumes from state dir without a job spec
  auto id = JoinOk("n0", 0);
  EXPECT_EQ(id.rfind("w2-", 0), 0u) << "member ids carry the boot count: " << id;
  JoinOk("n0", 1);  // the previous generation is back: no re-join grace to wait out
  Settle();
  EXPECT_GT(listener_.seen.back()->number(), before);
}

TEST_F(CoordinatorTest, CorruptStateFileRefusesToStartAndIsKept) {
  c_->UnsubscribeGenerations(&listener_);
  c_.reset();
  std::string path = opts_.state_dir + "/state.json";
  ASSERT_TRUE(WriteFileAtomically(path, "{\"generation\": \"not a number\"").ok());
  auto c = Coordinator::Create(opts_, TestJob(), &clock_);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(c.status().message().find("state.json"), std::string::npos);
  EXPECT_EQ(*ReadFileToString(path), "{\"generation\": \"not a number\"")
      << "the corrupt file must be left alone";
}

// Found by tests/fuzz (fuzz_state_store): a state file with a negative parameter count parsed,
// and every generation formed on it had a plan of negative ranges.
TEST_F(CoordinatorTest, StateFileWithANegativeParameterCountIsCorrupt) {
  c_->UnsubscribeGenerations(&listener_);
  c_.reset();
  const std::string path = opts_.state_dir + "/state.json";
  const std::string text = R"({"job": {"name": "test-job"}, "parameter_count": "-5"})";
  ASSERT_TRUE(WriteFileAtomically(path, text).ok());
  auto c = Coordinator::Create(opts_, std::nullopt, &clock_);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(c.status().message().find("parameter_count -5"), std::string::npos) << c.status();
  EXPECT_EQ(*ReadFileToString(path), text) << "the corrupt file must be left alone";
}

// A state file is checked as what it holds was checked when first written: a job spec edited
// into something ParseJobSpec would refuse, or a parameter count no member may report.
TEST_F(CoordinatorTest, StateFileWithAnInvalidJobSpecOrParameterCountIsRefusedAndKept) {
  JoinOk("n0", 0);
  c_->UnsubscribeGenerations(&listener_);
  c_.reset();
  const std::string path = opts_.state_dir + "/state.json";
  const std::string good = *ReadFileToString(path);
  struct Case {
    std::string from, to, words;
  };
  const Case cases[] = {
      {"\"steps\": \"100\"", "\"steps\": \"-3\"", "steps"},
      {"\"min_workers\": 1,", "\"min_workers\": 0,", "min_workers"},
      {"\"parameter_count\": \"10000\"", "\"parameter_count\": \"1099511627777\"",
       "parameter_count 1099511627777"},
  };
  for (const auto& k : cases) {
    const size_t at = good.find(k.from);
    ASSERT_NE(at, std::string::npos) << k.from << " not in " << good;
    std::string bad = good;
    bad.replace(at, k.from.size(), k.to);
    ASSERT_TRUE(WriteFileAtomically(path, bad).ok());
    auto c = Coordinator::Create(opts_, std::nullopt, &clock_);
    ASSERT_FALSE(c.ok()) << k.to;
    EXPECT_EQ(c.status().code(), StatusCode::kDataLoss) << c.status();
    EXPECT_NE(c.status().message().find(k.words), std::string::npos) << c.status();
    EXPECT_EQ(*ReadFileToString(path), bad) << "the refused file must be left alone";
  }
  ASSERT_TRUE(WriteFileAtomically(path, good).ok());
  EXPECT_TRUE(Coordinator::Create(opts_, std::nullopt, &clock_).ok()) << "the original restores";
}

TEST_F(CoordinatorTest, ParameterCountBeyondTheLimitIsRefusedAndNotAdopted) {
  v1::JoinRequest r = Identity("n0", 0, "i0");
  r.set_parameter_count(kMaxParameterCount + 1);
  auto resp = c_->Join(r);
  EXPECT_EQ(resp.status().code(), StatusCode::kInvalidArgument) << resp.status();
  r.set_parameter_count(kMaxParameterCount);
  resp = c_->Join(r);
  ASSERT_TRUE(resp.ok()) << "the limit itself is allowed: " << resp.status();
}

TEST_F(CoordinatorTest, DifferentJobInStateDirIsRefused) {
  c_->UnsubscribeGenerations(&listener_);
  c_.reset();
  auto other = TestJob();
  other.set_name("other-job");
  auto c = Coordinator::Create(opts_, other, &clock_);
  // A changed spec is a usage error (exit 2, the same on every try) naming what changed.
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << c.status();
  EXPECT_NE(c.status().message().find("other-job"), std::string::npos) << c.status();
}

TEST_F(CoordinatorTest, CheckpointCommitsManifestAfterAllAcksAndKeepsLastK) {
  auto a = JoinOk("n0", 0), b = JoinOk("n0", 1);
  Settle();
  uint64_t gen = listener_.seen.back()->number();
  for (int round = 0; round < 3; ++round) {
    auto req = c_->RequestCheckpoint();
    ASSERT_TRUE(req.ok()) << req.status();
    v1::BeginCheckpointRequest begin;
    begin.set_member_id(a);
    begin.set_generation(gen);
    begin.set_step(req->step());
    auto b_resp = c_->BeginCheckpoint(begin);
    ASSERT_TRUE(b_resp.ok()) << b_resp.status();
    ASSERT_TRUE(MakeDirectories(b_resp->dir()).ok());
    for (const auto& [member, file] : {std::pair{a, "shard-0.bin"}, std::pair{b, "shard-1.bin"}}) {
      ASSERT_TRUE(WriteFileAtomically(b_resp->dir() + "/" + file, "0123456789").ok());
      v1::AckCheckpointRequest ack;
      ack.set_member_id(member);
      ack.set_generation(gen);
      ack.set_checkpoint_id(req->checkpoint_id());
      auto* f = ack.add_files();
      f->set_path(file);
      f->set_size_bytes(10);
      auto resp = c_->AckCheckpoint(ack);
      ASSERT_TRUE(resp.ok()) << resp.status();
      EXPECT_EQ(resp->committed(), member == b) << "committed only after the last ack";
    }
  }
  auto status = c_->GetStatus();
  EXPECT_EQ(status.last_checkpoint_id(), 3u);
  v1::GetCheckpointRequest get;
  get.set_member_id(a);
  auto manifest = c_->GetCheckpoint(get);
  ASSERT_TRUE(manifest.ok());
  ASSERT_TRUE(manifest->found());
  EXPECT_EQ(manifest->manifest().files_size(), 2);
  EXPECT_EQ(manifest->manifest().world_size(), 2);
  EXPECT_FALSE(PathExists(opts_.state_dir + "/checkpoints/ckpt-00000001"))
      << "keep=2 drops the oldest";
  EXPECT_TRUE(PathExists(opts_.state_dir + "/checkpoints/ckpt-00000002/MANIFEST.json"));
}

TEST_F(CoordinatorTest, CheckpointRequestedTooCloseToTheEndIsRefusedNotScheduledPastIt) {
  auto a = JoinOk("n0", 0);
  Settle();
  // 0.25 s steps and 500 ms heartbeats: members need 2.5 * 0.5 / 0.25 = 5 steps of notice.
  HeartbeatAtStep(a, 96, 0.25);
  auto late = c_->RequestCheckpoint();
  ASSERT_FALSE(late.ok()) << "scheduled at step " << late->step() << " of a 100-step job";
  EXPECT_EQ(late.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(late.status().message().find("ends at step 100"), std::string::npos) << late.status();
  EXPECT_NE(late.status().message().find("at step 96"), std::string::npos) << late.status();

  HeartbeatAtStep(a, 95, 0.25);
  auto in_time = c_->RequestCheckpoint();
  ASSERT_TRUE(in_time.ok()) << in_time.status();
  EXPECT_EQ(in_time->step(), 100) << "the last step is a step boundary like any other";
}

TEST_F(CoordinatorTest, CheckpointAckWithMissingFileDoesNotCommit) {
  auto a = JoinOk("n0", 0);
  Settle();
  auto req = c_->RequestCheckpoint();
  ASSERT_TRUE(req.ok());
  v1::AckCheckpointRequest ack;
  ack.set_member_id(a);
  ack.set_generation(listener_.seen.back()->number());
  ack.set_checkpoint_id(req->checkpoint_id());
  auto* f = ack.add_files();
  f->set_path("missing.bin");
  f->set_size_bytes(10);
  EXPECT_EQ(c_->AckCheckpoint(ack).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(c_->GetStatus().last_checkpoint_id(), 0u);
  // A late acknowledgement of the aborted checkpoint is answered "not committed" (not refused)
  // and commits nothing.
  f->set_path("../escape");
  auto late = c_->AckCheckpoint(ack);
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_FALSE(late->committed());
  EXPECT_EQ(c_->GetStatus().last_checkpoint_id(), 0u);
  // An id never handed out, or a generation not yet formed, is still refused.
  ack.set_checkpoint_id(req->checkpoint_id() + 7);
  EXPECT_EQ(c_->AckCheckpoint(ack).status().code(), StatusCode::kFailedPrecondition);
  ack.set_checkpoint_id(req->checkpoint_id());
  ack.set_generation(listener_.seen.back()->number() + 1);
  EXPECT_EQ(c_->AckCheckpoint(ack).status().code(), StatusCode::kAborted);
}

TEST_F(CoordinatorTest, GetCheckpointReportsItsDirectoryAndTheCommittedIds) {
  auto a = JoinOk("n0", 0), b = JoinOk("n0", 1);
  Settle();
  uint64_t gen = listener_.seen.back()->number();
  v1::GetCheckpointRequest get;
  get.set_member_id(a);
  auto none = c_->GetCheckpoint(get);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->found());
  EXPECT_TRUE(none->dir().empty());
  EXPECT_EQ(none->committed_checkpoints_size(), 0);
  for (int64_t step : {10, 20, 30}) ASSERT_TRUE(WriteAndAckCheckpoint({a, b}, gen, step));

  auto latest = c_->GetCheckpoint(get);
  ASSERT_TRUE(latest.ok()) << latest.status();
  ASSERT_TRUE(latest->found());
  EXPECT_EQ(latest->manifest().checkpoint_id(), 3u);
  EXPECT_EQ(latest->manifest().step(), 30);
  EXPECT_EQ(latest->dir(), opts_.state_dir + "/checkpoints/ckpt-00000003");
  EXPECT_EQ(latest->dir()[0], '/') << "absolute";
  EXPECT_TRUE(PathExists(latest->dir() + "/" + latest->manifest().files(0).path()));
  EXPECT_EQ(std::vector<uint64_t>(latest->committed_checkpoints().begin(),
                                  latest->committed_checkpoints().end()),
            (std::vector<uint64_t>{2, 3}))
      << "keep=2, oldest first";

  get.set_checkpoint_id(2);
  auto older = c_->GetCheckpoint(get);
  ASSERT_TRUE(older.ok() && older->found()) << older.status();
  EXPECT_EQ(older->manifest().step(), 20);
  EXPECT_EQ(older->dir(), opts_.state_dir + "/checkpoints/ckpt-00000002");
  get.set_checkpoint_id(1);
  auto dropped = c_->GetCheckpoint(get);
  ASSERT_TRUE(dropped.ok());
  EXPECT_FALSE(dropped->found()) << "checkpoint 1 was deleted by keep=2";
  EXPECT_EQ(dropped->committed_checkpoints_size(), 2);
}

TEST_F(CoordinatorTest, PeriodicCheckpointsAreNamedAheadOfTheMembers) {
  v1::JobSpec job = TestJob();
  job.mutable_checkpoint()->set_every_steps(10);
  opts_.state_dir = dir_ + "/periodic";
  Restart(job);
  auto a = JoinOk("n0", 0), b = JoinOk("n0", 1);
  Settle();
  uint64_t gen = listener_.seen.back()->number();
  // 1 s per step against 0.5 s heartbeats: the margin is 2 steps, so a checkpoint is named
  // once the fastest member is within 4 steps of the next multiple of 10.
  EXPECT_EQ(HeartbeatAtStep(a, 3, 1.0).checkpoint_id(), 0u);
  EXPECT_EQ(HeartbeatAtStep(b, 5, 1.0).checkpoint_id(), 0u) << "6 steps away: not yet";
  v1::Directives d = HeartbeatAtStep(b, 6, 1.0);
  ASSERT_NE(d.checkpoint_id(), 0u) << "4 steps away: named";
  EXPECT_EQ(d.checkpoint_step(), 10);
  EXPECT_EQ(HeartbeatAtStep(a, 7, 1.0).checkpoint_step(), 10) << "every member hears of it";
  ASSERT_TRUE(WriteAndAckCheckpoint({a, b}, gen, 10));
  EXPECT_EQ(c_->GetStatus().last_checkpoint_step(), 10);

  EXPECT_EQ(HeartbeatAtStep(a, 12, 1.0).checkpoint_id(), 0u);
  // Members jumped to 29 (e.g. slow heartbeats): step 30 is still named (members begin every
  // multiple on their own as well, so none depends on hearing of it in time).
  d = HeartbeatAtStep(a, 29, 1.0);
  ASSERT_NE(d.checkpoint_id(), 0u);
  EXPECT_EQ(d.checkpoint_step(), 30);
  ASSERT_TRUE(WriteAndAckCheckpoint({a, b}, gen, 30));

  // A paused job names none.
  ASSERT_TRUE(c_->Pause().ok());
  EXPECT_EQ(HeartbeatAtStep(a, 37, 1.0).checkpoint_id(), 0u);
  ASSERT_TRUE(c_->Resume().ok());
  d = HeartbeatAtStep(a, 37, 1.0);
  EXPECT_EQ(d.checkpoint_step(), 40);
}

TEST_F(CoordinatorTest, EveryMultipleGetsACheckpointWhenTheMarginExceedsTheInterval) {
  // 0.05 s steps against 0.5 s heartbeats: a 25-step margin, longer than every_steps = 10.
  // Rounding the next checkpoint up to the first multiple a margin ahead skipped 50 and 60.
  v1::JobSpec job = TestJob();
  job.mutable_checkpoint()->set_every_steps(10);
  opts_.state_dir = dir_ + "/periodic-fast";
  Restart(job);
  auto a = JoinOk("n0", 0), b = JoinOk("n0", 1);
  Settle();
  uint64_t gen = listener_.seen.back()->number();
  std::vector<int64_t> committed;
  int64_t step = 1;
  for (int round = 0; round < 6 && step < 100; ++round) {
    v1::Directives d = HeartbeatAtStep(a, step, 0.05);
    HeartbeatAtStep(b, step, 0.05);
    ASSERT_NE(d.checkpoint_id(), 0u) << "at step " << step;
    ASSERT_TRUE(WriteAndAckCheckpoint({a, b}, gen, d.checkpoint_step()));
    committed.push_back(d.checkpoint_step());
    step = d.checkpoint_step() + 1;  // the commit lands a step after the checkpoint
  }
  EXPECT_EQ(committed, (std::vector<int64_t>{10, 20, 30, 40, 50, 60}));
}

TEST_F(CoordinatorTest, MembersBeginAPeriodicCheckpointNobodyNamed) {
  v1::JobSpec job = TestJob();
  job.mutable_checkpoint()->set_every_steps(10);
  opts_.state_dir = dir_ + "/periodic-begun";
  Restart(job);
  auto a = JoinOk("n0", 0), b = JoinOk("n0", 1);
  Settle();
  uint64_t gen = listener_.seen.back()->number();
  // No heartbeat reported progress (the coordinator was away): the members begin step 20.
  ASSERT_TRUE(WriteAndAckCheckpoint({a, b}, gen, 20));
  EXPECT_EQ(c_->GetStatus().last_checkpoint_step(), 20);
  EXPECT_EQ(HeartbeatAtStep(a, 21, 1.0).checkpoint_id(), 0u) << "30 is 9 steps away";
  EXPECT_EQ(HeartbeatAtStep(a, 26, 1.0).checkpoint_step(), 30);
}

TEST_F(CoordinatorTest, FailedPeriodicCheckpointIsNotRetriedAtTheSameStep) {
  v1::JobSpec job = TestJob();
  job.mutable_checkpoint()->set_every_steps(10);
  opts_.state_dir = dir_ + "/periodic-fail";
  Restart(job);
  auto a = JoinOk("n0", 0);
  Settle();
  v1::Directives d = HeartbeatAtStep(a, 7, 1.0);
  ASSERT_NE(d.checkpoint_id(), 0u);
  ASSERT_EQ(d.checkpoint_step(), 10);
  v1::AckCheckpointRequest ack;
  ack.set_member_id(a);
  ack.set_generation(listener_.seen.back()->number());
  ack.set_checkpoint_id(d.checkpoint_id());
  ack.set_error("write shard: No space left on device");
  ASSERT_TRUE(c_->AckCheckpoint(ack).ok());
  EXPECT_EQ(HeartbeatAtStep(a, 7, 1.0).checkpoint_id(), 0u) << "step 10 failed once: skip it";
  d = HeartbeatAtStep(a, 16, 1.0);
  EXPECT_EQ(d.checkpoint_step(), 20);
  EXPECT_GT(d.checkpoint_id(), ack.checkpoint_id());
}

// Checkpoints that fail (a full disk) speak up: status carries how many failed, how many in a
// row and the last error; a commit resets the run; max_consecutive_failures in a row pause a
// running job (nothing is lost: members keep their state), and resume goes on.
TEST_F(CoordinatorTest, FailingCheckpointsShowInStatusAndPauseTheJobAfterTheLimit) {
  v1::JobSpec job = TestJob();
  job.mutable_checkpoint()->set_every_steps(10);
  job.mutable_checkpoint()->set_max_consecutive_failures(2);
  opts_.state_dir = dir_ + "/failing-checkpoints";
  Restart(job);
  auto a = JoinOk("n0", 0);
  Settle();
  const uint64_t gen = listener_.seen.back()->number();
  auto fail_at = [&](int64_t step) {
    v1::Directives d = HeartbeatAtStep(a, step - 3, 1.0);
    ASSERT_EQ(d.checkpoint_step(), step);
    v1::AckCheckpointRequest ack;
    ack.set_member_id(a);
    ack.set_generation(gen);
    ack.set_checkpoint_id(d.checkpoint_id());
    ack.set_error("write " + dir_ + "/shard: No space left on device (errno 28)");
    ASSERT_TRUE(c_->AckCheckpoint(ack).ok());
  };
  EXPECT_FALSE(c_->GetStatus().has_checkpoint_health()) << "nothing failed yet";
  ASSERT_NO_FATAL_FAILURE(fail_at(10));
  v1::StatusResponse s = c_->GetStatus();
  EXPECT_EQ(s.checkpoint_health().failures_total(), 1);
  EXPECT_EQ(s.checkpoint_health().consecutive_failures(), 1);
  EXPECT_EQ(s.checkpoint_health().last_failure_step(), 10);
  EXPECT_NE(s.checkpoint_health().last_failure().find("No space left on device"), std::string::npos)
      << s.checkpoint_health().last_failure();
  EXPECT_GT(s.checkpoint_health().last_failure_unix_ms(), 0);
  EXPECT_EQ(s.state(), v1::JOB_STATE_RUNNING) << "one failure is below the limit of 2";
  // A member reaching step 10 only now does not retry the failed checkpoint there.
  v1::BeginCheckpointRequest late;
  late.set_member_id(a);
  late.set_generation(gen);
  late.set_step(10);
  auto begun = c_->BeginCheckpoint(late);
  EXPECT_EQ(begun.status().code(), StatusCode::kAborted) << begun.status();
  EXPECT_EQ(c_->GetStatus().checkpoint_health().failures_total(), 1);

  // A commit in between resets the run of failures (not the total).
  v1::Directives d = HeartbeatAtStep(a, 17, 1.0);
  ASSERT_EQ(d.checkpoint_step(), 20);
  ASSERT_TRUE(WriteAndAckCheckpoint({a}, gen, 20));
  s = c_->GetStatus();
  EXPECT_EQ(s.checkpoint_health().failures_total(), 1);
  EXPECT_EQ(s.checkpoint_health().consecutive_failures(), 0);

  ASSERT_NO_FATAL_FAILURE(fail_at(30));
  EXPECT_EQ(c_->GetStatus().state(), v1::JOB_STATE_RUNNING);
  ASSERT_NO_FATAL_FAILURE(fail_at(40));
  s = c_->GetStatus();
  EXPECT_EQ(s.checkpoint_health().consecutive_failures(), 2);
  EXPECT_EQ(s.checkpoint_health().failures_total(), 3);
  EXPECT_EQ(s.state(), v1::JOB_STATE_PAUSED) << "two failures in a row reach the limit";
  EXPECT_EQ(s.members_size(), 1) << "pausing keeps the members";
  ASSERT_TRUE(c_->Resume().ok());
  EXPECT_EQ(c_->GetStatus().state(), v1::JOB_STATE_RUNNING);
}

// A checkpoint dropped because the membership changed is not a failure of the checkpoint.
TEST_F(CoordinatorTest, ACheckpointDroppedByAMembershipChangeIsNoFailure) {
  v1::JobSpec job = TestJob();
  job.mutable_checkpoint()->set_every_steps(10);
  opts_.state_dir = dir_ + "/dropped-checkpoint";
  Restart(job);
  auto a = JoinOk("n0", 0);
  Settle();
  ASSERT_NE(HeartbeatAtStep(a, 7, 1.0).checkpoint_id(), 0u);
  JoinOk("n1", 0);  // a new member: a new generation drops the pending checkpoint
  Settle();
  EXPECT_EQ(c_->GetStatus().checkpoint_health().failures_total(), 0);
}

// Evaluations during training come in heartbeats: status keeps the newest and the best; a
// malformed one is refused with the heartbeat (and changes nothing).
TEST_F(CoordinatorTest, StatusKeepsTheNewestAndTheBestEvaluation) {
  auto a = JoinOk("n0", 0);
  Settle();
  EXPECT_FALSE(c_->GetStatus().has_last_evaluation());
  auto report = [&](int64_t step, double top1) {
    v1::HeartbeatRequest hb;
    hb.set_member_id(a);
    hb.set_generation(listener_.seen.back()->number());
    hb.set_step(step);
    auto* e = hb.mutable_evaluation();
    e->set_step(step);
    e->set_samples(1000);
    e->set_top1(top1);
    e->set_top5(std::min(1.0, top1 + 0.2));
    return c_->Heartbeat(hb).status();
  };
  ASSERT_TRUE(report(10, 0.5).ok());
  ASSERT_TRUE(report(20, 0.7).ok());
  ASSERT_TRUE(report(20, 0.7).ok());  // every heartbeat repeats the latest
  ASSERT_TRUE(report(30, 0.6).ok());
  v1::StatusResponse s = c_->GetStatus();
  EXPECT_EQ(s.last_evaluation().step(), 30);
  EXPECT_DOUBLE_EQ(s.last_evaluation().top1(), 0.6);
  EXPECT_EQ(s.best_evaluation().step(), 20);
  EXPECT_DOUBLE_EQ(s.best_evaluation().top1(), 0.7);
  EXPECT_EQ(report(40, 1.5).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(report(40, std::nan("")).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c_->GetStatus().last_evaluation().step(), 30);
}

TEST_F(CoordinatorTest, NoPeriodicCheckpointsWithoutEverySteps) {
  auto a = JoinOk("n0", 0);
  Settle();
  for (int64_t step : {1, 5, 10, 100, 1000})
    EXPECT_EQ(HeartbeatAtStep(a, step, 1.0).checkpoint_id(), 0u) << step;
}

}  // namespace
}  // namespace retort::coordinator

namespace retort::coordinator {
namespace {

// The readiness signal's source: a ranked member whose heartbeats keep coming but whose step
// stays put past the deadline (a hung collective) is named; progress clears it; a paused job
// stalls nobody.
TEST_F(CoordinatorTest, StalledMembersNamesAWorkerWhoseStepDoesNotAdvance) {
  const std::string a = JoinOk("n1", 0);
  const std::string b = JoinOk("n2", 0);
  Settle();
  ASSERT_EQ(c_->GetStatus().state(), v1::JOB_STATE_RUNNING);
  HeartbeatAtStep(a, 1, 0.1);
  HeartbeatAtStep(b, 1, 0.1);
  const auto deadline = std::chrono::milliseconds(2000);
  EXPECT_TRUE(c_->StalledMembers(deadline).empty());
  clock_.Advance(std::chrono::milliseconds(1500));
  HeartbeatAtStep(a, 5, 0.1);
  HeartbeatAtStep(b, 1, 0.1);  // alive, but no step
  EXPECT_TRUE(c_->StalledMembers(deadline).empty()) << "not yet past the deadline";
  clock_.Advance(std::chrono::milliseconds(1000));
  HeartbeatAtStep(a, 9, 0.1);
  HeartbeatAtStep(b, 1, 0.1);
  auto stalled = c_->StalledMembers(deadline);
  ASSERT_EQ(stalled.size(), 1u);
  EXPECT_EQ(stalled[0], b + " (n2/0) at step 1");
  HeartbeatAtStep(b, 2, 0.1);
  EXPECT_TRUE(c_->StalledMembers(deadline).empty()) << "b advanced";
  clock_.Advance(std::chrono::milliseconds(5000));
  ASSERT_TRUE(c_->Pause().ok());
  EXPECT_TRUE(c_->StalledMembers(deadline).empty()) << "a paused job stalls nobody";
}

// A job spec that differs from the one the job started with is refused with a message naming
// the changed fields (a ConfigMap edited under a running job); the same spec, or none, resumes.
TEST_F(CoordinatorTest, AChangedJobSpecIsRefusedNamingTheChangeAndTheSameSpecResumes) {
  JoinOk("n1", 0);
  Settle();
  v1::JobSpec changed = TestJob();
  changed.set_steps(250);
  c_.reset();
  auto refused = Coordinator::Create(opts_, changed, &clock_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("steps"), std::string::npos) << refused.status();
  EXPECT_NE(refused.status().message().find("250"), std::string::npos) << refused.status();
  v1::JobSpec renamed = TestJob();
  renamed.set_name("another-job");
  auto refused_name = Coordinator::Create(opts_, renamed, &clock_);
  ASSERT_FALSE(refused_name.ok());
  EXPECT_EQ(refused_name.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused_name.status().message().find("another-job"), std::string::npos);
  Restart(TestJob());     // the same spec
  Restart(std::nullopt);  // the stored spec
  EXPECT_EQ(c_->GetStatus().total_steps(), 100);
}

}  // namespace
}  // namespace retort::coordinator

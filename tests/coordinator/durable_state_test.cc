// The coordinator's durable state across restarts: waiting for the previous generation's
// members, falling back from unusable checkpoints, cleaning checkpoint debris, persisting with
// backoff on a full disk, and a job that completed while the coordinator was away.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>

#include "common/file_util.h"
#include "tests/coordinator/coordinator_fixture.h"

namespace retort::coordinator {
namespace {

using std::chrono::milliseconds;

// Fails every write with `error` while failing is set; counts attempts.
class FaultyStateWriter : public StateFileWriter {
 public:
  Status WriteAtomically(const std::string& path, const std::string& contents) override {
    ++attempts;
    if (failing.load())
      return ResourceExhaustedError("write " + path + ": No space left on device");
    return DefaultStateFileWriter()->WriteAtomically(path, contents);
  }
  std::atomic<bool> failing{false};
  std::atomic<int> attempts{0};
};

int CountOccurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class DurableStateTest : public CoordinatorTest {
 protected:
  // Three members on n0 form one generation; returns their ids.
  std::vector<std::string> FormThree() {
    std::vector<std::string> ids = {JoinOk("n0", 0), JoinOk("n0", 1), JoinOk("n0", 2)};
    Settle();
    EXPECT_EQ(listener_.seen.back()->members_size(), 3);
    return ids;
  }
  std::string CheckpointDir(uint64_t id) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "/ckpt-%08llu", static_cast<unsigned long long>(id));
    return opts_.state_dir + "/checkpoints" + buf;
  }
  // Commits checkpoints at steps 10, 20, 30 (keep = 3); returns their ids, oldest first.
  std::vector<uint64_t> CommitThree() {
    v1::JobSpec job = TestJob();
    job.mutable_checkpoint()->set_keep(3);
    opts_.state_dir = dir_ + "/keep3";
    Restart(job);
    auto a = JoinOk("n0", 0), b = JoinOk("n0", 1);
    Settle();
    uint64_t gen = listener_.seen.back()->number();
    for (int64_t step : {10, 20, 30}) EXPECT_TRUE(WriteAndAckCheckpoint({a, b}, gen, step));
    v1::GetCheckpointRequest get;
    get.set_member_id(a);
    auto got = c_->GetCheckpoint(get);
    EXPECT_TRUE(got.ok());
    return std::vector<uint64_t>(got->committed_checkpoints().begin(),
                                 got->committed_checkpoints().end());
  }
  StatusOr<std::unique_ptr<Coordinator>> CreateAgain() {
    c_->UnsubscribeGenerations(&listener_);
    c_.reset();
    return Coordinator::Create(opts_, std::nullopt, &clock_);
  }
};

TEST_F(DurableStateTest, RestartWaitsForThePreviousGenerationUntilAllAreBack) {
  FormThree();
  Restart(std::nullopt);
  auto first = JoinOk("n0", 0);
  for (int i = 0; i < 15; ++i) {  // 1.5 s of ticks, well past the settle time
    HeartbeatAll({first});
    Settle();
  }
  EXPECT_TRUE(listener_.seen.empty()) << "a lone first re-joiner must not form a generation";
  auto status = c_->GetStatus();
  EXPECT_EQ(
      std::vector<std::string>(status.awaiting_rejoin().begin(), status.awaiting_rejoin().end()),
      (std::vector<std::string>{"n0/1", "n0/2"}));
  JoinOk("n0", 2);
  JoinOk("n0", 1);
  Settle();
  ASSERT_EQ(listener_.seen.size(), 1u) << "all back: the wait ends early";
  EXPECT_EQ(listener_.seen.back()->members_size(), 3);
  EXPECT_EQ(c_->GetStatus().awaiting_rejoin_size(), 0);
}

TEST_F(DurableStateTest, RejoinGraceEndsAndTheMembersPresentGoOn) {
  opts_.rejoin_grace_ms = 3000;
  FormThree();
  Restart(std::nullopt);
  auto back = JoinOk("n0", 1);
  for (int i = 0; i < 29; ++i) {  // 2.9 s, heartbeating
    clock_.Advance(milliseconds(100));
    HeartbeatAll({back});
    c_->Tick();
  }
  EXPECT_TRUE(listener_.seen.empty());
  clock_.Advance(milliseconds(200));
  HeartbeatAll({back});
  c_->Tick();
  Settle();
  ASSERT_EQ(listener_.seen.size(), 1u) << "the grace is bounded";
  EXPECT_EQ(listener_.seen.back()->members_size(), 1);
}

TEST_F(DurableStateTest, GenerationsCarryIncarnationsSoWorkersRecogniseReJoinedProcesses) {
  JoinOk("n0", 0, "proc-a");
  Settle();
  ASSERT_EQ(listener_.seen.back()->members(0).identity().incarnation(), "proc-a");
}

TEST_F(DurableStateTest, NoMemberBackAfterTheGraceIsWaitingNotRunning) {
  opts_.rejoin_grace_ms = 1000;
  FormThree();
  ASSERT_EQ(c_->GetStatus().state(), v1::JOB_STATE_RUNNING);
  Restart(std::nullopt);
  clock_.Advance(milliseconds(1001));
  c_->Tick();
  EXPECT_EQ(c_->GetStatus().state(), v1::JOB_STATE_WAITING);
}

TEST_F(DurableStateTest, CompletionReportedByAMemberOfThePreviousRunFinishesTheJob) {
  auto ids = FormThree();
  Restart(std::nullopt);  // the workers completed while the coordinator was down
  v1::LeaveRequest leave;
  leave.set_member_id(ids[0]);
  leave.set_reason("completed");
  leave.set_job_completed(true);
  ASSERT_TRUE(c_->Leave(leave).ok());
  EXPECT_EQ(c_->GetStatus().state(), v1::JOB_STATE_COMPLETED);
  EXPECT_TRUE(c_->Finished());
  // Anything else from an unknown member is still NOT_FOUND.
  leave.set_member_id("w7-1");
  EXPECT_EQ(c_->Leave(leave).code(), StatusCode::kNotFound) << "not a previous run's member";
  leave.set_member_id(ids[1]);
  leave.set_reason("drained");
  leave.set_job_completed(false);
  EXPECT_EQ(c_->Leave(leave).code(), StatusCode::kNotFound);
}

TEST_F(DurableStateTest, MissingNewestManifestFallsBackToThePreviousCheckpoint) {
  auto ids = CommitThree();
  ASSERT_EQ(ids.size(), 3u);
  std::filesystem::remove(CheckpointDir(ids[2]) + "/MANIFEST.json");
  Restart(std::nullopt);
  EXPECT_EQ(c_->GetStatus().last_checkpoint_id(), ids[1]);
  EXPECT_EQ(c_->GetStatus().last_checkpoint_step(), 20);
  auto a = JoinOk("n0", 0);
  v1::GetCheckpointRequest get;
  get.set_member_id(a);
  auto got = c_->GetCheckpoint(get);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->found());
  EXPECT_EQ(got->manifest().step(), 20);
}

TEST_F(DurableStateTest, TruncatedNewestManifestFallsBackToThePreviousCheckpoint) {
  auto ids = CommitThree();
  ASSERT_EQ(ids.size(), 3u);
  const std::string manifest = CheckpointDir(ids[2]) + "/MANIFEST.json";
  std::filesystem::resize_file(manifest, 17);
  Restart(std::nullopt);
  EXPECT_EQ(c_->GetStatus().last_checkpoint_step(), 20);
  EXPECT_TRUE(PathExists(manifest)) << "the evidence stays for the operator";
}

TEST_F(DurableStateTest, NoUsableCheckpointRefusesToStartNamingEachUnlessFromScratch) {
  auto ids = CommitThree();
  ASSERT_EQ(ids.size(), 3u);
  std::filesystem::remove(CheckpointDir(ids[0]) + "/MANIFEST.json");
  ASSERT_TRUE(WriteFileAtomically(CheckpointDir(ids[1]) + "/MANIFEST.json", "{\"step\": ").ok());
  std::filesystem::resize_file(CheckpointDir(ids[2]) + "/shard-1.bin", 4);
  auto refused = CreateAgain();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  const std::string& msg = refused.status().message();
  for (uint64_t id : ids)
    EXPECT_NE(msg.find("checkpoint " + std::to_string(id) + ":"), std::string::npos) << msg;
  EXPECT_NE(msg.find("MANIFEST.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("is corrupt"), std::string::npos) << msg;
  EXPECT_NE(msg.find("shard-1.bin is 4 bytes, the manifest says 10"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--restart-from-scratch"), std::string::npos) << msg;

  opts_.restart_from_scratch = true;
  auto fresh = Coordinator::Create(opts_, std::nullopt, &clock_);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ((*fresh)->GetStatus().last_checkpoint_id(), 0u);
  EXPECT_EQ((*fresh)->GetStatus().last_checkpoint_step(), 0);
}

TEST_F(DurableStateTest, UncommittedCheckpointDebrisIsRemovedAtStartAndOnAbort) {
  auto a = JoinOk("n0", 0), b = JoinOk("n0", 1);
  Settle();
  uint64_t gen = listener_.seen.back()->number();
  ASSERT_TRUE(WriteAndAckCheckpoint({a, b}, gen, 10));
  // An aborted checkpoint: one shard and one temp file written, then a member fails.
  auto req = c_->RequestCheckpoint();
  ASSERT_TRUE(req.ok()) << req.status();
  v1::BeginCheckpointRequest begin;
  begin.set_member_id(a);
  begin.set_generation(gen);
  begin.set_step(req->step());
  auto started = c_->BeginCheckpoint(begin);
  ASSERT_TRUE(started.ok());
  ASSERT_TRUE(MakeDirectories(started->dir()).ok());
  ASSERT_TRUE(WriteFileAtomically(started->dir() + "/shard-00000.bin", "partial").ok());
  ASSERT_TRUE(WriteFileAtomically(started->dir() + "/shard-00001.bin.tmp-77", "part").ok());
  v1::AckCheckpointRequest ack;
  ack.set_member_id(b);
  ack.set_generation(gen);
  ack.set_checkpoint_id(started->checkpoint_id());
  ack.set_error("write shard: No space left on device");
  ASSERT_TRUE(c_->AckCheckpoint(ack).ok());
  EXPECT_FALSE(PathExists(started->dir())) << "an aborted checkpoint leaves nothing behind";

  // A killed worker's leftovers: a temp file in the committed checkpoint, a stray directory.
  const std::string committed = CheckpointDir(1);
  ASSERT_TRUE(PathExists(committed + "/MANIFEST.json"));
  ASSERT_TRUE(WriteFileAtomically(committed + "/shard-00000.bin.tmp-123", "x").ok());
  ASSERT_TRUE(MakeDirectories(CheckpointDir(9)).ok());
  ASSERT_TRUE(WriteFileAtomically(CheckpointDir(9) + "/shard-00000.bin", "x").ok());
  Restart(std::nullopt);
  EXPECT_FALSE(PathExists(committed + "/shard-00000.bin.tmp-123"));
  EXPECT_FALSE(PathExists(CheckpointDir(9)));
  EXPECT_TRUE(PathExists(committed + "/MANIFEST.json")) << "the committed checkpoint stays";
  EXPECT_TRUE(PathExists(committed + "/shard-0.bin"));
}

TEST_F(DurableStateTest, DiskFullStateWritesBackOffAndAreLoggedOnce) {
  FaultyStateWriter writer;
  opts_.state_writer = &writer;
  opts_.persist_retry_max_ms = 2000;
  Restart(TestJob());
  JoinOk("n0", 0);
  writer.failing = true;
  writer.attempts = 0;
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 200; ++i) {  // 10 s of 50 ms ticks
    clock_.Advance(milliseconds(50));
    c_->Tick();
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(listener_.seen.empty()) << "no generation is published unpersisted";
  // Backoff 50, 100, ... 2000 ms: about 11 attempts in 10 s, not one per tick.
  EXPECT_GE(writer.attempts.load(), 3);
  EXPECT_LE(writer.attempts.load(), 15);
  EXPECT_EQ(CountOccurrences(log, "cannot persist generation"), 1) << log;
  writer.failing = false;
  for (int i = 0; i < 41 && listener_.seen.empty(); ++i) {
    clock_.Advance(milliseconds(50));
    c_->Tick();
  }
  ASSERT_EQ(listener_.seen.size(), 1u) << "persisted and published once the disk has room";
}

}  // namespace
}  // namespace retort::coordinator

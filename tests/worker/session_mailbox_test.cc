// SessionMailbox: what the agent's threads post and the training thread reads.
#include "worker/session_mailbox.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace retort::worker {
namespace {

using std::chrono::milliseconds;

v1::Member MakeMember(const std::string& id, const std::string& node, int local_rank,
                      const std::string& incarnation) {
  v1::Member m;
  m.set_member_id(id);
  m.mutable_identity()->set_node(node);
  m.mutable_identity()->set_local_rank(local_rank);
  m.mutable_identity()->set_incarnation(incarnation);
  return m;
}

// A running generation `number` planning `elements` over the given members.
v1::Generation MakeGeneration(uint64_t number, int64_t elements,
                              const std::vector<v1::Member>& members) {
  v1::Generation g;
  g.set_number(number);
  g.set_state(v1::JOB_STATE_RUNNING);
  g.mutable_plan()->set_total_elements(elements);
  for (const auto& m : members) *g.add_members() = m;
  return g;
}

TEST(SessionMailboxTest, MemberProcessKeySurvivesANewMemberIdButNotARestart) {
  const v1::Member before = MakeMember("w1-1", "n0", 1, "pid-7");
  const v1::Member rejoined = MakeMember("w2-4", "n0", 1, "pid-7");
  const v1::Member restarted = MakeMember("w2-5", "n0", 1, "pid-9");
  EXPECT_EQ(MemberProcessKey(before), MemberProcessKey(rejoined));
  EXPECT_NE(MemberProcessKey(before), MemberProcessKey(restarted));
  EXPECT_EQ(MemberProcessKey(MakeMember("w1-3", "n0", 0, "")), "w1-3");
}

TEST(SessionMailboxTest, WaitForAssignmentTakesOnlyARunningRankedGenerationOfTheRightSize) {
  SessionMailbox box;
  const v1::Member me = MakeMember("w1-1", "n0", 0, "a");
  v1::Generation waiting = MakeGeneration(2, 100, {me});
  waiting.set_state(v1::JOB_STATE_WAITING);
  box.PostGeneration(waiting, "w1-1", 0);
  bool timed_out = false;
  // A newer generation exists (it waits for workers): progress, so no time-out, but no
  // assignment either; leaving ends the wait.
  std::thread leave([&] {
    std::this_thread::sleep_for(milliseconds(300));
    box.Leave();
  });
  EXPECT_FALSE(box.WaitForAssignment(1, 100, Deadline::AfterMs(50), &timed_out).has_value());
  leave.join();
  EXPECT_FALSE(timed_out);

  SessionMailbox box2;
  box2.PostGeneration(MakeGeneration(3, 99, {me}), "w1-1", 0);  // wrong parameter count
  EXPECT_FALSE(box2.WaitForAssignment(3, 100, Deadline::AfterMs(50), &timed_out).has_value());
  EXPECT_TRUE(timed_out) << "nothing newer than generation 3 was published";
  timed_out = false;
  box2.PostGeneration(MakeGeneration(4, 100, {me}), "w1-1", -1);  // not ranked
  box2.PostGeneration(MakeGeneration(5, 100, {me}), "w1-1", 0);
  auto a = box2.WaitForAssignment(3, 100, Deadline::AfterMs(1000), &timed_out);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->generation.number(), 5u);
  EXPECT_EQ(a->rank, 0);
  EXPECT_FALSE(timed_out);
}

TEST(SessionMailboxTest, APostedGenerationWakesAWaitingTrainingThread) {
  SessionMailbox box;
  const v1::Member me = MakeMember("w1-1", "n0", 0, "a");
  std::thread post([&] {
    std::this_thread::sleep_for(milliseconds(50));
    box.PostGeneration(MakeGeneration(1, 10, {me}), "w1-1", 0);
  });
  bool timed_out = false;
  const auto start = std::chrono::steady_clock::now();
  auto a = box.WaitForAssignment(0, 10, std::nullopt, &timed_out);
  post.join();
  ASSERT_TRUE(a.has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(2000));
}

TEST(SessionMailboxTest, StepBoundaryFlagsAndDirectives) {
  SessionMailbox box;
  const v1::Member me = MakeMember("w1-1", "n0", 0, "a");
  box.PostGeneration(MakeGeneration(4, 10, {me}), "w1-1", 0);
  EXPECT_FALSE(box.AtStepBoundary(4).newer_generation);
  EXPECT_TRUE(box.AtStepBoundary(3).newer_generation);
  EXPECT_TRUE(box.Superseded(3));
  EXPECT_FALSE(box.Superseded(4));

  v1::Directives d;
  d.set_paused(true);
  d.set_checkpoint_id(7);
  d.set_checkpoint_step(120);
  d.set_trace_first_step(30);
  d.set_trace_last_step(40);
  box.PostDirectives(d);
  StepBoundaryFlags f = box.AtStepBoundary(4);
  EXPECT_TRUE(f.paused);
  EXPECT_FALSE(f.leaving);
  EXPECT_EQ(f.trace_first_step, 30);
  EXPECT_EQ(f.trace_last_step, 40);
  EXPECT_EQ(box.pending_checkpoint().id, 7u);
  EXPECT_EQ(box.pending_checkpoint().step, 120);
  // A later heartbeat without a trace window keeps the asked one; pause follows the latest.
  box.PostDirectives(v1::Directives());
  f = box.AtStepBoundary(4);
  EXPECT_FALSE(f.paused);
  EXPECT_EQ(f.trace_last_step, 40);
  EXPECT_EQ(box.pending_checkpoint().id, 0u);
  box.Leave();
  EXPECT_TRUE(box.AtStepBoundary(4).leaving);
  EXPECT_TRUE(box.Superseded(4)) << "a leaving member's generation is obsolete";
}

TEST(SessionMailboxTest, AGenerationWithoutARunningMemberProcessAbortsTheCommunicator) {
  SessionMailbox box;
  const v1::Member a = MakeMember("w1-1", "n0", 0, "a"), b = MakeMember("w1-2", "n1", 0, "b");
  std::vector<std::string> aborts;
  EXPECT_EQ(box.SetRunning(2, {MemberProcessKey(a), MemberProcessKey(b)},
                           [&](const std::string& why) { aborts.push_back(why); }),
            0u);
  // Same processes under new member ids (a coordinator restart): no abort.
  v1::Member a2 = a, b2 = b;
  a2.set_member_id("w2-1");
  b2.set_member_id("w2-2");
  box.PostGeneration(MakeGeneration(3, 10, {a2, b2}), "w2-1", 0);
  EXPECT_TRUE(aborts.empty());
  // An older or equal generation never aborts.
  box.PostGeneration(MakeGeneration(2, 10, {a}), "w1-1", 0);
  EXPECT_TRUE(aborts.empty());
  // b's process is gone.
  box.PostGeneration(MakeGeneration(4, 10, {a2}), "w2-1", 0);
  ASSERT_EQ(aborts.size(), 1u);
  EXPECT_NE(aborts[0].find("generation 4 no longer has n1/0/b"), std::string::npos) << aborts[0];
  // Once cleared (the communicator is going away), nothing is aborted.
  EXPECT_EQ(box.ClearRunning(), 2u);
  box.PostGeneration(MakeGeneration(5, 10, {}), "w2-1", -1);
  EXPECT_EQ(aborts.size(), 1u);
  EXPECT_EQ(box.ClearRunning(), 0u);
}

TEST(SessionMailboxTest, LeavingWaitsForTrainingOnlyOnceStartedAndAtMostItsDeadline) {
  {
    SessionMailbox box;  // never started: returns at once
    const auto start = std::chrono::steady_clock::now();
    box.LeaveAndWaitForTraining(Deadline::AfterMs(5000));
    EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1000));
    EXPECT_TRUE(box.leaving());
  }
  {
    SessionMailbox box;  // started, training finishes after the leave is posted
    box.MarkStarted();
    EXPECT_TRUE(box.started());
    std::thread training([&] {
      while (!box.leaving()) std::this_thread::sleep_for(milliseconds(5));
      box.FinishTraining(DeadlineExceededError("stopped"));
    });
    box.LeaveAndWaitForTraining(Deadline::AfterMs(5000));
    training.join();
    EXPECT_EQ(box.result().code(), StatusCode::kDeadlineExceeded);
  }
  {
    SessionMailbox box;  // started, training never finishes: the deadline bounds the wait
    box.MarkStarted();
    const auto start = std::chrono::steady_clock::now();
    box.LeaveAndWaitForTraining(Deadline::AfterMs(100));
    const auto waited = std::chrono::steady_clock::now() - start;
    EXPECT_GE(waited, milliseconds(90));
    EXPECT_LT(waited, milliseconds(3000));
  }
}

}  // namespace
}  // namespace retort::worker

// Planned membership changes of a training job on 127.0.0.1 (coordinator + worker processes):
// a worker joining mid-run, `retortctl drain`, SIGTERM, and `retortctl scale`. Each must happen
// at a step boundary, lose no completed step, and leave the loss curve of the uninterrupted run
// unchanged (world-size invariance).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <thread>

#include "elastic/scenario_test.h"

namespace retort::elastic_testing {
namespace {

class MembershipTest : public ElasticScenarioTest {};

// Scenario 1: a worker joining mid-run is added at a step boundary, receives parameters and its
// optimizer range from the current members over the data plane, and the trajectory is unchanged.
TEST_F(MembershipTest, WorkerJoiningMidRunGetsStateFromPeersAndKeepsTheTrajectory) {
  const JobOptions job{.min_workers = 2, .max_workers = 3};
  std::unique_ptr<ElasticCluster> c;
  StatusView st;
  ASSERT_NO_FATAL_FAILURE(StartTrainingTogether(job, 2, 10, &c, &st));
  const MetricsMark before = c->Mark();
  const int joiner = c->StartWorker(2);

  ASSERT_TRUE(WaitAllRanked(*c, 3, kEvent, &st));
  ExpectCompletedCleanly(*c);
  if (HasFatalFailure()) return;

  MetricsFile m = c->Metrics();
  EXPECT_EQ(SequenceText(WorldSizeSequence(m.lines)), "2 -> 3")
      << "world_size must change 2 -> 3 once, at a step boundary";
  uint64_t last_gen_of_2 = 0, first_gen_of_3 = 0;
  for (const auto& l : m.lines) {
    if (l.world_size == 2) last_gen_of_2 = std::max(last_gen_of_2, l.generation);
    if (l.world_size == 3 && first_gen_of_3 == 0) first_gen_of_3 = l.generation;
  }
  EXPECT_GT(first_gen_of_3, last_gen_of_2) << "the 3-worker steps need a newer generation";
  ExpectNoLostSteps(m, job, before);
  // Steps are never repeated at all for a join: each step number appears once.
  ExpectEachStepOnce(m, job);
  ExpectSameTrajectory(m.lines, "join 2 -> 3 at step ~" + std::to_string(before.step));

  // Not from disk: the job has no checkpoints, none was ever committed, the checkpoint directory
  // is empty, and the joiner started in the middle of the run (its first generation began at a
  // step > 0, which only the peers could have given it).
  EXPECT_EQ(st.last_checkpoint_id, 0u);
  EXPECT_TRUE(ListCommittedCheckpoints(c->checkpoint_dir()).empty());
  std::smatch match;
  std::string log = c->worker(joiner).Log();
  static const std::regex first_generation(R"(generation \d+: rank (\d+) of 3 .* step (\d+)/)");
  ASSERT_TRUE(std::regex_search(log, match, first_generation)) << log;
  EXPECT_EQ(std::stoi(match[1]), 2) << "the joiner is the newest rank";
  EXPECT_GE(std::stoll(match[2]), before.step)
      << "the joiner must start at the job's current step, with the peers' state";
}

// Scenario 2: `retortctl drain ID` removes a worker gracefully at a step boundary. The drained
// member is rank 0, the one that writes metrics.jsonl: the new rank 0 carries on appending.
TEST_F(MembershipTest, DrainRemovesAWorkerAtAStepBoundaryWithoutLosingAStep) {
  const JobOptions job{.min_workers = 2, .max_workers = 3};
  std::unique_ptr<ElasticCluster> c;
  StatusView st;
  ASSERT_NO_FATAL_FAILURE(StartTrainingTogether(job, 3, 10, &c, &st));
  const RankedWorker victim = WorkerAtRank(*c, st, 0);
  std::string out;
  ASSERT_EQ(c->Ctl({"drain", victim.member.id}, &out), 0) << out;
  const MetricsMark before = c->Mark();

  auto rc = c->worker(victim.index).Wait(kEvent);
  ASSERT_TRUE(rc.has_value()) << "the drained worker did not leave\n" << c->Logs();
  EXPECT_EQ(*rc, 0) << c->worker(victim.index).Log();
  EXPECT_NE(c->worker(victim.index).Log().find("left the job (drained by operator)"),
            std::string::npos)
      << c->worker(victim.index).Log();
  ASSERT_TRUE(c->WaitForStatus(FormedAfterWithout(2, st.generation, victim.member.id), kEvent))
      << c->Logs();
  ExpectCompletedCleanly(*c);
  if (HasFatalFailure()) return;

  ExpectRemovedWithoutLoss(*c, job, before, "drain of rank 0");
}

// Scenario 3: SIGTERM makes a worker leave the same way (at a step boundary, nothing lost).
TEST_F(MembershipTest, SigtermRemovesAWorkerAtAStepBoundaryWithoutLosingAStep) {
  const JobOptions job{.min_workers = 2, .max_workers = 3};
  std::unique_ptr<ElasticCluster> c;
  StatusView st;
  ASSERT_NO_FATAL_FAILURE(StartTrainingTogether(job, 3, 10, &c, &st));
  const RankedWorker victim = WorkerAtRank(*c, st, 1);
  c->worker(victim.index).Signal(SIGTERM);
  const MetricsMark before = c->Mark();

  auto rc = c->worker(victim.index).Wait(kEvent);
  ASSERT_TRUE(rc.has_value()) << "the worker did not leave on SIGTERM\n" << c->Logs();
  EXPECT_EQ(*rc, 0) << c->worker(victim.index).Log();
  EXPECT_NE(c->worker(victim.index).Log().find("left the job (SIGTERM)"), std::string::npos)
      << c->worker(victim.index).Log();
  ExpectCompletedCleanly(*c);
  if (HasFatalFailure()) return;

  ExpectRemovedWithoutLoss(*c, job, before, "SIGTERM of rank 1");
}

// Scenario 4: `retortctl scale` changes the bounds live. --max below the member count makes a
// worker leave; --min above it pauses the job (WAITING or PAUSED, no new steps) until enough
// workers are back, then training resumes.
TEST_F(MembershipTest, ScaleBoundsLiveMaxDrainsMinPausesUntilWorkersReturn) {
  const JobOptions job{.min_workers = 2, .max_workers = 3};
  std::unique_ptr<ElasticCluster> c;
  StatusView st;
  ASSERT_NO_FATAL_FAILURE(StartTrainingTogether(job, 3, 8, &c, &st));

  // --max=2: one worker (the highest rank) leaves.
  std::string out;
  ASSERT_EQ(c->Ctl({"scale", "--max=2"}, &out), 0) << out;
  const MetricsMark before_max = c->Mark();
  ASSERT_TRUE(c->WaitForStatus(
      [](const StatusView& s) {
        return s.max_workers == 2 && s.members.size() == 2 && s.AllRanked() && s.state == "running";
      },
      kEvent, &st))
      << st.raw << "\n"
      << c->Logs();
  int left = -1;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        for (int i = 0; i < c->worker_count(); ++i)
          if (!c->worker(i).Running()) left = i;
        return left >= 0;
      },
      kEvent))
      << "no worker process exited after scale --max=2\n"
      << c->Logs();
  EXPECT_EQ(c->worker(left).Wait(milliseconds(0)).value_or(-1), 0);
  EXPECT_NE(c->worker(left).Log().find("scaled down to max_workers=2"), std::string::npos)
      << c->worker(left).Log();
  ASSERT_TRUE(c->WaitForStep(before_max.step + 2, kEvent)) << "training stopped at 2 workers\n"
                                                           << c->Logs();

  // --min=3 (with 2 members): the job waits, and no step completes.
  ASSERT_EQ(c->Ctl({"scale", "--min=3", "--max=3"}, &out), 0) << out;
  ASSERT_TRUE(c->WaitForStatus(
      [](const StatusView& s) {
        return s.min_workers == 3 && (s.state == "waiting" || s.state == "paused");
      },
      kEvent, &st))
      << "below min_workers the job must be waiting or paused; status: " << st.raw << "\n"
      << c->Logs();
  // Members stop at their next step boundary: allow the one step in flight, then none.
  std::this_thread::sleep_for(milliseconds(1500));
  const int64_t paused_at = c->LastStep();
  std::this_thread::sleep_for(milliseconds(3000));
  EXPECT_EQ(c->LastStep(), paused_at) << "steps completed while below min_workers";
  ASSERT_TRUE(c->Status().has_value());
  EXPECT_TRUE(c->Status()->state == "waiting" || c->Status()->state == "paused");
  ASSERT_LT(paused_at, job.steps) << "the job finished before it could be paused; use more steps";

  // A third worker arrives: the job runs again with 3 and completes.
  c->StartWorker(3);
  ASSERT_TRUE(c->WaitForStatus(
      [](const StatusView& s) {
        return s.state == "running" && s.members.size() == 3 && s.AllRanked();
      },
      kEvent, &st))
      << st.raw << "\n"
      << c->Logs();
  ASSERT_TRUE(c->WaitForStep(paused_at + 1, kEvent)) << "training did not resume\n" << c->Logs();
  ExpectCompletedCleanly(*c);
  if (HasFatalFailure()) return;

  MetricsFile m = c->Metrics();
  EXPECT_THAT(SequenceText(WorldSizeSequence(m.lines)), ::testing::EndsWith("3 -> 2 -> 3"));
  ExpectNoLostSteps(m, job, before_max);
  ExpectEachStepOnce(m, job);
  ExpectSameTrajectory(m.lines, "scale max 3->2, min 2->3, pause, rejoin");
}

}  // namespace
}  // namespace retort::elastic_testing

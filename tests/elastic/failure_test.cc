// Unplanned failures of a training worker on 127.0.0.1: kill -9 (the survivors recover in place
// from the last completed step) and a zombie (SIGSTOP until evicted, then SIGCONT), which must
// not corrupt the job and must either re-join cleanly or exit with a clear message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "elastic/scenario_test.h"

namespace retort::elastic_testing {
namespace {

using testing::UnixMs;

class FailureTest : public ElasticScenarioTest {
 protected:
  // kill -9 of rank 1 of 3 workers at step 10; the survivors must go on on the same curve.
  // `logs` (optional): every process's log once the job completed.
  void KillRankOneOfThreeAndExpectTheSameTrajectory(const JobOptions& job,
                                                    std::string* logs = nullptr) {
    std::unique_ptr<ElasticCluster> c;
    StatusView st;
    ASSERT_NO_FATAL_FAILURE(StartTrainingTogether(job, 3, 10, &c, &st));
    // Rank 1: not the metrics writer, so every completed step still gets its line.
    const RankedWorker victim = WorkerAtRank(*c, st, 1);
    const int64_t kill_ms = UnixMs();
    c->worker(victim.index).Signal(SIGKILL);
    const MetricsMark before = c->Mark();

    StatusView after;
    ASSERT_TRUE(
        c->WaitForStatus(FormedAfterWithout(2, st.generation, victim.member.id), kEvent, &after))
        << "no generation without the killed worker: " << after.raw << "\n"
        << c->Logs();
    MetricsFile m;
    // The next new completed step is the first one of a newer generation (rank 0 may still append
    // the line of a step completed just before the kill).
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          m = c->Metrics();
          return std::any_of(m.lines.begin(), m.lines.end(),
                             [&](const MetricLine& l) { return l.generation > st.generation; });
        },
        kEvent))
        << "no step completed in a generation after the kill\n"
        << c->Logs();
    PrintRecoveryTime(m, st.generation, kill_ms, "kill -9 of rank 1 (of 3)");
    ExpectCompletedCleanly(*c, {victim.index});
    if (HasFatalFailure()) return;
    EXPECT_EQ(c->worker(victim.index).Wait(milliseconds(0)).value_or(-1), 128 + SIGKILL);

    m = c->Metrics();
    EXPECT_THAT(SequenceText(WorldSizeSequence(m.lines)), ::testing::EndsWith("3 -> 2"));
    ExpectNoLostSteps(m, job, before);
    ExpectSameTrajectory(m.lines, "kill -9 of rank 1 at step " + std::to_string(before.step));
    if (logs != nullptr) *logs = c->Logs(1 << 22);
  }
};

// Scenario 5: kill -9 of a worker. Survivors detect it, the coordinator forms the next
// generation, training continues from the last completed step: no completed step is lost and
// the loss curve matches the uninterrupted run (the dead rank's optimizer range comes back from
// its in-memory replica).
TEST_F(FailureTest, KillNineWorkerSurvivorsContinueFromLastStepOnTheSameTrajectory) {
  KillRankOneOfThreeAndExpectTheSameTrajectory(JobOptions{.min_workers = 2, .max_workers = 3});
}

// The same with mixup, CutMix and random erasing on: a pair's mix is a function of (seed,
// epoch, step, pair), pairs are never cut between ranks and erasing is drawn from the sample's
// seed, so the recovered run augments as the reference does. (With colour jitter on as well,
// the recovered run leaves the reference curve about 7 steps after the recovery, growing from
// 1e-7 to 1e-2 relative, while uninterrupted runs of 2 and 3 workers agree within 2e-7 over 40
// steps: not understood yet, see README "The training recipe".)
TEST_F(FailureTest, WithMixingKillNineWorkerKeepsTheTrajectory) {
  KillRankOneOfThreeAndExpectTheSameTrajectory(
      JobOptions{.min_workers = 2,
                 .max_workers = 3,
                 .trajectory_extra = "mixing: {mixup_alpha: 0.8, cutmix_alpha: 1.0}\n"
                                     "dataset: {kind: fashion-mnist, augment: true, "
                                     "augmentation: {random_erase_prob: 0.25}}\n"});
}

// The same with straggler rebalancing on, tuned to change the shares often (a 1% threshold
// over 2-step windows: the 3 workers sharing this machine's cores differ by more): shares are
// uneven before the kill and again after it (a new generation starts even), and the curve is the
// even split's reference within the scenarios' tolerance.
TEST_F(FailureTest, WithRebalancingKillNineWorkerKeepsTheTrajectory) {
  std::string logs;
  KillRankOneOfThreeAndExpectTheSameTrajectory(
      JobOptions{.min_workers = 2,
                 .max_workers = 3,
                 .elastic_extra = "straggler: {rebalance: true, window_steps: 2, threshold: 0.01}"},
      &logs);
  if (HasFatalFailure()) return;
  EXPECT_NE(logs.find("batch shares from step"), std::string::npos)
      << "the shares never changed: the test did not exercise rebalancing";
}

// Scenario 8: a zombie. SIGSTOP a worker until the coordinator evicts it, then SIGCONT it. The
// others' trajectory must be untouched, and the zombie must either re-join cleanly (and finish
// the job with the others) or exit non-zero saying it was evicted.
TEST_F(FailureTest, StoppedWorkerEvictedThenContinuedCorruptsNothing) {
  const JobOptions job{.min_workers = 2, .max_workers = 3};
  std::unique_ptr<ElasticCluster> c;
  StatusView st;
  ASSERT_NO_FATAL_FAILURE(StartTrainingTogether(job, 3, 10, &c, &st));
  const RankedWorker victim = WorkerAtRank(*c, st, 1);
  const int zombie = victim.index;
  c->worker(zombie).Signal(SIGSTOP);
  const MetricsMark before = c->Mark();

  StatusView after;
  bool evicted = c->WaitForStatus(
      [&](const StatusView& s) {
        return s.ById(victim.member.id) == nullptr && s.members.size() == 2 &&
               s.generation > st.generation;
      },
      kEvent, &after);
  if (!evicted) c->worker(zombie).Signal(SIGCONT);
  ASSERT_TRUE(evicted) << "the stopped worker was not evicted: " << after.raw << "\n" << c->Logs();
  ASSERT_TRUE(c->WaitForStep(before.step + 2, kEvent))
      << "the others did not continue without the stopped worker\n"
      << c->Logs();
  c->worker(zombie).Signal(SIGCONT);

  // Outcome: re-joined (a member with the zombie's identity and a rank again) or exited.
  bool rejoined = false, exited = false;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        if (!c->worker(zombie).Running()) return exited = true;
        auto s = c->Status();
        if (!s) return false;
        for (const auto& mv : s->members)
          if (mv.local_rank == victim.member.local_rank && mv.id != victim.member.id &&
              mv.rank >= 0)
            rejoined = true;
        return rejoined;
      },
      kEvent))
      << "after SIGCONT the zombie neither re-joined nor exited\n"
      << c->Logs();
  std::cout << "[ measured ] zombie outcome: "
            << (rejoined ? "re-joined as a new member" : "exited") << "\n";
  ExpectCompletedCleanly(*c, {zombie});
  if (HasFatalFailure()) {
    // Still report whether what did complete stayed on the reference curve.
    ExpectSameTrajectory(c->Metrics().lines, "zombie, steps completed before the job stopped");
    return;
  }
  const std::string zombie_log = c->worker(zombie).Log();
  auto rc = c->worker(zombie).Wait(milliseconds(0));
  ASSERT_TRUE(rc.has_value());
  if (rejoined) {
    EXPECT_EQ(*rc, 0) << "a zombie that re-joined must finish the job cleanly\n" << zombie_log;
    EXPECT_NE(zombie_log.find("re-joining"), std::string::npos) << zombie_log;
  } else {
    EXPECT_NE(*rc, 0) << "an evicted zombie that gives up must not report success\n" << zombie_log;
    EXPECT_NE(Lower(zombie_log).find("evicted"), std::string::npos)
        << "the zombie's exit message must say it was evicted\n"
        << zombie_log;
  }

  MetricsFile m = c->Metrics();
  ExpectNoLostSteps(m, job, before);
  ExpectSameTrajectory(m.lines, "zombie (SIGSTOP of rank 1 at step " + std::to_string(before.step) +
                                    ", evicted, SIGCONT)");
}

}  // namespace
}  // namespace retort::elastic_testing

// The coordinator's side of stragglers: the batch split its members report (status, the
// batch_split event) and draining a member that stays far slower than the others
// (elastic.straggler.drain_below / drain_after_steps), never below min_workers.
#include <gtest/gtest.h>

#include "coordinator/reported_batch_split.h"
#include "coordinator/straggler_drain.h"
#include "tests/coordinator/coordinator_fixture.h"

namespace retort::coordinator {
namespace {

TEST(StragglerDrainTest, DrainsOnlyAfterStayingBelowForTheWholeRun) {
  StragglerDrain d(0.5, 10);
  EXPECT_FALSE(d.Observe("m", 1, 40, 100).has_value());   // below from step 1
  EXPECT_FALSE(d.Observe("m", 10, 40, 100).has_value());  // 9 steps
  EXPECT_FALSE(d.Observe("m", 11, 60, 100).has_value());  // back above: starts over
  EXPECT_FALSE(d.Observe("m", 12, 40, 100).has_value());
  EXPECT_FALSE(d.Observe("m", 21, 40, 100).has_value());
  EXPECT_EQ(d.Observe("m", 22, 40, 100), 10);
  EXPECT_FALSE(d.Observe("x", 50, 40, 0).has_value()) << "no others to compare with";
  EXPECT_FALSE(StragglerDrain(0, 0).enabled());
}

TEST(ReportedBatchSplitTest, OnlyACompleteSplitThatSumsToTheBatchIsShown) {
  EXPECT_EQ(ReportedBatchSplit({{1, 20}, {0, 28}}, 2, 48), (std::vector<int64_t>{28, 20}));
  EXPECT_TRUE(ReportedBatchSplit({{0, 28}}, 2, 48).empty()) << "rank 1 not reported";
  EXPECT_TRUE(ReportedBatchSplit({{0, 28}, {1, 24}}, 2, 48).empty()) << "mid-change";
  EXPECT_TRUE(ReportedBatchSplit({{0, 48}, {5, 1}}, 1, 48) == (std::vector<int64_t>{48}));
}

class CoordinatorStragglerTest : public CoordinatorTest {
 protected:
  // Three members on n0, ranks 0..2 in one generation.
  void StartThree(int min_workers) {
    v1::JobSpec job = TestJob(min_workers, 8);
    job.mutable_elastic()->mutable_straggler()->set_drain_below(0.5);
    job.mutable_elastic()->mutable_straggler()->set_drain_after_steps(10);
    // A job of its own: the fixture's coordinator runs TestJob() in the default state dir.
    opts_.state_dir = testing::MakeTempDir("retort_coord_straggler") + "/state";
    Restart(job);
    ids_ = {JoinOk("n0", 0), JoinOk("n0", 1), JoinOk("n0", 2)};
    Settle();
    ASSERT_FALSE(listener_.seen.empty());
    generation_ = listener_.seen.back()->number();
  }
  // A heartbeat of member `i` after `step` with its compute throughput and share.
  v1::Directives Beat(int i, int64_t step, double compute_sps, int64_t local_batch) {
    v1::HeartbeatRequest hb;
    hb.set_member_id(ids_[i]);
    hb.set_generation(generation_);
    hb.set_step(step);
    hb.mutable_metrics()->set_compute_samples_per_second(compute_sps);
    hb.mutable_metrics()->set_local_batch(local_batch);
    auto r = c_->Heartbeat(hb);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->directives() : v1::Directives();
  }
  std::vector<std::string> ids_;
  uint64_t generation_ = 0;
};

TEST_F(CoordinatorStragglerTest, AFarSlowerMemberIsDrainedAndTheSplitIsInStatus) {
  ASSERT_NO_FATAL_FAILURE(StartThree(/*min_workers=*/1));
  for (int64_t step = 1; step <= 10; ++step) {
    EXPECT_FALSE(Beat(0, step, 100, 48).leave());
    EXPECT_FALSE(Beat(1, step, 100, 48).leave());
    EXPECT_FALSE(Beat(2, step, 20, 32).leave()) << "step " << step;
  }
  const v1::StatusResponse s = c_->GetStatus();
  ASSERT_EQ(s.batch_split().samples_size(), 3);
  EXPECT_EQ(s.batch_split().samples(2), 32);
  EXPECT_EQ(s.members(2).local_batch(), 32);
  Beat(0, 11, 100, 48);
  Beat(1, 11, 100, 48);
  const v1::Directives d = Beat(2, 11, 20, 32);
  EXPECT_TRUE(d.leave()) << "20 samples/s against 100 for 10 steps";
  EXPECT_NE(d.leave_reason().find("straggler"), std::string::npos) << d.leave_reason();
  EXPECT_FALSE(Beat(0, 12, 100, 48).leave());
}

TEST_F(CoordinatorStragglerTest, NoDrainBelowMinWorkers) {
  ASSERT_NO_FATAL_FAILURE(StartThree(/*min_workers=*/3));
  for (int64_t step = 1; step <= 30; ++step) {
    Beat(0, step, 100, 48);
    Beat(1, step, 100, 48);
    EXPECT_FALSE(Beat(2, step, 20, 32).leave()) << "step " << step;
  }
}

}  // namespace
}  // namespace retort::coordinator

// A recurring failure reported in LeaveRequest.failure fails the job once: FAILED, the first
// failure kept (in status and durably), the other members asked to leave, no new members.
#include <gtest/gtest.h>

#include "common/clock.h"
#include "coordinator/coordinator.h"
#include "coordinator/job_spec.h"
#include "testing/subprocess.h"

namespace retort::coordinator {
namespace {

using std::chrono::milliseconds;

class JobFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("retort_coord_fail");
    opts_.state_dir = dir_ + "/state";
    opts_.settle_ms = 100;
    opts_.eviction_timeout_ms = 2000;
    opts_.heartbeat_interval_ms = 500;
    job_.set_name("failing-job");
    job_.mutable_student()->set_preset("fm-student");
    job_.set_steps(100);
    job_.mutable_elastic()->set_min_workers(1);
    job_.mutable_elastic()->set_max_workers(8);
    ApplyJobSpecDefaults(&job_);
    Restart(job_);
  }
  void Restart(std::optional<v1::JobSpec> job) {
    c_.reset();
    auto c = Coordinator::Create(opts_, job, &clock_);
    ASSERT_TRUE(c.ok()) << c.status();
    c_ = std::move(c).value();
  }
  std::string Join(int local_rank) {
    v1::JoinRequest r;
    r.mutable_identity()->set_node("n0");
    r.mutable_identity()->set_local_rank(local_rank);
    r.mutable_identity()->set_incarnation("i" + std::to_string(local_rank));
    r.set_parameter_count(1000);
    auto resp = c_->Join(r);
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.ok() ? resp->member_id() : "";
  }
  static v1::LeaveRequest FailingLeave(const std::string& id, const std::string& message,
                                       int64_t step) {
    v1::LeaveRequest leave;
    leave.set_member_id(id);
    leave.set_reason("job failed: " + message);
    auto* f = leave.mutable_failure();
    f->set_kind(v1::FAILURE_KIND_RECURRING);
    f->set_message(message);
    f->set_phase("data");
    f->set_step(step);
    f->set_member_id("someone-else");  // the coordinator records the caller's id instead
    return leave;
  }

  std::string dir_;
  CoordinatorOptions opts_;
  FakeClock clock_;
  v1::JobSpec job_;
  std::unique_ptr<Coordinator> c_;
};

TEST_F(JobFailureTest, FirstRecurringFailureFailsTheJobOnceAndAsksTheOthersToLeave) {
  const std::string a = Join(0), b = Join(1);
  clock_.Advance(milliseconds(200));
  c_->Tick();
  ASSERT_EQ(c_->GetStatus().state(), v1::JOB_STATE_RUNNING);

  ASSERT_TRUE(c_->Leave(FailingLeave(a, "DATA_LOSS: sample 3: not a JPEG", 0)).ok());
  v1::StatusResponse s = c_->GetStatus();
  EXPECT_EQ(s.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(s.failure().message(), "DATA_LOSS: sample 3: not a JPEG");
  EXPECT_EQ(s.failure().member_id(), a);
  EXPECT_EQ(s.failure().phase(), "data");
  EXPECT_FALSE(c_->Finished()) << "b is still a member";

  v1::HeartbeatRequest hb;
  hb.set_member_id(b);
  auto reply = c_->Heartbeat(hb);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->directives().leave());
  EXPECT_NE(reply->directives().leave_reason().find("not a JPEG"), std::string::npos)
      << reply->directives().leave_reason();

  // A second failure (b hit the same error) does not replace the first.
  ASSERT_TRUE(c_->Leave(FailingLeave(b, "INVALID_ARGUMENT: something else", 5)).ok());
  s = c_->GetStatus();
  EXPECT_EQ(s.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(s.failure().message(), "DATA_LOSS: sample 3: not a JPEG");
  EXPECT_TRUE(c_->Finished());

  // No new members for a failed job; the refusal says why.
  v1::JoinRequest join;
  join.mutable_identity()->set_node("n0");
  join.mutable_identity()->set_local_rank(2);
  join.mutable_identity()->set_incarnation("i2");
  auto refused = c_->Join(join);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->ended_state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(refused->member_id(), "");
  EXPECT_NE(refused->failure().message().find("not a JPEG"), std::string::npos);
}

TEST_F(JobFailureTest, FailureIsDurableAcrossRestarts) {
  const std::string a = Join(0);
  ASSERT_TRUE(c_->Leave(FailingLeave(a, "INVALID_ARGUMENT: step 1: shape mismatch", 0)).ok());
  Restart(std::nullopt);
  v1::StatusResponse s = c_->GetStatus();
  EXPECT_EQ(s.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(s.failure().message(), "INVALID_ARGUMENT: step 1: shape mismatch");
  EXPECT_TRUE(c_->Finished());
}

TEST_F(JobFailureTest, LeavingWithoutARecurringFailureDoesNotFailTheJob) {
  const std::string a = Join(0), b = Join(1);
  v1::LeaveRequest plain;
  plain.set_member_id(a);
  plain.set_reason("SIGTERM");
  ASSERT_TRUE(c_->Leave(plain).ok());
  v1::LeaveRequest transient = FailingLeave(b, "UNAVAILABLE: peer gone", 3);
  transient.mutable_failure()->set_kind(v1::FAILURE_KIND_TRANSIENT);
  ASSERT_TRUE(c_->Leave(transient).ok());
  v1::StatusResponse s = c_->GetStatus();
  EXPECT_NE(s.state(), v1::JOB_STATE_FAILED);
  EXPECT_FALSE(s.has_failure());
}

TEST_F(JobFailureTest, RefusesOversizedOrEmptyFailures) {
  const std::string a = Join(0);
  v1::LeaveRequest huge = FailingLeave(a, std::string(kMaxFailureMessageBytes + 1, 'x'), 0);
  huge.set_reason("job failed");
  auto s = c_->Leave(huge);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("failure.message"), std::string::npos) << s;
  v1::LeaveRequest empty = FailingLeave(a, "", 0);
  EXPECT_EQ(c_->Leave(empty).code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c_->GetStatus().state(), v1::JOB_STATE_FAILED);
}

TEST_F(JobFailureTest, StopOnAFailedJobSaysSo) {
  const std::string a = Join(0);
  ASSERT_TRUE(c_->Leave(FailingLeave(a, "NOT_FOUND: dataset.path /nope", 0)).ok());
  auto r = c_->Stop(v1::StopRequest());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(c_->GetStatus().state(), v1::JOB_STATE_FAILED);
}

}  // namespace
}  // namespace retort::coordinator

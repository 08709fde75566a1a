// Which training failures fail the job (recurring) and which are retried (transient).
#include "worker/job_failure.h"

#include <gtest/gtest.h>

namespace retort::worker {
namespace {

TEST(JobFailureTest, DataShapeAndSetupErrorsRecur) {
  EXPECT_EQ(ClassifyFailure(FailurePhase::kData, DataLossError("sample 3: not a JPEG")),
            v1::FAILURE_KIND_RECURRING);
  EXPECT_EQ(ClassifyFailure(FailurePhase::kStep, InvalidArgumentError("shape [8, 49] vs [8, 64]")),
            v1::FAILURE_KIND_RECURRING);
  EXPECT_EQ(ClassifyFailure(FailurePhase::kStep, InternalError("reshape failed")),
            v1::FAILURE_KIND_RECURRING);
  EXPECT_EQ(ClassifyFailure(FailurePhase::kSetup, NotFoundError("no such directory /data")),
            v1::FAILURE_KIND_RECURRING);
}

TEST(JobFailureTest, PeerAndTimeoutErrorsAreTransientAnywhere) {
  for (FailurePhase phase : {FailurePhase::kSetup, FailurePhase::kData, FailurePhase::kStep,
                             FailurePhase::kCommunication}) {
    for (const Status& s :
         {UnavailableError("peer closed"), DeadlineExceededError("collective timed out"),
          AbortedError("communicator aborted"), CancelledError("stopping")}) {
      EXPECT_EQ(ClassifyFailure(phase, s), v1::FAILURE_KIND_TRANSIENT)
          << FailurePhaseName(phase) << ": " << s;
    }
  }
}

TEST(JobFailureTest, CommunicationFailuresNeverFailTheJob) {
  EXPECT_EQ(ClassifyFailure(FailurePhase::kCommunication, InternalError("ucx: endpoint error")),
            v1::FAILURE_KIND_TRANSIENT);
  EXPECT_EQ(ClassifyFailure(FailurePhase::kCommunication, InvalidArgumentError("length differs")),
            v1::FAILURE_KIND_TRANSIENT);
}

TEST(JobFailureTest, AStepFailureWhileThePeersWereDisturbedIsTransient) {
  EXPECT_EQ(ClassifyFailure(FailurePhase::kStep, InternalError("ucx: reduce-scatter failed"),
                            /*data_plane_disturbed=*/true),
            v1::FAILURE_KIND_TRANSIENT);
  // Data errors are this member's own, whatever the peers did.
  EXPECT_EQ(ClassifyFailure(FailurePhase::kData, DataLossError("corrupt"), true),
            v1::FAILURE_KIND_RECURRING);
}

TEST(JobFailureTest, MakeJobFailureNamesCodePhaseAndStep) {
  v1::JobFailure f = MakeJobFailure(FailurePhase::kData, DataLossError("sample 3: not a JPEG"), 7);
  EXPECT_EQ(f.kind(), v1::FAILURE_KIND_RECURRING);
  EXPECT_EQ(f.message(), "DATA_LOSS: sample 3: not a JPEG");
  EXPECT_EQ(f.phase(), "data");
  EXPECT_EQ(f.step(), 7);
  EXPECT_GT(f.unix_ms(), 0);
  EXPECT_LE(MakeJobFailure(FailurePhase::kStep, InternalError(std::string(10000, 'x')), 0)
                .message()
                .size(),
            4096u);
}

// A worker whose every generation start fails the same way (a build without the CUDA data
// plane) fails the job on the third start instead of re-joining for ever.
TEST(JobFailureTest, TheSameGenerationStartErrorThreeTimesInARowFailsTheJob) {
  const Status lacks = FailedPreconditionError("this build lacks the CUDA data plane");
  GenerationStartFailures starts;
  EXPECT_FALSE(starts.Failed(lacks));
  EXPECT_FALSE(starts.Failed(UnavailableError("a peer went away")));  // neither counts nor resets
  EXPECT_FALSE(starts.Failed(AbortedError("superseded")));
  EXPECT_EQ(starts.in_a_row(), 1);
  EXPECT_FALSE(starts.Failed(lacks));
  EXPECT_TRUE(starts.Failed(lacks));
  EXPECT_EQ(starts.in_a_row(), GenerationStartFailures::kTries);
}

TEST(JobFailureTest, AStartThatSucceedsOrADifferentErrorResetsTheCount) {
  const Status duplicate = InvalidArgumentError("ncclCommInitRankConfig: duplicate GPU");
  GenerationStartFailures starts;
  EXPECT_FALSE(starts.Failed(duplicate));
  EXPECT_FALSE(starts.Failed(duplicate));
  starts.Started();
  EXPECT_FALSE(starts.Failed(duplicate));
  EXPECT_FALSE(starts.Failed(duplicate));
  EXPECT_FALSE(starts.Failed(InternalError("replica length differs")));
  EXPECT_EQ(starts.in_a_row(), 1);
  EXPECT_FALSE(starts.Failed(duplicate));
  // Only transient errors, however many: the job goes on retrying.
  GenerationStartFailures transient;
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(transient.Failed(DeadlineExceededError("bootstrap")));
}

}  // namespace
}  // namespace retort::worker

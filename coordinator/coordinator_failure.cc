// Failing a job once (see coordinator.h): a member reports a failure that recurs on every try
// (LeaveRequest.failure); the coordinator records the first one durably, moves the job to FAILED
// and asks every other member to leave (heartbeat directives). It exits with code 3 once they
// have (tools/retort_coordinator_main.cc).
#include "common/logging.h"
#include "coordinator/coordinator.h"
#include "rpc/job_state.h"

namespace retort::coordinator {

Status ValidateJobFailure(const v1::JobFailure& f) {
  if (f.message().size() > kMaxFailureMessageBytes)
    return InvalidArgumentError("failure.message: longer than " +
                                std::to_string(kMaxFailureMessageBytes) + " characters");
  if (f.phase().size() > 64 || f.node().size() > 253)
    return InvalidArgumentError("failure.phase/node: longer than 64/253 characters");
  if (f.kind() == v1::FAILURE_KIND_RECURRING && f.message().empty())
    return InvalidArgumentError("failure.message: a recurring failure must say what failed");
  return Status::Ok();
}

void Coordinator::FailJobLocked(const v1::JobFailure& failure) {
  const auto s = state_.state();
  const std::string where = failure.member_id() + " (" + failure.node() + "/" +
                            std::to_string(failure.local_rank()) + ") at step " +
                            std::to_string(failure.step()) + " in " + failure.phase();
  if (rpc::IsFinalJobState(s)) {
    LOG_INFO("coordinator") << "job already " << rpc::JobStateName(s)
                            << "; ignoring the failure of " << where << ": " << failure.message();
    return;
  }
  *state_.mutable_failure() = failure;
  EmitLocked("job_failed", where + ": " + failure.message(), failure.member_id());
  // Persists the failure with the state; the first failure wins from here on.
  SetStateLocked(v1::JOB_STATE_FAILED, "a failure that recurs on every try");
}

}  // namespace retort::coordinator

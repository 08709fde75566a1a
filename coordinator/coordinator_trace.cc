// Step traces on request (see coordinator.h for the threading contract): the operator names a
// window of steps; every member hears of it in its heartbeat directives and records it.
#include "common/logging.h"
#include "coordinator/coordinator.h"
#include "rpc/job_state.h"

namespace retort::coordinator {

// Longest window a member is asked to record (its events are held in memory until the end).
constexpr int64_t kMaxTraceSteps = 1000;

StatusOr<v1::TraceResponse> Coordinator::RequestTrace(const v1::TraceRequest& r) {
  const int64_t first = r.first_step(), last = r.last_step();
  if (first < 1 || last < first)
    return InvalidArgumentError("trace steps " + std::to_string(first) + ":" +
                                std::to_string(last) + ": need 1 <= first <= last");
  if (last - first + 1 > kMaxTraceSteps)
    return InvalidArgumentError("trace steps " + std::to_string(first) + ":" +
                                std::to_string(last) + ": at most " +
                                std::to_string(kMaxTraceSteps) + " steps");
  MutexLock lock(mu_);
  const auto s = state_.state();
  if (s != v1::JOB_STATE_RUNNING && s != v1::JOB_STATE_WAITING && s != v1::JOB_STATE_PAUSED)
    return FailedPreconditionError(std::string("cannot trace a job that is ") +
                                   rpc::JobStateName(s));
  // A member records step N while it runs step N (after N-1 completed): the window must start
  // after the step the fastest member already began.
  const int64_t running = MaxMemberStepLocked() + 1;
  if (first <= running)
    return FailedPreconditionError("trace steps " + std::to_string(first) + ":" +
                                   std::to_string(last) + ": step " + std::to_string(first) +
                                   " has begun or passed (the job is at step " +
                                   std::to_string(running - 1) + "); pick a later window");
  trace_first_step_ = first;
  trace_last_step_ = last;
  const std::string msg = "members record steps " + std::to_string(first) + " to " +
                          std::to_string(last) + " to <output_dir>/traces/";
  EmitLocked("trace_requested", msg);
  v1::TraceResponse resp;
  resp.set_first_step(first);
  resp.set_last_step(last);
  resp.set_message(msg);
  return resp;
}

}  // namespace retort::coordinator

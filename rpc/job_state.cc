#include "rpc/job_state.h"

namespace retort::rpc {

const char* JobStateName(v1::JobState s) {
  switch (s) {
    case v1::JOB_STATE_WAITING:
      return "waiting";
    case v1::JOB_STATE_RUNNING:
      return "running";
    case v1::JOB_STATE_PAUSED:
      return "paused";
    case v1::JOB_STATE_STOPPING:
      return "stopping";
    case v1::JOB_STATE_STOPPED:
      return "stopped";
    case v1::JOB_STATE_COMPLETED:
      return "completed";
    case v1::JOB_STATE_FAILED:
      return "failed";
    default:
      return "unspecified";
  }
}

}  // namespace retort::rpc

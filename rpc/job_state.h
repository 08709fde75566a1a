// Names of job states as operators read them (logs, `retortctl status`, metrics labels).
#pragma once

#include "retort/v1/retort.pb.h"

namespace retort::rpc {

// "waiting", "running", "paused", "stopping", "stopped", "completed", "failed" or "unspecified".
const char* JobStateName(v1::JobState state);

// Whether a job in `state` has ended for good: stopped, completed or failed.
inline bool IsFinalJobState(v1::JobState state) {
  return state == v1::JOB_STATE_STOPPED || state == v1::JOB_STATE_COMPLETED ||
         state == v1::JOB_STATE_FAILED;
}

}  // namespace retort::rpc

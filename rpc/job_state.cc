#include "rpc/job_state.h"

#include "common/enum_names.h"

namespace retort::rpc {

const char* JobStateName(v1::JobState s) {
  static constexpr NamedValue<v1::JobState> kNames[] = {
      {v1::JOB_STATE_WAITING, "waiting"}, {v1::JOB_STATE_RUNNING, "running"},
      {v1::JOB_STATE_PAUSED, "paused"},   {v1::JOB_STATE_STOPPING, "stopping"},
      {v1::JOB_STATE_STOPPED, "stopped"}, {v1::JOB_STATE_COMPLETED, "completed"},
      {v1::JOB_STATE_FAILED, "failed"}};
  return NameIn(kNames, s, "unspecified");
}

}  // namespace retort::rpc

// Names of job states as operators read them (logs, `retortctl status`, metrics labels).
#pragma once

#include "retort/v1/retort.pb.h"

namespace retort::rpc {

// "waiting", "running", "paused", "stopping", "stopped", "completed", "failed" or "unspecified".
const char* JobStateName(v1::JobState state);

}  // namespace retort::rpc

// What `status`, `top` and the metrics say about checkpoints that failed to commit
// (v1::CheckpointHealth), and the default of the policy that pauses a job whose checkpoints keep
// failing (checkpoint.max_consecutive_failures). Pure; the caller holds whatever lock guards
// the message.
#pragma once

#include <cstdint>
#include <string>

#include "retort/v1/retort.pb.h"

namespace retort::coordinator {

// Failed checkpoints in a row after which a running job is paused, when the spec leaves
// checkpoint.max_consecutive_failures out.
constexpr int32_t kDefaultMaxConsecutiveCheckpointFailures = 3;

// Longest failure message kept (the error names the file and the errno well within it).
constexpr size_t kMaxCheckpointFailureChars = 1024;

// Counts one more failure of the checkpoint at `step` because of `why`.
inline void CheckpointHealthAfterFailure(v1::CheckpointHealth* health, int64_t step,
                                         const std::string& why, int64_t unix_ms) {
  health->set_failures_total(health->failures_total() + 1);
  health->set_consecutive_failures(health->consecutive_failures() + 1);
  health->set_last_failure_step(step);
  health->set_last_failure(why.substr(0, kMaxCheckpointFailureChars));
  health->set_last_failure_unix_ms(unix_ms);
}

}  // namespace retort::coordinator

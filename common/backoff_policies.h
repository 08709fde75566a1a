// Every retry and polling policy of the project, named in one place. A policy is where the wait
// starts and the most it grows to; Backoff (common/backoff.h) doubles it with full jitter, and
// Nth() without jitter. Policies whose bounds come from flags (the launcher's restart delay,
// the coordinator's persist retry) are built from those flags with DoublingDelay.
#pragma once

#include <chrono>

#include "common/backoff.h"

namespace retort {

struct BackoffPolicy {
  std::chrono::milliseconds initial;
  std::chrono::milliseconds max;
  Backoff Make() const { return Backoff(initial, max); }
  // The n-th wait (n >= 1) without jitter.
  std::chrono::milliseconds Nth(int n) const { return DoublingDelay(initial, max, n); }
};

namespace backoff_policies {
using std::chrono::milliseconds;

// Polling a file store (one host's file system) for a key another rank publishes.
inline constexpr BackoffPolicy kFileStorePoll{milliseconds(1), milliseconds(50)};
// Polling the coordinator's key-value exchange for a key another rank publishes.
inline constexpr BackoffPolicy kCoordinatorStorePoll{milliseconds(2), milliseconds(50)};
// Joining or re-joining the job while the coordinator is unreachable or not admitting yet.
inline constexpr BackoffPolicy kJoin{milliseconds(100), milliseconds(2000)};
// Re-opening the generation watch stream after it broke.
inline constexpr BackoffPolicy kWatchReconnect{milliseconds(100), milliseconds(1000)};
// Heartbeating a coordinator that is away (restarting or cut off), until it answers.
inline constexpr BackoffPolicy kCoordinatorAway{milliseconds(100), milliseconds(2000)};
// Leaving with the job's completion while the coordinator restarts.
inline constexpr BackoffPolicy kLeave{milliseconds(200), milliseconds(2000)};
// A worker whose generation failed and saw no new one for this long leaves and re-joins to
// force one (worker/training_session.cc); doubles for each time in a row.
inline constexpr BackoffPolicy kStuckGenerationRejoin{milliseconds(10000), milliseconds(60000)};
// Checkpoint RPCs across a coordinator restart: a steady 200 ms.
inline constexpr BackoffPolicy kCheckpointRpc{milliseconds(200), milliseconds(200)};

}  // namespace backoff_policies
}  // namespace retort

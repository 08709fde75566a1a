// CoordinatorObserver: what the coordinator tells its metrics about, as it happens (the state
// that can be read at any time, like members and generation, is read from GetStatus() instead).
//
// Threading: called with the coordinator's mutex held, from whichever thread changed the state:
// implementations must be thread-safe, must not block and must not call back into the
// Coordinator. Borrowed by CoordinatorOptions; must outlive the Coordinator.
#pragma once

#include <cstdint>
#include <string>

namespace retort::coordinator {

class CoordinatorObserver {
 public:
  virtual ~CoordinatorObserver() = default;
  // A member was evicted. `cause`: "heartbeat_timeout", "disconnected" (its generation stream
  // closed and stayed closed) or "peer_failure" (a peer's data plane reported it dead).
  virtual void OnEviction(const std::string& cause) = 0;
  // A generation formed after members were lost; `cause` is the last loss before it: one of the
  // eviction causes, "worker_restart" (a new incarnation replaced a member) or
  // "coordinator_restart" (the first generation after a restart with earlier members).
  virtual void OnRecovery(const std::string& cause) = 0;
  // A checkpoint's manifest was committed; `bytes` is the size of its files.
  virtual void OnCheckpointCommitted(int64_t bytes) = 0;
  virtual void OnCheckpointAborted() = 0;
  // The coordinator noticed that it had not run for `seconds` (a gap in its own ticks) and gave
  // its members that time back (CoordinatorOptions.own_pause_threshold_ms).
  virtual void OnOwnPause(double seconds) = 0;
};

}  // namespace retort::coordinator

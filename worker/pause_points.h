// PausePoints: a fault-injection seam for tests. A worker started with
// `--pause-at=POINT:MS` stops once at the named moment, so that a test can act (kill -9 the
// process) exactly then instead of guessing with sleeps. Reaching an armed point logs
// "PAUSE POINT (DETAIL) ... (pid P)" and blocks until the caller's `released` predicate holds
// (e.g. a newer generation was published) or MS milliseconds passed, then logs
// "PAUSE POINT over (pid P)" (a test that sees it knows it came too late). Each point pauses
// once per process.
//
// Points: "checkpoint-write" (on the shard writer's thread, after this rank's shard file is on
// disk and before it is acked) and "generation-switch" (on the training thread, in a generation
// with fewer members than the one this process ran before: its communicator is up and no state
// has moved yet).
//
// Threading: Reach may be called from any thread; it is thread-safe. Unarmed points cost a
// map lookup under a mutex.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"

namespace retort::worker {

inline constexpr const char* kPauseCheckpointWrite = "checkpoint-write";
inline constexpr const char* kPauseGenerationSwitch = "generation-switch";

class PausePoints {
 public:
  PausePoints() = default;
  // Parses "POINT:MS" specs (POINT one of the points above, 1 <= MS <= 600000). Errors name
  // the bad spec.
  static StatusOr<std::map<std::string, int64_t>> Parse(const std::vector<std::string>& specs);
  explicit PausePoints(std::map<std::string, int64_t> armed) : armed_(std::move(armed)) {}
  PausePoints(const PausePoints&) = delete;
  PausePoints& operator=(const PausePoints&) = delete;

  // When `point` is armed and has not paused yet: logs "PAUSE point (detail)...", then polls
  // `released` (may be empty: never released early) every 10 ms until it holds or the point's
  // time passed. Returns whether it paused.
  bool Reach(const std::string& point, const std::string& detail,
             const std::function<bool()>& released = {});

 private:
  Mutex mu_;
  std::map<std::string, int64_t> armed_ RETORT_GUARDED_BY(mu_);  // point -> ms, erased once paused
};

}  // namespace retort::worker

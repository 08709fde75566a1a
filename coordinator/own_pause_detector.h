// OwnPauseDetector: tells the coordinator's own pauses (SIGSTOP, a throttled pod, a migrated
// VM, a stall of its whole process) from its members' silence. The coordinator's tick thread
// runs every tick_ms; when two ticks are much further apart than that, the process did not run
// in between, so nobody's heartbeats could be read either, and judging members by the time
// since their last heartbeat would blame them for the coordinator's pause.
//
// Contract: Observe() is called once per tick with the tick's time; it returns how much of the
// time since the previous tick the coordinator was paused beyond one tick interval (zero for an
// ordinary tick, for the first call, and when detection is off). The caller then moves every
// deadline it judges members by forward by that much (Coordinator::ForgiveOwnPauseLocked).
//
// Threading: not thread-safe; the coordinator calls it with its mutex held. Pure (no clock of
// its own): tests drive it with any time points.
#pragma once

#include <chrono>
#include <optional>

namespace retort::coordinator {

class OwnPauseDetector {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // A gap between ticks longer than `threshold` is a pause (`threshold` <= 0: detection off).
  // `tick` is the interval the ticks are meant to have; the part of a pause beyond it counts.
  OwnPauseDetector(std::chrono::milliseconds tick, std::chrono::milliseconds threshold)
      : tick_(tick), threshold_(threshold) {}

  std::chrono::nanoseconds Observe(TimePoint now) {
    const std::optional<TimePoint> previous = last_tick_;
    last_tick_ = now;
    if (!previous || threshold_.count() <= 0 || now <= *previous) return {};
    const auto gap = now - *previous;
    if (gap <= threshold_) return {};
    return gap - tick_;
  }

  std::chrono::milliseconds threshold() const { return threshold_; }

 private:
  const std::chrono::milliseconds tick_;
  const std::chrono::milliseconds threshold_;
  std::optional<TimePoint> last_tick_;
};

}  // namespace retort::coordinator

// CpuSharingDetector: tells a polling wait whether the CPU it runs on is shared with other
// waiters, from what its own yields show.
//
// A rank that waits for a peer polls, spins for a while and then yields the CPU. Spinning
// pays when every rank has a CPU of its own: the peer answers within microseconds and a yield
// would only add a system call. It hurts when there are more ranks than CPUs (several ranks
// of one job on a laptop, a CPU test host): the peer this rank waits for may be the very
// thread that needs this CPU, and every microsecond spun delays it. The detector tells the
// two apart by timing each yield and counting the involuntary context switches it caused:
//   - the CPU went to another thread and came back quickly (within kQuickReturn): other
//     waiters share this CPU and yield it back; waits should yield from the start;
//   - the CPU went to nobody (nothing else was runnable), or came back only after a long
//     time (a CPU-bound neighbour ran its whole time slice): spinning first costs nobody
//     anything, or protects this rank's latency; waits spin as configured.
// One observation switches the verdict on; it goes off after kOffAfter observations that
// say otherwise, so a single yield that finds the other CPU idle does not flip it back.
//
// Threading: one detector per polling thread (it is not thread-safe); Yield() observes the
// calling thread.
#pragma once

#include <chrono>

namespace retort::collectives {

class CpuSharingDetector {
 public:
  static constexpr std::chrono::microseconds kQuickReturn{500};
  static constexpr int kOffAfter = 4;

  // Off (`enabled` false): Yield() is a plain sched_yield() and shared() stays false, so waits
  // spin as configured (UcxContextOptions::yield_early_when_cpu_shared, for A/B runs).
  explicit CpuSharingDetector(bool enabled = true) : enabled_(enabled) {}

  // sched_yield(), then records what it showed (when enabled).
  void Yield();
  // Records one observation; Yield() calls it (public so tests can feed made-up ones).
  void Observe(bool switched_away, std::chrono::nanoseconds off_cpu);
  // True while yields show other waiters sharing this CPU.
  bool shared() const { return evidence_ > 0; }
  // Whether any detector of this process saw its CPU shared within the last kRecent: for
  // waits that do not yield themselves (Work::Wait's spin before it sleeps). Thread-safe.
  static bool RecentlySharedInThisProcess();
  static constexpr std::chrono::milliseconds kRecent{100};

 private:
  bool enabled_ = true;
  int evidence_ = 0;  // kOffAfter after a quick hand-over, counts down on the opposite
};

}  // namespace retort::collectives

#include "collectives/cpu_sharing.h"

#include <sched.h>
#include <sys/resource.h>

#include <atomic>
#include <cstdint>
#include <limits>

namespace retort::collectives {
namespace {

// steady_clock ticks of the last quick hand-over any detector of this process saw.
std::atomic<int64_t> last_shared_ticks{std::numeric_limits<int64_t>::min() / 2};

// Involuntary context switches of the calling thread so far (a yield that hands the CPU to
// another thread counts as one); -1 when the kernel does not say.
long InvoluntarySwitches() {
  rusage usage{};
  if (getrusage(RUSAGE_THREAD, &usage) != 0) return -1;
  return usage.ru_nivcsw;
}

}  // namespace

void CpuSharingDetector::Yield() {
  if (!enabled_) {
    sched_yield();
    return;
  }
  const long before = InvoluntarySwitches();
  const auto start = std::chrono::steady_clock::now();
  sched_yield();
  const auto off_cpu = std::chrono::steady_clock::now() - start;
  const long after = InvoluntarySwitches();
  if (before < 0 || after < 0) return;  // no verdict without the count
  Observe(after != before, off_cpu);
}

void CpuSharingDetector::Observe(bool switched_away, std::chrono::nanoseconds off_cpu) {
  if (switched_away && off_cpu < kQuickReturn) {
    evidence_ = kOffAfter;
    last_shared_ticks.store(std::chrono::steady_clock::now().time_since_epoch().count(),
                            std::memory_order_relaxed);
  } else if (evidence_ > 0) {
    --evidence_;
  }
}

bool CpuSharingDetector::RecentlySharedInThisProcess() {
  const auto last =
      std::chrono::steady_clock::duration(last_shared_ticks.load(std::memory_order_relaxed));
  return std::chrono::steady_clock::now().time_since_epoch() - last < kRecent;
}

}  // namespace retort::collectives

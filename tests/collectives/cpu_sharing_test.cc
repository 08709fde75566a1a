// CpuSharingDetector: the verdict rules on made-up observations, and the real thing with two
// yielding threads pinned to one CPU (the situation it exists for).
#include "collectives/cpu_sharing.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <thread>

namespace retort::collectives {
namespace {

using std::chrono::microseconds;

TEST(CpuSharingDetectorTest, AQuickHandOverSaysShared) {
  CpuSharingDetector d;
  EXPECT_FALSE(d.shared());
  d.Observe(/*switched_away=*/true, microseconds(3));
  EXPECT_TRUE(d.shared());
}

TEST(CpuSharingDetectorTest, AQuickHandOverMarksTheWholeProcessForAWhile) {
  CpuSharingDetector d;
  d.Observe(/*switched_away=*/true, microseconds(3));
  EXPECT_TRUE(CpuSharingDetector::RecentlySharedInThisProcess());
  std::this_thread::sleep_for(CpuSharingDetector::kRecent + std::chrono::milliseconds(20));
  EXPECT_FALSE(CpuSharingDetector::RecentlySharedInThisProcess());
}

TEST(CpuSharingDetectorTest, YieldsThatFindNobodyTurnItOffAfterSeveral) {
  CpuSharingDetector d;
  d.Observe(true, microseconds(3));
  for (int i = 1; i < CpuSharingDetector::kOffAfter; ++i) {
    d.Observe(/*switched_away=*/false, microseconds(0));
    EXPECT_TRUE(d.shared()) << "after " << i << " idle yield(s)";
  }
  d.Observe(false, microseconds(0));
  EXPECT_FALSE(d.shared());
}

TEST(CpuSharingDetectorTest, ACpuBoundNeighboursTimeSliceIsNoEvidence) {
  CpuSharingDetector d;
  d.Observe(true, CpuSharingDetector::kQuickReturn + microseconds(1));
  EXPECT_FALSE(d.shared()) << "losing the CPU for a whole time slice is not a waiter";
  d.Observe(true, microseconds(3));
  for (int i = 0; i < CpuSharingDetector::kOffAfter; ++i) {
    d.Observe(true, microseconds(4000));
  }
  EXPECT_FALSE(d.shared());
}

TEST(CpuSharingDetectorTest, AQuickHandOverRestoresFullEvidence) {
  CpuSharingDetector d;
  d.Observe(true, microseconds(3));
  for (int i = 1; i < CpuSharingDetector::kOffAfter; ++i) d.Observe(false, microseconds(0));
  d.Observe(true, microseconds(3));
  for (int i = 1; i < CpuSharingDetector::kOffAfter; ++i) d.Observe(false, microseconds(0));
  EXPECT_TRUE(d.shared());
}

bool PinToCpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

int FirstAllowedCpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return -1;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) return cpu;
  }
  return -1;
}

// Two threads pinned to one CPU, both yielding through detectors made with `enabled`; how
// many of them saw the CPU shared (-1: the threads could not be pinned).
int ThreadsThatSawSharingOnOneCpu(bool enabled) {
  const int cpu = FirstAllowedCpu();
  if (cpu < 0) return -1;
  std::atomic<int> pinned{0};
  std::atomic<int> failed{0};
  std::atomic<int> saw_shared{0};
  auto yielder = [&] {
    if (!PinToCpu(cpu)) {
      ++failed;
      return;
    }
    ++pinned;
    for (int spin = 0; pinned.load() + failed.load() < 2 && spin < 100000000; ++spin) {
    }
    CpuSharingDetector d(enabled);
    bool shared = false;
    for (int i = 0; i < 2000 && !shared; ++i) {
      d.Yield();
      shared = d.shared();
    }
    if (shared) ++saw_shared;
  };
  std::thread a(yielder), b(yielder);
  a.join();
  b.join();
  return failed.load() > 0 ? -1 : saw_shared.load();
}

// Each hands the CPU to the other and gets it back at once, which is what ranks that wait for
// each other on a shared CPU do.
TEST(CpuSharingDetectorTest, TwoYieldingThreadsOnOneCpuSeeEachOther) {
  const int saw = ThreadsThatSawSharingOnOneCpu(/*enabled=*/true);
  if (saw < 0) GTEST_SKIP() << "cannot pin two threads to one CPU";
  EXPECT_GE(saw, 1) << "neither thread saw the other take its CPU and give it back";
}

TEST(CpuSharingDetectorTest, ADisabledDetectorOnlyYields) {
  const int saw = ThreadsThatSawSharingOnOneCpu(/*enabled=*/false);
  if (saw < 0) GTEST_SKIP() << "cannot pin two threads to one CPU";
  EXPECT_EQ(saw, 0) << "a disabled detector must leave waits spinning as configured";
}

}  // namespace
}  // namespace retort::collectives

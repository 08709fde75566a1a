// PollingThread: it ends when its step says so, and its destructor stops and joins a step loop
// that would go on, after at most the step in progress.
#include "tools/polling_thread.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace retort::tools {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

TEST(PollingThreadTest, EndsWhenItsStepReturnsFalse) {
  std::atomic<int> steps{0};
  PollingThread thread([&steps](const PollingThread&) { return ++steps < 3; });
  const auto deadline = steady_clock::now() + std::chrono::seconds(5);
  while (steps.load() < 3 && steady_clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(1));
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(steps.load(), 3);
}

TEST(PollingThreadTest, DestructorStopsALoopThatWouldGoOnAfterTheStepInProgress) {
  std::atomic<int> steps{0}, acted_after_stop{0};
  auto started = steady_clock::now();
  {
    PollingThread thread([&](const PollingThread& self) {
      std::this_thread::sleep_for(milliseconds(10));  // a bounded wait
      if (self.Stopping()) acted_after_stop++;        // what a watcher checks before acting
      steps++;
      return true;
    });
    const auto deadline = steady_clock::now() + std::chrono::seconds(5);
    while (steps.load() < 2 && steady_clock::now() < deadline)
      std::this_thread::sleep_for(milliseconds(1));
    started = steady_clock::now();
  }
  EXPECT_LT(steady_clock::now() - started, milliseconds(1000));
  const int at_destruction = steps.load();
  EXPECT_GE(at_destruction, 2);
  std::this_thread::sleep_for(milliseconds(30));
  EXPECT_EQ(steps.load(), at_destruction);  // joined: no step after the destructor
  EXPECT_LE(acted_after_stop.load(), 1);    // at most the step in progress saw Stopping()
}

}  // namespace
}  // namespace retort::tools

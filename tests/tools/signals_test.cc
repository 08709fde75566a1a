// TerminationSignalWatcher: callbacks while it lives, none after it is destroyed (a signal then
// stays pending instead of reaching objects main() has torn down).
#include "tools/signals.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace retort::tools {
namespace {

bool SigtermPending() {
  sigset_t pending;
  sigpending(&pending);
  return sigismember(&pending, SIGTERM) == 1;
}

TEST(TerminationSignalWatcherTest, CallsBackWhileAliveAndNeverAfterDestruction) {
  BlockTerminationSignals();
  std::atomic<int> calls{0};
  {
    TerminationSignalWatcher watcher([&calls](int sig) {
      EXPECT_EQ(sig, SIGTERM);
      calls++;
    });
    kill(getpid(), SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (calls.load() == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(calls.load(), 1);
  }
  kill(getpid(), SIGTERM);
  std::this_thread::sleep_for(3 * PollingThread::kPollInterval);
  EXPECT_EQ(calls.load(), 1) << "a callback ran after the watcher was destroyed";
  EXPECT_TRUE(SigtermPending()) << "the signal after destruction must stay blocked and pending";
  // Consume it so the test process ends normally.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  int sig = 0;
  sigwait(&set, &sig);
}

}  // namespace
}  // namespace retort::tools

// Turns SIGINT/SIGTERM into a callback on a dedicated thread (sigtimedwait), so shutdown logic
// runs in normal thread context. Call BlockTerminationSignals() first thing in main(), before any
// thread starts, so every thread inherits the blocked mask.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <functional>
#include <thread>

namespace retort::tools {

inline void BlockTerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// Calls on_signal(signo) on its own thread for every SIGINT/SIGTERM while it exists. Declare
// it after everything the callback touches: its destructor stops and joins the thread (within
// kPollInterval), so no callback runs on objects main() has already destroyed. A signal that
// arrives after that stays blocked and pending, and the process ends as main() decides.
// (A detached watcher once called a destroyed WorkerAgent when retort-run sent SIGTERM to a
// worker that was already returning from main: a mutex assertion, status 134.)
class TerminationSignalWatcher {
 public:
  static constexpr std::chrono::milliseconds kPollInterval{100};

  explicit TerminationSignalWatcher(std::function<void(int)> on_signal)
      : thread_([this, on_signal = std::move(on_signal)] {
          sigset_t set;
          sigemptyset(&set);
          sigaddset(&set, SIGINT);
          sigaddset(&set, SIGTERM);
          const timespec poll{0,
                              static_cast<long>(std::chrono::nanoseconds(kPollInterval).count())};
          while (!stop_.load()) {
            const int sig = sigtimedwait(&set, nullptr, &poll);
            if (sig > 0 && !stop_.load()) on_signal(sig);
          }
        }) {}
  ~TerminationSignalWatcher() {
    stop_ = true;
    thread_.join();
  }
  TerminationSignalWatcher(const TerminationSignalWatcher&) = delete;
  TerminationSignalWatcher& operator=(const TerminationSignalWatcher&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last member: starts after stop_ exists
};

}  // namespace retort::tools

// Turns SIGINT/SIGTERM into a callback on a dedicated thread (sigtimedwait), so shutdown logic
// runs in normal thread context. Call BlockTerminationSignals() first thing in main(), before any
// thread starts, so every thread inherits the blocked mask.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <ctime>
#include <functional>

#include "tools/polling_thread.h"

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
// PollingThread::kPollInterval), so no callback runs on objects main() has already destroyed. A
// signal that arrives after that stays blocked and pending, and the process ends as main() decides.
// (A detached watcher once called a destroyed WorkerAgent when retort-run sent SIGTERM to a
// worker that was already returning from main: a mutex assertion, status 134.)
class TerminationSignalWatcher {
 public:
  explicit TerminationSignalWatcher(std::function<void(int)> on_signal)
      : thread_([on_signal = std::move(on_signal)](const PollingThread& self) {
          sigset_t set;
          sigemptyset(&set);
          sigaddset(&set, SIGINT);
          sigaddset(&set, SIGTERM);
          const timespec poll{
              0, static_cast<long>(std::chrono::nanoseconds(PollingThread::kPollInterval).count())};
          const int sig = sigtimedwait(&set, nullptr, &poll);
          if (sig > 0 && !self.Stopping()) on_signal(sig);
          return true;
        }) {}

 private:
  PollingThread thread_;
};

}  // namespace retort::tools

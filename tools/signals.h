// Turns SIGINT/SIGTERM into a callback on a dedicated thread (sigwait), so shutdown logic runs
// in normal thread context. Call BlockTerminationSignals() first thing in main(), before any
// thread starts, so every thread inherits the blocked mask.
#pragma once

#include <pthread.h>
#include <signal.h>

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

// Calls on_signal(signo) for every SIGINT/SIGTERM until the process exits. Detached.
inline void WatchTerminationSignals(std::function<void(int)> on_signal) {
  std::thread([on_signal = std::move(on_signal)] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    while (true) {
      int sig = 0;
      if (sigwait(&set, &sig) == 0) on_signal(sig);
    }
  }).detach();
}

}  // namespace retort::tools

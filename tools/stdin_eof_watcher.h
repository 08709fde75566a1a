// Calls on_eof() once, on its own thread, when standard input reaches its end (or fails), for
// retort-run --stop-on-stdin-eof: a parent program that holds a pipe to the launcher's
// standard input closes it when it ends, however it ends (a SIGKILLed notebook kernel
// included), and the job then stops as on SIGTERM instead of outliving it. What arrives on
// standard input is read and ignored. Polls in bounded waits: the destructor stops and joins
// the thread within PollingThread::kPollInterval. Declare it after everything the callback touches.
#pragma once

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <functional>

#include "tools/polling_thread.h"

namespace retort::tools {

class StdinEofWatcher {
 public:
  explicit StdinEofWatcher(std::function<void()> on_eof)
      : thread_([on_eof = std::move(on_eof)](const PollingThread& self) {
          if (!AtEnd()) return true;
          if (!self.Stopping()) on_eof();
          return false;
        }) {}

 private:
  // Waits at most PollingThread::kPollInterval; true when standard input ended or cannot be read.
  static bool AtEnd() {
    pollfd p{STDIN_FILENO, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(PollingThread::kPollInterval.count()));
    if (ready == 0 || (ready < 0 && errno == EINTR)) return false;
    if (ready < 0 || (p.revents & (POLLERR | POLLNVAL))) return true;
    char ignored[256];
    const ssize_t n = read(STDIN_FILENO, ignored, sizeof(ignored));  // readable: does not block
    return n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN);
  }

  PollingThread thread_;
};

}  // namespace retort::tools

// A thread that repeats one bounded wait until its owner is destroyed: the shape of the tools'
// watchers (termination signals, the end of standard input), each of which waits at most a
// poll interval at a time so that its destructor returns within one interval.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

namespace retort::tools {

class PollingThread {
 public:
  // How long one step of the tools' watchers waits at most: the destructor's bound.
  static constexpr std::chrono::milliseconds kPollInterval{100};

  // Calls step(*this) on a new thread until step returns false or the destructor runs. step
  // must return within a bounded wait (the destructor joins after the step in progress), and
  // must check Stopping() before it acts on what it waited for: once the destructor began, the
  // objects its callback touches may be going.
  explicit PollingThread(std::function<bool(const PollingThread&)> step)
      : thread_([this, step = std::move(step)] {
          while (!Stopping() && step(*this)) {
          }
        }) {}
  ~PollingThread() {
    stop_ = true;
    thread_.join();
  }
  PollingThread(const PollingThread&) = delete;
  PollingThread& operator=(const PollingThread&) = delete;

  bool Stopping() const { return stop_.load(); }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last member: starts after stop_ exists
};

}  // namespace retort::tools

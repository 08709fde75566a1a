// Clock seam so that time-dependent logic (heartbeat deadlines, backoff) is testable with a
// fake clock. Implementations are thread-safe.
#pragma once

#include <atomic>
#include <chrono>

namespace retort {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::chrono::steady_clock::time_point Now() const = 0;
};

class RealClock final : public Clock {
 public:
  std::chrono::steady_clock::time_point Now() const override {
    return std::chrono::steady_clock::now();
  }
};

// Starts at an arbitrary epoch; only moves when Advance() is called.
class FakeClock final : public Clock {
 public:
  std::chrono::steady_clock::time_point Now() const override {
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(now_ns_.load()));
  }
  void Advance(std::chrono::nanoseconds d) { now_ns_ += d.count(); }

 private:
  std::atomic<int64_t> now_ns_{1'000'000'000};
};

}  // namespace retort

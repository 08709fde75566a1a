// Deadlines: every blocking call in retort takes one. Monotonic (steady_clock) based.
#pragma once

#include <chrono>
#include <cstdint>

namespace retort {

using SteadyClock = std::chrono::steady_clock;
using Milliseconds = std::chrono::milliseconds;

// An absolute point on the steady clock after which an operation must give up.
// Value type, thread-compatible.
class Deadline {
 public:
  static Deadline After(std::chrono::nanoseconds d) { return Deadline(SteadyClock::now() + d); }
  static Deadline AfterMs(int64_t ms) { return After(Milliseconds(ms)); }
  static Deadline Never() { return Deadline(SteadyClock::time_point::max()); }

  explicit Deadline(SteadyClock::time_point when) : when_(when) {}

  SteadyClock::time_point when() const { return when_; }
  bool Expired() const { return SteadyClock::now() >= when_; }
  bool IsNever() const { return when_ == SteadyClock::time_point::max(); }
  // Time left, clamped at zero.
  std::chrono::nanoseconds Remaining() const {
    if (IsNever()) return std::chrono::nanoseconds::max();
    auto left = when_ - SteadyClock::now();
    return left.count() < 0 ? std::chrono::nanoseconds(0) : left;
  }
  int64_t RemainingMs() const {
    if (IsNever()) return INT64_MAX;
    return std::chrono::duration_cast<Milliseconds>(Remaining()).count();
  }
  // The earlier of the two.
  Deadline Min(const Deadline& other) const { return when_ < other.when_ ? *this : other; }

 private:
  SteadyClock::time_point when_;
};

}  // namespace retort

// Exponential backoff: with full jitter for reconnect loops (Backoff, thread-compatible), and
// without (DoublingDelay, pure) for waits whose exact value is part of a contract.
#pragma once

#include <algorithm>
#include <chrono>
#include <random>

namespace retort {

class Backoff {
 public:
  Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max,
          uint64_t seed = std::random_device{}())
      : initial_(initial), max_(max), current_(initial), rng_(seed) {}

  // Next wait: uniform in [current/2, current], then current doubles up to max.
  std::chrono::milliseconds Next() {
    auto upper = current_.count();
    std::uniform_int_distribution<long long> dist(upper / 2, upper);
    auto wait = std::chrono::milliseconds(dist(rng_));
    current_ = std::min(max_, current_ * 2);
    return wait;
  }
  void Reset() { current_ = initial_; }

 private:
  std::chrono::milliseconds initial_, max_, current_;
  std::mt19937_64 rng_;
};

// The n-th wait (n >= 1) of a backoff without jitter: `initial` doubled n - 1 times, at most
// `max` (no overflow for any n). For waits a user or a test reads exactly: the launcher's
// restart delay, a retry schedule after a failed write. Reconnect loops use Backoff.
inline std::chrono::milliseconds DoublingDelay(std::chrono::milliseconds initial,
                                               std::chrono::milliseconds max, int n) {
  if (initial.count() <= 0) return std::min(initial, max);  // nothing to double
  auto delay = initial;
  for (int i = 1; i < n && delay < max; ++i) delay *= 2;
  return std::min(delay, max);
}

}  // namespace retort

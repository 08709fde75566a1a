// Exponential backoff with full jitter for reconnect loops. Thread-compatible.
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

}  // namespace retort

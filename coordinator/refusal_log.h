// Logs refused RPCs with the peer that sent them, at most kPerSecond lines a second: a flood of
// forged or over-limit calls must not turn into a flood of log lines. What was suppressed is
// counted and said with the next line that gets through. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "common/mutex.h"

namespace retort::coordinator {

class RefusalLog {
 public:
  static constexpr int kPerSecond = 20;
  // `peer` as gRPC names it ("ipv4:127.0.0.1:41234") plus any identity ("worker w1-3").
  void Refused(const std::string& method, const std::string& peer, const std::string& why)
      RETORT_EXCLUDES(mu_);
  // Lines logged and suppressed so far (tests).
  int64_t logged() const RETORT_EXCLUDES(mu_);
  int64_t suppressed() const RETORT_EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  std::chrono::steady_clock::time_point window_ RETORT_GUARDED_BY(mu_);
  int in_window_ RETORT_GUARDED_BY(mu_) = 0;
  int64_t logged_ RETORT_GUARDED_BY(mu_) = 0;
  int64_t suppressed_ RETORT_GUARDED_BY(mu_) = 0;  // total
  int64_t unreported_ RETORT_GUARDED_BY(mu_) = 0;  // since the last line
};

}  // namespace retort::coordinator

#include "common/retry.h"

namespace retort {

bool IsRetryable(StatusCode code) {
  return code == StatusCode::kUnavailable || code == StatusCode::kDeadlineExceeded ||
         code == StatusCode::kCancelled;
}

bool SleepFor(std::chrono::milliseconds wait) {
  std::this_thread::sleep_for(wait);
  return true;
}

}  // namespace retort

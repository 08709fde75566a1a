#include "coordinator/refusal_log.h"

#include "common/logging.h"

namespace retort::coordinator {

void RefusalLog::Refused(const std::string& method, const std::string& peer,
                         const std::string& why) {
  int64_t unreported = 0;
  {
    MutexLock lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    if (now - window_ >= std::chrono::seconds(1)) {
      window_ = now;
      in_window_ = 0;
    }
    if (in_window_ >= kPerSecond) {
      ++suppressed_;
      ++unreported_;
      return;
    }
    ++in_window_;
    ++logged_;
    unreported = unreported_;
    unreported_ = 0;
  }
  LOG_WARN("coordinator") << "refused " << method << " from " << peer << ": " << why.substr(0, 512)
                          << (unreported > 0 ? " (and " + std::to_string(unreported) +
                                                   " more refusals not logged)"
                                             : "");
}

int64_t RefusalLog::logged() const {
  MutexLock lock(mu_);
  return logged_;
}

int64_t RefusalLog::suppressed() const {
  MutexLock lock(mu_);
  return suppressed_;
}

}  // namespace retort::coordinator

#include "worker/pause_points.h"

#include <unistd.h>

#include <thread>

#include "common/args.h"
#include "common/deadline.h"
#include "common/logging.h"

namespace retort::worker {

StatusOr<std::map<std::string, int64_t>> PausePoints::Parse(const std::vector<std::string>& specs) {
  std::map<std::string, int64_t> armed;
  for (const auto& spec : specs) {
    const auto colon = spec.rfind(':');
    const std::string point = spec.substr(0, colon);
    if (colon == std::string::npos ||
        (point != kPauseCheckpointWrite && point != kPauseGenerationSwitch))
      return InvalidArgumentError("--pause-at='" + spec + "': expected POINT:MS with POINT " +
                                  kPauseCheckpointWrite + " or " + kPauseGenerationSwitch);
    auto ms = ParseInt64(spec.substr(colon + 1), "milliseconds");
    if (!ms.ok() || *ms < 1 || *ms > 600000)
      return InvalidArgumentError("--pause-at='" + spec + "': MS must be in [1, 600000]");
    armed[point] = *ms;
  }
  return armed;
}

bool PausePoints::Reach(const std::string& point, const std::string& detail,
                        const std::function<bool()>& released) {
  int64_t ms = 0;
  {
    MutexLock lock(mu_);
    auto it = armed_.find(point);
    if (it == armed_.end()) return false;
    ms = it->second;
    armed_.erase(it);
  }
  const pid_t pid = ::getpid();
  LOG_INFO("worker") << "PAUSE " << point << " (" << detail << ") for up to " << ms << " ms (pid "
                     << pid << ")";
  const Deadline deadline = Deadline::AfterMs(ms);
  while (!deadline.Expired() && !(released && released()))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  LOG_INFO("worker") << "PAUSE " << point << " over (pid " << pid << ")";
  return true;
}

}  // namespace retort::worker

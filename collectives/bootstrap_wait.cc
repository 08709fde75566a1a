#include "collectives/bootstrap_wait.h"

#include <thread>

namespace retort::collectives {

StatusOr<std::string> GetUnlessCancelled(BootstrapStore* store, const std::string& key,
                                         Deadline deadline, const std::function<bool()>& cancelled,
                                         const std::function<Status()>& cancelled_error,
                                         std::chrono::milliseconds poll) {
  if (!cancelled) return store->Get(key, deadline);
  while (true) {
    if (cancelled()) return cancelled_error();
    StatusOr<std::string> got = store->Get(key, deadline.Min(Deadline::After(poll)));
    if (got.ok() || got.status().code() != StatusCode::kDeadlineExceeded || deadline.Expired())
      return got;
  }
}

Status PollUntilDone(const std::function<StatusOr<bool>()>& poll, Deadline deadline,
                     const std::function<bool()>& cancelled,
                     const std::function<Status()>& cancelled_error, const std::string& what,
                     std::chrono::microseconds interval) {
  while (true) {
    RETORT_ASSIGN_OR_RETURN(bool done, poll());
    if (done) return Status::Ok();
    if (cancelled && cancelled()) return cancelled_error();
    if (deadline.Expired()) return DeadlineExceededError(what + ": timed out");
    std::this_thread::sleep_for(interval);
  }
}

}  // namespace retort::collectives

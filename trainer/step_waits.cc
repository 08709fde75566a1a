#include "trainer/step_waits.h"

namespace retort::trainer {

void StepWaits::Reset() {
  kept_.clear();
  host_waits_ = 0;
  stream_waits_ = 0;
}

Status StepWaits::Order(std::unique_ptr<CommHandle> handle, Deadline deadline, std::string what) {
  bool host_waited = true;
  Status status = handle->StreamWait(deadline, &host_waited);
  ++(host_waited ? host_waits_ : stream_waits_);
  if (!status.ok()) return status.WithContext(what);
  // A host wait already returned the status; a device-side one is confirmed after the read.
  if (!host_waited) kept_.emplace_back(std::move(handle), std::move(what));
  return Status::Ok();
}

Status StepWaits::HostWait(CommHandle& handle, Deadline deadline, const std::string& what) {
  ++host_waits_;
  return handle.Wait(deadline).WithContext(what);
}

Status StepWaits::Confirm(Deadline deadline) {
  Status first;
  for (auto& [handle, what] : kept_) {
    Status status = handle->Wait(deadline);
    if (first.ok() && !status.ok()) first = status.WithContext(what);
  }
  kept_.clear();
  return first;
}

}  // namespace retort::trainer

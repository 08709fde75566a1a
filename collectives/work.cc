#include "collectives/work.h"

#include <sched.h>

#include "collectives/cpu_sharing.h"

namespace retort::collectives {
namespace {
constexpr auto kSpinBeforeSleep = std::chrono::microseconds(20);
}  // namespace

Status Work::Wait(Deadline deadline) {
  if (driver_ && !IsCompleted()) driver_(this, deadline);
  // Short operations finish within microseconds: check a little before paying for a sleep
  // and a wake-up through the scheduler. While this process's polling threads see their CPUs
  // shared with other waiters (cpu_sharing.h), check between yields instead of spinning: the
  // thread that will complete this work may be waiting for this very CPU.
  const auto spin_until = SteadyClock::now() + kSpinBeforeSleep;
  const bool yield = CpuSharingDetector::RecentlySharedInThisProcess();
  while (!done_fast_.load(std::memory_order_acquire) && SteadyClock::now() < spin_until) {
    if (yield) sched_yield();
  }
  MutexLock lock(mu_);
  auto done = [&]() RETORT_REQUIRES(mu_) { return done_; };
  if (deadline.IsNever()) {
    cv_.Wait(mu_, done);
  } else if (!cv_.WaitUntil(mu_, deadline.when(), done)) {
    return DeadlineExceededError(description_ + " still running at the wait deadline");
  }
  return status_;
}

Status Work::StreamWait(DeviceEvents& consumer, Deadline deadline, bool* host_waited) {
  // With a done event the wait is device-side even when the Work already completed (waiting
  // for a finished event costs the device nothing): the count of host waits then does not
  // depend on how fast the watchdog saw it finish.
  if (done_event_ != nullptr) {
    if (host_waited) *host_waited = false;
    return consumer.StreamWait(*done_event_).WithContext(description_ + ": stream wait");
  }
  if (host_waited) *host_waited = true;
  return Wait(deadline);
}

bool Work::IsCompleted() const {
  MutexLock lock(mu_);
  return done_;
}

Status Work::status() const {
  MutexLock lock(mu_);
  if (!done_) return UnavailableError(description_ + " is still running");
  return status_;
}

void Work::Abort() { abort_requested_.store(true, std::memory_order_relaxed); }

void Work::Complete(Status status) {
  {
    MutexLock lock(mu_);
    if (done_) return;
    done_ = true;
    status_ = std::move(status);
    done_fast_.store(true, std::memory_order_release);
  }
  cv_.NotifyAll();
}

WorkPtr CompletedWork(std::string description, Status status) {
  auto work = std::make_shared<Work>(std::move(description), Deadline::Never());
  work->Complete(std::move(status));
  return work;
}

}  // namespace retort::collectives

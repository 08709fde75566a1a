#include "collectives/work.h"

namespace retort::collectives {
namespace {
constexpr auto kSpinBeforeSleep = std::chrono::microseconds(20);
}  // namespace

Status Work::Wait(Deadline deadline) {
  if (driver_ && !IsCompleted()) driver_(this, deadline);
  // Short operations finish within microseconds: check a little before paying for a sleep
  // and a wake-up through the scheduler.
  const auto spin_until = SteadyClock::now() + kSpinBeforeSleep;
  while (!done_fast_.load(std::memory_order_acquire) && SteadyClock::now() < spin_until) {
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (deadline.IsNever()) {
    cv_.wait(lock, [&] { return done_; });
  } else if (!cv_.wait_until(lock, deadline.when(), [&] { return done_; })) {
    return DeadlineExceededError(description_ + " still running at the wait deadline");
  }
  return status_;
}

bool Work::IsCompleted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

Status Work::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!done_) return UnavailableError(description_ + " is still running");
  return status_;
}

void Work::Abort() { abort_requested_.store(true, std::memory_order_relaxed); }

void Work::Complete(Status status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    done_ = true;
    status_ = std::move(status);
    done_fast_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

WorkPtr CompletedWork(std::string description, Status status) {
  auto work = std::make_shared<Work>(std::move(description), Deadline::Never());
  work->Complete(std::move(status));
  return work;
}

}  // namespace retort::collectives

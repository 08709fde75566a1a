// Work: the handle of one asynchronous operation (c10d style).
//
// Contract:
//  - Backends complete every Work exactly once (Complete), at the latest when the
//    operation's own deadline (CollectiveOptions::timeout) has passed; a dead peer therefore
//    surfaces as an error, never a hang.
//  - Errors raised on a backend's progress thread are stored here and returned by Wait() on
//    the caller's thread.
//  - The buffers of an operation belong to the backend until IsCompleted() is true, also
//    after Abort() and after a Wait() that returned DEADLINE_EXCEEDED.
// Thread-safe: any thread may Wait, poll, or Abort.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "collectives/ready_event.h"
#include "common/deadline.h"
#include "common/mutex.h"
#include "common/status.h"

namespace retort::collectives {

class Work {
 public:
  explicit Work(std::string description, Deadline deadline)
      : description_(std::move(description)), deadline_(deadline) {}
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // Blocks until the operation completed or `deadline` passed. Returns the operation's
  // status, or DEADLINE_EXCEEDED if it is still running at `deadline` (it keeps running: call
  // Abort() to stop it, then Wait() again to know its buffers are free).
  Status Wait(Deadline deadline) RETORT_EXCLUDES(mu_);
  // Blocks until completion. Terminates because backends enforce the operation's deadline.
  Status Wait() { return Wait(Deadline::Never()); }
  bool IsCompleted() const RETORT_EXCLUDES(mu_);
  // The final status once completed; UNAVAILABLE("still running") before.
  Status status() const RETORT_EXCLUDES(mu_);
  // Asks the backend to stop the operation: it completes with ABORTED soon. Peers are then
  // out of step, so backends treat the whole communicator as broken afterwards.
  void Abort();

  // Orders the work `consumer` enqueues from now on after this operation. When the backend
  // completes the operation on a device stream (done_event() set: NCCL), the wait is
  // device-side (DeviceEvents::StreamWait): the host does not wait, and OK says nothing about
  // the operation, whose status Wait() reports later (after a host read that followed the
  // device work, Wait() returns at once or within the backend's watchdog period). Otherwise
  // (host-driven backends, compositions) the host waits: Wait(deadline), whose status is
  // returned. `host_waited` (may be null) says which of the two it was.
  Status StreamWait(DeviceEvents& consumer, Deadline deadline, bool* host_waited = nullptr);
  // The event after the operation's last device work, on the backend's stream; null when the
  // backend does not complete on a device stream. Set by the backend before the Work is shared.
  const ReadyEventPtr& done_event() const { return done_event_; }

  const std::string& description() const { return description_; }
  // The point after which the backend fails the operation with DEADLINE_EXCEEDED.
  Deadline deadline() const { return deadline_; }

  // --- backend side ---
  // Caller-driven progress: Wait() first calls `driver(this, wait_deadline)` on the waiting
  // thread, which runs the backend's queued work until this Work completes (or it cannot).
  void SetDriver(std::function<void(Work*, Deadline)> driver) { driver_ = std::move(driver); }
  // Device backends: the event recorded after the operation's device work (see StreamWait).
  // Before the Work is shared.
  void SetDoneEvent(ReadyEventPtr event) { done_event_ = std::move(event); }
  // Completes the work; later calls are ignored (first status wins).
  void Complete(Status status) RETORT_EXCLUDES(mu_);
  bool abort_requested() const { return abort_requested_.load(std::memory_order_relaxed); }
  const std::atomic<bool>* abort_flag() const { return &abort_requested_; }

 private:
  const std::string description_;
  const Deadline deadline_;
  std::atomic<bool> abort_requested_{false};
  std::function<void(Work*, Deadline)> driver_;  // set before the Work is shared
  ReadyEventPtr done_event_;                     // set before the Work is shared
  mutable Mutex mu_;
  CondVar cv_;
  bool done_ RETORT_GUARDED_BY(mu_) = false;
  std::atomic<bool> done_fast_{false};  // mirrors done_ for the lock-free spin in Wait
  Status status_ RETORT_GUARDED_BY(mu_);
};

using WorkPtr = std::shared_ptr<Work>;

// A Work that is already complete (argument errors, empty operations).
WorkPtr CompletedWork(std::string description, Status status);

}  // namespace retort::collectives

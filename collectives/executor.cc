#include "collectives/executor.h"

#include "common/logging.h"

namespace retort::collectives {

OpExecutor::OpExecutor(std::string name, std::function<bool()> idle_hook, ProgressMode mode)
    : name_(std::move(name)), idle_hook_(std::move(idle_hook)), mode_(mode) {
  if (mode_ == ProgressMode::kBackgroundThread) thread_ = std::thread([this] { Run(); });
}

OpExecutor::~OpExecutor() { Stop(); }

void OpExecutor::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  Break(AbortedError(name_ + " was stopped"));
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
  MutexLock drive(drive_mu_);
  std::deque<Entry> left;
  {
    MutexLock lock(mu_);
    left.swap(queue_);
  }
  for (Entry& e : left)
    e.work->Complete(AbortedError(e.work->description() + ": " + name_ + " was stopped"));
}

WorkPtr OpExecutor::Submit(std::string description, Deadline deadline, Op op) {
  return Enqueue(
      std::move(description), deadline,
      [op = std::move(op)](const WorkPtr& work) { return op(*work); }, false);
}

WorkPtr OpExecutor::SubmitDeferred(std::string description, Deadline deadline, DeferredOp op) {
  return Enqueue(std::move(description), deadline, std::move(op), true);
}

WorkPtr OpExecutor::Enqueue(std::string description, Deadline deadline, DeferredOp op,
                            bool deferred) {
  auto work = std::make_shared<Work>(name_ + ": " + description, deadline);
  if (mode_ == ProgressMode::kCallerThread) {
    work->SetDriver([this](Work* target, Deadline wait) { Drive(target, wait); });
  }
  {
    MutexLock lock(mu_);
    if (!broken_.ok()) {
      work->Complete(AbortedError(work->description() +
                                  ": communicator is broken after: " + broken_.ToString()));
      return work;
    }
    queue_.push_back(Entry{work, std::move(op), deferred});
  }
  cv_.NotifyAll();
  return work;
}

void OpExecutor::Abort(const std::string& reason) { Break(AbortedError(reason)); }

void OpExecutor::Break(const Status& reason) {
  {
    MutexLock lock(mu_);
    if (broken_.ok()) broken_ = reason;
  }
  aborted_.store(true);
  cv_.NotifyAll();
}

void OpExecutor::RunEntry(Entry entry) {
  Status broken;
  {
    MutexLock lock(mu_);
    broken = broken_;
  }
  if (!broken.ok()) {
    entry.work->Complete(AbortedError(entry.work->description() +
                                      ": communicator is broken after: " + broken.ToString()));
    return;
  }
  Status status = entry.op(entry.work);
  if (!status.ok()) {
    status = status.WithContext(entry.work->description());
    LOG_WARN("collectives") << status;
    Break(status);
  }
  if (!entry.deferred || !status.ok()) entry.work->Complete(status);
}

void OpExecutor::Run() {
  for (;;) {
    Entry entry;
    {
      MutexLock lock(mu_);
      while (!stopping_ && queue_.empty()) {
        if (idle_hook_) {
          lock.Unlock();
          const bool busy = idle_hook_();
          lock.Lock();
          if (busy) continue;
        }
        cv_.Wait(mu_, [&]() RETORT_REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
      }
      if (queue_.empty()) return;  // stopping and drained
      entry = std::move(queue_.front());
      queue_.pop_front();
    }
    RunEntry(std::move(entry));
  }
}

void OpExecutor::Drive(Work* target, Deadline wait_deadline) {
  MutexLock drive(drive_mu_);
  while (!target->IsCompleted() && !wait_deadline.Expired()) {
    Entry entry;
    bool have = false;
    {
      MutexLock lock(mu_);
      if (!queue_.empty()) {
        entry = std::move(queue_.front());
        queue_.pop_front();
        have = true;
      }
    }
    if (have) {
      RunEntry(std::move(entry));
    } else if (!idle_hook_ || !idle_hook_()) {
      return;  // nothing left that could complete the target here
    }
  }
}

}  // namespace retort::collectives

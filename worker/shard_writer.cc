#include "worker/shard_writer.h"

namespace retort::worker {

ShardWriter::ShardWriter(size_t max_queued)
    : max_queued_(max_queued > 0 ? max_queued : 1), thread_([this] { Loop(); }) {}

ShardWriter::~ShardWriter() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  thread_.join();  // Loop() runs every queued task before it returns
}

bool ShardWriter::Submit(std::function<void()> task) {
  {
    MutexLock lock(mu_);
    if (stopping_ || queue_.size() + (running_task_ ? 1 : 0) >= max_queued_) return false;
    queue_.push_back(std::move(task));
  }
  cv_.NotifyAll();
  return true;
}

bool ShardWriter::Drain(Deadline deadline) {
  MutexLock lock(mu_);
  auto idle = [this]() RETORT_REQUIRES(mu_) { return queue_.empty() && !running_task_; };
  if (deadline.IsNever()) {
    cv_.Wait(mu_, idle);
    return true;
  }
  return cv_.WaitUntil(mu_, deadline.when(), idle);
}

size_t ShardWriter::pending() const {
  MutexLock lock(mu_);
  return queue_.size() + (running_task_ ? 1 : 0);
}

void ShardWriter::Loop() {
  MutexLock lock(mu_);
  while (true) {
    cv_.Wait(mu_, [this]() RETORT_REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    running_task_ = true;
    lock.Unlock();
    task();
    lock.Lock();
    running_task_ = false;
    cv_.NotifyAll();
  }
}

}  // namespace retort::worker

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

bool ShardWriter::Submit(std::function<void()> task, TaskKind kind) {
  {
    MutexLock lock(mu_);
    const bool snapshot = kind == TaskKind::kSnapshot;
    size_t& count = snapshot ? snapshots_ : messages_;
    if (stopping_ || count >= (snapshot ? max_queued_ : kMaxMessages)) return false;
    ++count;
    queue_.push_back(Task{std::move(task), kind});
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
    Task task = std::move(queue_.front());
    queue_.pop_front();
    running_task_ = true;
    lock.Unlock();
    task.run();
    task.run = nullptr;  // drop what it captured (a snapshot's reference) before it counts as done
    lock.Lock();
    running_task_ = false;
    --(task.kind == TaskKind::kSnapshot ? snapshots_ : messages_);
    cv_.NotifyAll();
  }
}

}  // namespace retort::worker

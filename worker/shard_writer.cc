#include "worker/shard_writer.h"

namespace retort::worker {

ShardWriter::ShardWriter(size_t max_queued)
    : max_queued_(max_queued > 0 ? max_queued : 1), thread_([this] { Loop(); }) {}

ShardWriter::~ShardWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();  // Loop() runs every queued task before it returns
}

bool ShardWriter::Submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || queue_.size() + (running_task_ ? 1 : 0) >= max_queued_) return false;
    queue_.push_back(std::move(task));
  }
  cv_.notify_all();
  return true;
}

bool ShardWriter::Drain(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  auto idle = [this] { return queue_.empty() && !running_task_; };
  if (deadline.IsNever()) {
    cv_.wait(lock, idle);
    return true;
  }
  return cv_.wait_until(lock, deadline.when(), idle);
}

size_t ShardWriter::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size() + (running_task_ ? 1 : 0);
}

void ShardWriter::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    running_task_ = true;
    lock.unlock();
    task();
    lock.lock();
    running_task_ = false;
    cv_.notify_all();
  }
}

}  // namespace retort::worker

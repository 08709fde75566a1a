// ShardWriter: writes checkpoint shards off the training thread. The training thread takes a
// snapshot of its state (a memory copy: on GPUs this becomes the device-to-pinned copy) and
// submits a task that writes the shard and acks it to the coordinator; the next step starts at
// once. One background thread runs tasks in submission order; at most `max_queued` tasks wait
// or run, and Submit refuses more (the caller acks that checkpoint as failed) rather than
// letting snapshots pile up behind a slow disk.
//
// Threading: Submit, Drain and pending() may be called from any thread; tasks run on the
// writer's thread and must not touch state the training thread owns. The destructor drains.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>

#include "common/deadline.h"
#include "common/mutex.h"

namespace retort::worker {

class ShardWriter {
 public:
  explicit ShardWriter(size_t max_queued = 2);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Queues `task`; false (task dropped) when max_queued tasks are already waiting or running.
  bool Submit(std::function<void()> task) RETORT_EXCLUDES(mu_);
  // Waits until every submitted task has finished, or `deadline`; returns whether they have.
  bool Drain(Deadline deadline) RETORT_EXCLUDES(mu_);
  // Tasks waiting or running.
  size_t pending() const RETORT_EXCLUDES(mu_);

 private:
  void Loop() RETORT_EXCLUDES(mu_);

  const size_t max_queued_;
  mutable Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> queue_ RETORT_GUARDED_BY(mu_);
  bool running_task_ RETORT_GUARDED_BY(mu_) = false;
  bool stopping_ RETORT_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace retort::worker

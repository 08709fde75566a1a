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

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "common/deadline.h"

namespace retort::worker {

class ShardWriter {
 public:
  explicit ShardWriter(size_t max_queued = 2);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Queues `task`; false (task dropped) when max_queued tasks are already waiting or running.
  bool Submit(std::function<void()> task);
  // Waits until every submitted task has finished, or `deadline`; returns whether they have.
  bool Drain(Deadline deadline);
  // Tasks waiting or running.
  size_t pending() const;

 private:
  void Loop();

  const size_t max_queued_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // GUARDED_BY(mu_)
  bool running_task_ = false;                // GUARDED_BY(mu_)
  bool stopping_ = false;                    // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace retort::worker

// ShardWriter: writes checkpoint shards off the training thread. The training thread takes a
// snapshot of its state (a memory copy: on GPUs this becomes the device-to-pinned copy) and
// submits a task that begins the checkpoint with the coordinator, writes the shard and acks it;
// the next step starts at once. Nothing on the training thread waits on the coordinator: a
// checkpoint's coordinator calls (begin, ack, a refusal's ack) all run here.
// One background thread runs tasks in submission order. Two kinds, bounded apart: at most
// `max_queued` snapshot tasks wait or run, and Submit refuses more (the caller then queues a
// message saying that checkpoint failed) rather than letting snapshots pile up behind a slow
// disk; messages (coordinator calls that hold no snapshot) are bounded by kMaxMessages.
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
  // Snapshot tasks hold a copy of the training state; messages only talk to the coordinator.
  enum class TaskKind { kSnapshot, kMessage };
  static constexpr size_t kMaxMessages = 16;

  explicit ShardWriter(size_t max_queued = 2);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Queues `task`; false (task dropped) when as many tasks of its kind as its bound allows
  // (max_queued snapshots, kMaxMessages messages) are already waiting or running.
  bool Submit(std::function<void()> task, TaskKind kind = TaskKind::kSnapshot) RETORT_EXCLUDES(mu_);
  // Waits until every submitted task has finished, or `deadline`; returns whether they have.
  bool Drain(Deadline deadline) RETORT_EXCLUDES(mu_);
  // Tasks waiting or running.
  size_t pending() const RETORT_EXCLUDES(mu_);

 private:
  void Loop() RETORT_EXCLUDES(mu_);

  const size_t max_queued_;
  mutable Mutex mu_;
  CondVar cv_;
  struct Task {
    std::function<void()> run;
    TaskKind kind;
  };
  std::deque<Task> queue_ RETORT_GUARDED_BY(mu_);
  bool running_task_ RETORT_GUARDED_BY(mu_) = false;
  // Tasks of each kind waiting or running.
  size_t snapshots_ RETORT_GUARDED_BY(mu_) = 0;
  size_t messages_ RETORT_GUARDED_BY(mu_) = 0;
  bool stopping_ RETORT_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace retort::worker

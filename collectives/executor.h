// OpExecutor: runs a communicator's operations one at a time, in submission order, on its
// own thread, and completes their Work. Shared by the CPU backends and the hierarchical
// composition.
//
// Contract: an operation that fails breaks the executor (peers are out of step): queued and
// later operations complete at once with ABORTED naming the first error. Abort() breaks it
// from any thread and raises the abort flag running operations poll.
// Thread-safe. The destructor breaks the executor, drains the queue and joins the thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "collectives/work.h"

namespace retort::collectives {

class OpExecutor {
 public:
  // Runs on the executor thread; returns the operation's status.
  using Op = std::function<Status(Work& work)>;

  // `idle_hook`, if set, runs on the executor thread whenever the queue is empty and returns
  // true while it has background work (it is then called again rather than sleeping).
  explicit OpExecutor(std::string name, std::function<bool()> idle_hook = nullptr);
  ~OpExecutor();
  OpExecutor(const OpExecutor&) = delete;
  OpExecutor& operator=(const OpExecutor&) = delete;

  WorkPtr Submit(std::string description, Deadline deadline, Op op);
  // Like Submit, but when `op` returns OK the Work stays open: `op` keeps it and completes it
  // later (background transfers). An error completes it at once and breaks the executor.
  using DeferredOp = std::function<Status(const WorkPtr& work)>;
  WorkPtr SubmitDeferred(std::string description, Deadline deadline, DeferredOp op);
  void Abort(const std::string& reason);
  // Set when the executor broke (Abort or a failed operation); running operations poll it.
  const std::atomic<bool>* aborted_flag() const { return &aborted_; }

 private:
  struct Entry {
    WorkPtr work;
    DeferredOp op;
    bool deferred = false;
  };
  WorkPtr Enqueue(std::string description, Deadline deadline, DeferredOp op, bool deferred);
  void Run();
  void Break(const Status& reason);

  const std::string name_;
  const std::function<bool()> idle_hook_;
  std::atomic<bool> aborted_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Entry> queue_;  // guarded by mu_
  Status broken_;            // guarded by mu_; OK while healthy
  bool stopping_ = false;    // guarded by mu_
  std::thread thread_;
};

}  // namespace retort::collectives

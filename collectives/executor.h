// OpExecutor: runs a communicator's operations one at a time, in submission order, and
// completes their Work. Shared by the CPU backends and the hierarchical composition. Two
// progress modes:
//  - kBackgroundThread: an executor thread runs operations as soon as they are queued, so
//    communication overlaps the caller's computation (gradient buckets during backward).
//  - kCallerThread: no thread; operations run on the thread that waits for them (Work::Wait
//    runs every queued operation up to the awaited one, then background work until it
//    completes). No thread hand-offs per operation, so a blocking issue-then-wait loop is
//    cheapest, and it keeps its speed on a busy host; IsCompleted() alone does not progress.
//
// Contract: an operation that fails breaks the executor (peers are out of step): queued and
// later operations complete at once with ABORTED naming the first error. Abort() breaks it
// from any thread and raises the abort flag running operations poll.
// Thread-safe. The destructor breaks the executor and completes what is still queued.
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

enum class ProgressMode { kBackgroundThread, kCallerThread };

class OpExecutor {
 public:
  // Runs on the executing thread; returns the operation's status.
  using Op = std::function<Status(Work& work)>;
  // Like Op, but when it returns OK the Work stays open: the op keeps it and completes it
  // later (background transfers). An error completes it at once and breaks the executor.
  using DeferredOp = std::function<Status(const WorkPtr& work)>;

  // `idle_hook`, if set, runs on the executing thread whenever the queue is empty and returns
  // true while it has background work (it is then called again rather than sleeping).
  explicit OpExecutor(std::string name, std::function<bool()> idle_hook = nullptr,
                      ProgressMode mode = ProgressMode::kBackgroundThread);
  ~OpExecutor();
  OpExecutor(const OpExecutor&) = delete;
  OpExecutor& operator=(const OpExecutor&) = delete;

  WorkPtr Submit(std::string description, Deadline deadline, Op op);
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
  void Run();                                        // background thread body
  void RunEntry(Entry entry);                        // on the executing thread
  void Drive(Work* target, Deadline wait_deadline);  // caller mode: progress until done
  void Break(const Status& reason);

  const std::string name_;
  const std::function<bool()> idle_hook_;
  const ProgressMode mode_;
  std::atomic<bool> aborted_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Entry> queue_;  // guarded by mu_
  Status broken_;            // guarded by mu_; OK while healthy
  bool stopping_ = false;    // guarded by mu_
  std::mutex drive_mu_;      // caller mode: one driving thread at a time
  std::thread thread_;       // background mode only
};

}  // namespace retort::collectives

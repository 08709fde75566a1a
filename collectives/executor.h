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
// Thread-safe. Stop() (or the destructor, which calls it) breaks the executor, joins its thread
// and completes what is still queued.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <string>
#include <thread>

#include "collectives/work.h"
#include "common/mutex.h"

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
  ~OpExecutor();  // Stop()
  OpExecutor(const OpExecutor&) = delete;
  OpExecutor& operator=(const OpExecutor&) = delete;

  WorkPtr Submit(std::string description, Deadline deadline, Op op) RETORT_EXCLUDES(mu_);
  WorkPtr SubmitDeferred(std::string description, Deadline deadline, DeferredOp op)
      RETORT_EXCLUDES(mu_);
  void Abort(const std::string& reason) RETORT_EXCLUDES(mu_);
  // Breaks the executor, joins the background thread (after it returns, no operation and no
  // idle hook runs again) and completes every queued operation with ABORTED. Idempotent; not
  // from the executing thread itself (an operation or the idle hook).
  void Stop() RETORT_EXCLUDES(mu_, drive_mu_);
  // Set when the executor broke (Abort or a failed operation); running operations poll it.
  const std::atomic<bool>* aborted_flag() const { return &aborted_; }

 private:
  struct Entry {
    WorkPtr work;
    DeferredOp op;
    bool deferred = false;
  };
  WorkPtr Enqueue(std::string description, Deadline deadline, DeferredOp op, bool deferred)
      RETORT_EXCLUDES(mu_);
  void Run() RETORT_EXCLUDES(mu_);                  // background thread body
  void RunEntry(Entry entry) RETORT_EXCLUDES(mu_);  // on the executing thread
  // Caller mode: progress until done.
  void Drive(Work* target, Deadline wait_deadline) RETORT_EXCLUDES(mu_, drive_mu_);
  void Break(const Status& reason) RETORT_EXCLUDES(mu_);

  const std::string name_;
  const std::function<bool()> idle_hook_;
  const ProgressMode mode_;
  std::atomic<bool> aborted_{false};
  Mutex mu_;
  CondVar cv_;
  std::deque<Entry> queue_ RETORT_GUARDED_BY(mu_);
  Status broken_ RETORT_GUARDED_BY(mu_);  // OK while healthy
  bool stopping_ RETORT_GUARDED_BY(mu_) = false;
  Mutex drive_mu_;      // caller mode: one driving thread at a time
  std::thread thread_;  // background mode only
};

}  // namespace retort::collectives

// TraceRecorder: a Chrome trace-event JSON file (opens in Perfetto and chrome://tracing) for a
// window of steps [first, last]: on this rank's track (pid = its rank at the window's first
// step), thread 1 holds the step phases (laid end to end in the order the step runs them,
// from the moment it began waiting for its batch: data wait, teacher forward, student forward,
// backward, exposed communication, optimizer, then checkpoint; exposed communication is really
// split around the optimizer and is drawn as one slice), thread 2 the collectives the trainer
// launched (reduce-scatter buckets, all-gathers, all-reduces: from launch until the trainer's
// wait returned), and instant events mark generations started. Time is the wall clock in
// microseconds since the Unix epoch, so the files of all ranks share one axis (`retortctl trace
// merge` puts them in one file).
//
// The file is <dir>/trace-<first>-<last>-<node>-<local_rank>.json, written when the window's
// last step completes, or by Flush() (the job ended or the worker left inside the window).
//
// Threading: SetWindow may be called from any thread; everything else from the training thread,
// except OnCollective, which may come from any thread. All guarded by one mutex.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "worker/communicator_shard_comm.h"
#include "worker/step_record.h"

namespace retort::worker {

class TraceRecorder final : public StepObserver, public CollectiveListener {
 public:
  TraceRecorder(std::string dir, std::string node, int local_rank);
  // Asks for steps [first, last] (first >= 1). Ignored while that same window is being or was
  // recorded; a different one replaces a window not yet begun or being recorded (which is
  // written first, partial).
  void SetWindow(int64_t first, int64_t last) RETORT_EXCLUDES(mu_);
  // The training thread is about to run step `step`.
  void BeginStep(int64_t step) RETORT_EXCLUDES(mu_);
  void OnStep(const StepRecord& r) override RETORT_EXCLUDES(mu_);
  void OnGenerationStarted(uint64_t generation, int rank, int world_size, int64_t unix_us) override
      RETORT_EXCLUDES(mu_);
  void OnCollective(const char* op, int64_t elements, int64_t start_us, int64_t end_us) override
      RETORT_EXCLUDES(mu_);
  // Writes what the current window recorded so far (no-op when nothing was).
  void Flush() RETORT_EXCLUDES(mu_);
  // Path of the last file written ("" = none yet).
  std::string last_written() const RETORT_EXCLUDES(mu_);

 private:
  struct Event {
    std::string name, cat;
    char ph;  // 'X' complete, 'i' instant
    int tid;
    int64_t ts_us, dur_us;
    int64_t step;
    int64_t elements;
  };
  bool InWindowLocked(int64_t step) const RETORT_REQUIRES(mu_) {
    return step >= first_ && step <= last_;
  }
  void WriteLocked() RETORT_REQUIRES(mu_);

  const std::string dir_, node_;
  const int local_rank_;
  mutable Mutex mu_;
  int64_t first_ RETORT_GUARDED_BY(mu_) = 0;  // 0 = no window
  int64_t last_ RETORT_GUARDED_BY(mu_) = 0;
  // The window last written.
  int64_t done_first_ RETORT_GUARDED_BY(mu_) = 0;
  int64_t done_last_ RETORT_GUARDED_BY(mu_) = 0;
  int64_t current_step_ RETORT_GUARDED_BY(mu_) = 0;
  int rank_ RETORT_GUARDED_BY(mu_) = -1;  // rank at the first recorded step
  int current_rank_ RETORT_GUARDED_BY(mu_) = 0;
  std::vector<Event> events_ RETORT_GUARDED_BY(mu_);
  std::string last_written_ RETORT_GUARDED_BY(mu_);
};

}  // namespace retort::worker

// SessionMailbox: what the worker agent tells a TrainingSession, kept for its training thread.
//
// The agent's threads post (a new generation, heartbeat directives, "leave now"); the training
// thread reads at its own pace (waits for an assignment, samples the step-boundary flags, asks
// whether the generation it is building is already obsolete) and finally posts its result,
// which releases a leave waiting for it. It also holds the communicator the training thread is
// running: a generation that drops one of its member processes aborts it, so that a collective
// blocked on a dead peer returns at once instead of at its deadline.
//
// Threading: every method may be called from any thread; all state is behind one mutex, and
// the abort callback runs under it (it must not call back into the mailbox).
// Torch-free: the control-plane-only worker builds and tests it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/mutex.h"
#include "common/status.h"
#include "retort/v1/retort.pb.h"

namespace retort::worker {

// A generation this worker was told about, with its member id and rank in it (-1: not ranked).
struct Assignment {
  v1::Generation generation;
  std::string member_id;
  int rank = -1;
};

// Identifies a member's process across coordinator restarts, which give it a new member id:
// a process that re-joined keeps (node, local_rank, incarnation); a restarted one does not.
std::string MemberProcessKey(const v1::Member& member);

// What the training thread needs at a step boundary, read in one go.
struct StepBoundaryFlags {
  bool newer_generation = false;  // a generation after the active one was published
  bool leaving = false;
  bool paused = false;
  // The step window the coordinator asked to trace (0, 0: none asked).
  int64_t trace_first_step = 0;
  int64_t trace_last_step = 0;
};

// The checkpoint the coordinator's directives name (id 0: none).
struct PendingCheckpoint {
  uint64_t id = 0;
  int64_t step = 0;
};

class SessionMailbox {
 public:
  // --- Posted by the agent ---
  void PostGeneration(const v1::Generation& generation, const std::string& member_id, int rank)
      RETORT_EXCLUDES(mu_);
  void PostDirectives(const v1::Directives& directives) RETORT_EXCLUDES(mu_);
  // From now on the member is leaving: waits (up to `deadline`) until the training thread posts
  // its result, unless training never started.
  void LeaveAndWaitForTraining(Deadline deadline) RETORT_EXCLUDES(mu_);
  // The session's owner stops it: leaving, without waiting.
  void Leave() RETORT_EXCLUDES(mu_);

  // --- Start-up ---
  // Training was started (a re-join after a coordinator restart must not start it again).
  bool started() const RETORT_EXCLUDES(mu_);
  void MarkStarted() RETORT_EXCLUDES(mu_);

  // --- Read by the training thread ---
  // Waits for a running generation newer than `after` that ranks this worker and plans
  // `parameter_count` elements; nullopt when leaving, or (with *timed_out set) when `deadline`
  // passes before any newer generation was published (one that waits for more workers, or
  // excludes this worker, is progress: it does not time out).
  std::optional<Assignment> WaitForAssignment(uint64_t after, int64_t parameter_count,
                                              std::optional<Deadline> deadline, bool* timed_out)
      RETORT_EXCLUDES(mu_);
  // True once a generation newer than `generation` was published, or the member leaves.
  bool Superseded(uint64_t generation) const RETORT_EXCLUDES(mu_);
  bool leaving() const RETORT_EXCLUDES(mu_);
  std::optional<Assignment> latest() const RETORT_EXCLUDES(mu_);
  StepBoundaryFlags AtStepBoundary(uint64_t active_generation) const RETORT_EXCLUDES(mu_);
  PendingCheckpoint pending_checkpoint() const RETORT_EXCLUDES(mu_);

  // The communicator of `generation` that training now uses, with its member processes
  // (MemberProcessKey) and how to abort it; returns how many members the previously running
  // one had (0: none).
  size_t SetRunning(uint64_t generation, std::vector<std::string> member_processes,
                    std::function<void(const std::string& why)> abort) RETORT_EXCLUDES(mu_);
  // No communicator is in use (it is about to be destroyed); returns its member count.
  size_t ClearRunning() RETORT_EXCLUDES(mu_);

  // Training is over with `result` (OK: completed or left cleanly).
  void FinishTraining(Status result) RETORT_EXCLUDES(mu_);
  Status result() const RETORT_EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  CondVar cv_;
  std::optional<Assignment> latest_ RETORT_GUARDED_BY(mu_);
  bool leaving_ RETORT_GUARDED_BY(mu_) = false;
  bool paused_ RETORT_GUARDED_BY(mu_) = false;
  PendingCheckpoint checkpoint_ RETORT_GUARDED_BY(mu_);
  int64_t trace_first_step_ RETORT_GUARDED_BY(mu_) = 0;
  int64_t trace_last_step_ RETORT_GUARDED_BY(mu_) = 0;
  bool started_ RETORT_GUARDED_BY(mu_) = false;
  bool training_done_ RETORT_GUARDED_BY(mu_) = false;
  Status result_ RETORT_GUARDED_BY(mu_);
  // The running communicator (see SetRunning); abort empty when none.
  uint64_t running_generation_ RETORT_GUARDED_BY(mu_) = 0;
  std::vector<std::string> running_members_ RETORT_GUARDED_BY(mu_);
  std::function<void(const std::string&)> running_abort_ RETORT_GUARDED_BY(mu_);
};

}  // namespace retort::worker

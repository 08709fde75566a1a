#include "worker/session_mailbox.h"

namespace retort::worker {

std::string MemberProcessKey(const v1::Member& member) {
  if (member.identity().incarnation().empty()) return member.member_id();  // coordinator hides it
  return member.identity().node() + "/" + std::to_string(member.identity().local_rank()) + "/" +
         member.identity().incarnation();
}

void SessionMailbox::PostGeneration(const v1::Generation& generation, const std::string& member_id,
                                    int rank) {
  MutexLock lock(mu_);
  latest_ = Assignment{generation, member_id, rank};
  cv_.NotifyAll();
  if (!running_abort_ || generation.number() <= running_generation_) return;
  for (const auto& process : running_members_) {
    bool still_member = false;
    for (const auto& m : generation.members()) still_member |= MemberProcessKey(m) == process;
    if (!still_member) {
      // A member left without an agreed switch (evicted: dead or silent). Collectives with it
      // would only end at their deadline; abort them now. Harmless after an agreed switch,
      // when the communicator is no longer in use.
      running_abort_("generation " + std::to_string(generation.number()) + " no longer has " +
                     process);
      return;
    }
  }
}

void SessionMailbox::PostDirectives(const v1::Directives& directives) {
  MutexLock lock(mu_);
  paused_ = directives.paused();
  checkpoint_ = {directives.checkpoint_id(), directives.checkpoint_step()};
  if (directives.trace_last_step() > 0) {
    trace_first_step_ = directives.trace_first_step();
    trace_last_step_ = directives.trace_last_step();
  }
}

void SessionMailbox::LeaveAndWaitForTraining(Deadline deadline) {
  MutexLock lock(mu_);
  leaving_ = true;
  cv_.NotifyAll();
  if (!started_) return;
  cv_.WaitUntil(mu_, deadline.when(), [this]() RETORT_REQUIRES(mu_) { return training_done_; });
}

void SessionMailbox::Leave() {
  MutexLock lock(mu_);
  leaving_ = true;
  cv_.NotifyAll();
}

bool SessionMailbox::started() const {
  MutexLock lock(mu_);
  return started_;
}

void SessionMailbox::MarkStarted() {
  MutexLock lock(mu_);
  started_ = true;
}

std::optional<Assignment> SessionMailbox::WaitForAssignment(uint64_t after, int64_t parameter_count,
                                                            std::optional<Deadline> deadline,
                                                            bool* timed_out) {
  MutexLock lock(mu_);
  while (true) {
    if (leaving_) return std::nullopt;
    if (latest_ && latest_->generation.number() > after && latest_->rank >= 0 &&
        latest_->generation.state() == v1::JOB_STATE_RUNNING &&
        latest_->generation.plan().total_elements() == parameter_count)
      return latest_;
    if (deadline && deadline->Expired() && !(latest_ && latest_->generation.number() > after)) {
      *timed_out = true;
      return std::nullopt;
    }
    // Bounded so that the deadline is checked without a post.
    cv_.WaitFor(mu_, std::chrono::milliseconds(200));
  }
}

bool SessionMailbox::Superseded(uint64_t generation) const {
  MutexLock lock(mu_);
  return leaving_ || (latest_ && latest_->generation.number() > generation);
}

bool SessionMailbox::leaving() const {
  MutexLock lock(mu_);
  return leaving_;
}

std::optional<Assignment> SessionMailbox::latest() const {
  MutexLock lock(mu_);
  return latest_;
}

StepBoundaryFlags SessionMailbox::AtStepBoundary(uint64_t active_generation) const {
  MutexLock lock(mu_);
  StepBoundaryFlags flags;
  flags.newer_generation = latest_ && latest_->generation.number() > active_generation;
  flags.leaving = leaving_;
  flags.paused = paused_;
  flags.trace_first_step = trace_first_step_;
  flags.trace_last_step = trace_last_step_;
  return flags;
}

PendingCheckpoint SessionMailbox::pending_checkpoint() const {
  MutexLock lock(mu_);
  return checkpoint_;
}

size_t SessionMailbox::SetRunning(uint64_t generation, std::vector<std::string> member_processes,
                                  std::function<void(const std::string& why)> abort) {
  MutexLock lock(mu_);
  const size_t previous = running_members_.size();
  running_generation_ = generation;
  running_members_ = std::move(member_processes);
  running_abort_ = std::move(abort);
  return previous;
}

size_t SessionMailbox::ClearRunning() {
  MutexLock lock(mu_);
  const size_t previous = running_members_.size();
  running_generation_ = 0;
  running_members_.clear();
  running_abort_ = nullptr;
  return previous;
}

void SessionMailbox::FinishTraining(Status result) {
  {
    MutexLock lock(mu_);
    result_ = std::move(result);
    training_done_ = true;
  }
  cv_.NotifyAll();
}

Status SessionMailbox::result() const {
  MutexLock lock(mu_);
  return result_;
}

}  // namespace retort::worker

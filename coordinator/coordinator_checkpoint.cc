// Coordinated checkpoints: the coordinator names the step, every member of the generation writes
// its shard and acks with per-file checksums, and the coordinator commits the manifest last
// (atomically). A checkpoint without a committed manifest does not exist. What is on disk is
// CheckpointFiles' (checkpoint_files.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <system_error>

#include "common/logging.h"
#include "common/unix_time.h"
#include "coordinator/checkpoint_health.h"
#include "coordinator/coordinator.h"
#include "rpc/job_state.h"

namespace retort::coordinator {

void Coordinator::AbortPendingCheckpointLocked(const std::string& why, bool failed) {
  if (!pending_checkpoint_) return;
  uint64_t id = pending_checkpoint_->id;
  const int64_t step = pending_checkpoint_->step;
  pending_checkpoint_.reset();
  if (options_.observer) options_.observer->OnCheckpointAborted();
  // It can never commit: remove what its writers left (shards, temp files). A writer still
  // busy recreates the directory; the next start removes it (CheckpointFiles::RemoveDebris).
  checkpoint_files_.Remove(id);
  EmitLocked("checkpoint_aborted", "checkpoint " + std::to_string(id) + " aborted: " + why);
  if (!failed) return;
  failed_checkpoint_step_ = step;
  CheckpointHealthAfterFailure(&checkpoint_health_, step, why, UnixMillisNow());
  const auto& c = state_.job().checkpoint();
  const int32_t limit = c.has_max_consecutive_failures() ? c.max_consecutive_failures()
                                                         : kDefaultMaxConsecutiveCheckpointFailures;
  if (limit > 0 && checkpoint_health_.consecutive_failures() >= limit &&
      state_.state() == v1::JOB_STATE_RUNNING) {
    // Training on without durable checkpoints would pile up work a crash loses: the members
    // stop at a step boundary, keeping everything in memory, until an operator who fixed the
    // cause resumes (or stops) the job.
    SetStateLocked(v1::JOB_STATE_PAUSED, std::to_string(checkpoint_health_.consecutive_failures()) +
                                             " checkpoints in a row failed to commit, the last: " +
                                             why + "; fix it and `retortctl resume`");
  }
}

int64_t Coordinator::CheckpointMarginStepsLocked() const {
  double step_seconds = 0;
  for (const auto& [id, m] : members_)
    step_seconds = std::max(step_seconds, m.metrics.step_seconds());
  if (step_seconds <= 0) return 2;
  // Step times come from the members' heartbeats: a tiny one (1e-300 s) must not overflow the
  // conversion (inf or > 2^63 steps is undefined behaviour); no job runs more steps than this.
  constexpr double kMaxMarginSteps = 1e9;
  const double margin = std::ceil(2.5 * options_.heartbeat_interval_ms / 1000.0 / step_seconds);
  return static_cast<int64_t>(std::clamp(margin, 2.0, kMaxMarginSteps));
}

Status Coordinator::StartPendingCheckpointLocked(int64_t step, uint64_t generation,
                                                 const std::string& why) {
  PendingCheckpoint p;
  p.id = state_.next_checkpoint_id();
  p.step = step;
  p.generation = generation;
  state_.set_next_checkpoint_id(p.id + 1);
  Status st = PersistLocked();
  if (!st.ok()) return UnavailableError("cannot persist state: " + st.message());
  pending_checkpoint_ = p;
  EmitLocked("checkpoint_requested", "checkpoint " + std::to_string(p.id) + " at step " +
                                         std::to_string(p.step) + " (" + why + ")");
  return Status::Ok();
}

void Coordinator::MaybeStartPeriodicCheckpointLocked() {
  const int64_t every = state_.job().checkpoint().every_steps();
  if (every <= 0 || pending_checkpoint_ || state_.state() != v1::JOB_STATE_RUNNING ||
      !generation_ || generation_->members_size() == 0)
    return;
  const int64_t margin = CheckpointMarginStepsLocked();
  const int64_t fastest = MaxMemberStepLocked();
  // The next multiple after the last committed or attempted one that no member has passed.
  // Workers also begin every multiple on their own (BeginCheckpoint at that step), so a member
  // that hears of it late still writes it; naming it here only gives them the id early.
  // (Rounding up to a multiple `margin` steps ahead skipped multiples whenever the previous
  // checkpoint committed less than a margin before the next one.)
  const int64_t done = std::max({state_.last_checkpoint_step(), last_periodic_step_, fastest});
  // `done` may come from state.json or a manifest (restored, not reported): no overflow.
  int64_t target = 0;
  if (__builtin_mul_overflow(done / every + 1, every, &target)) return;
  if (target - fastest > 2 * margin) return;  // not close yet
  if (state_.job().steps() > 0 && target > state_.job().steps()) return;
  Status st = StartPendingCheckpointLocked(target, generation_->number(),
                                           "every " + std::to_string(every) + " steps");
  if (!st.ok()) {
    LOG_ERROR("coordinator") << "periodic checkpoint at step " << target << ": " << st;
    return;
  }
  last_periodic_step_ = target;
}

StatusOr<v1::CheckpointResponse> Coordinator::RequestCheckpoint() {
  MutexLock lock(mu_);
  if (state_.state() != v1::JOB_STATE_RUNNING && state_.state() != v1::JOB_STATE_PAUSED)
    return FailedPreconditionError(std::string("cannot checkpoint a job that is ") +
                                   rpc::JobStateName(state_.state()));
  if (!generation_ || generation_->members_size() == 0)
    return FailedPreconditionError("no members to checkpoint");
  if (!pending_checkpoint_) {
    // Members must hear of the step before they reach it; a step past the job's last one would
    // never come, and the request would hang until the job ended.
    const int64_t fastest = MaxMemberStepLocked();
    const int64_t margin = CheckpointMarginStepsLocked();
    const int64_t last = state_.job().steps();
    if (last > 0 && fastest + margin > last)
      return FailedPreconditionError(
          "the job ends at step " + std::to_string(last) + " before a checkpoint requested now " +
          "can be taken: members are at step " + std::to_string(fastest) + " and need " +
          std::to_string(margin) + " steps of notice (its weights are written when it completes)");
    RETORT_RETURN_IF_ERROR(
        StartPendingCheckpointLocked(fastest + margin, generation_->number(), "requested"));
  }
  v1::CheckpointResponse resp;
  resp.set_checkpoint_id(pending_checkpoint_->id);
  resp.set_step(pending_checkpoint_->step);
  return resp;
}

StatusOr<v1::BeginCheckpointResponse> Coordinator::BeginCheckpoint(
    const v1::BeginCheckpointRequest& r) {
  MutexLock lock(mu_);
  RETORT_RETURN_IF_ERROR(CheckMemberLocked(r.member_id()));
  RETORT_RETURN_IF_ERROR(CheckGenerationLocked(r.generation(), "begin checkpoint"));
  if (r.step() < 0 || r.step() > kMaxReportedStep)
    return InvalidArgumentError("step must be in [0, 2^53], got " + std::to_string(r.step()));
  if (pending_checkpoint_ && pending_checkpoint_->step != r.step())
    return AbortedError("checkpoint " + std::to_string(pending_checkpoint_->id) + " at step " +
                        std::to_string(pending_checkpoint_->step) + " is in progress");
  if (!pending_checkpoint_ && r.step() == failed_checkpoint_step_)
    return AbortedError("the checkpoint at step " + std::to_string(r.step()) +
                        " failed: " + checkpoint_health_.last_failure());
  if (!pending_checkpoint_) {
    RETORT_RETURN_IF_ERROR(
        StartPendingCheckpointLocked(r.step(), r.generation(), "begun by " + r.member_id()));
    const int64_t every = state_.job().checkpoint().every_steps();
    if (every > 0 && r.step() % every == 0)
      last_periodic_step_ = std::max(last_periodic_step_, r.step());
  }
  v1::BeginCheckpointResponse resp;
  resp.set_checkpoint_id(pending_checkpoint_->id);
  resp.set_step(pending_checkpoint_->step);
  resp.set_dir(checkpoint_files_.Dir(pending_checkpoint_->id));
  return resp;
}

StatusOr<v1::AckCheckpointResponse> Coordinator::AckCheckpoint(const v1::AckCheckpointRequest& r) {
  MutexLock lock(mu_);
  RETORT_RETURN_IF_ERROR(CheckMemberLocked(r.member_id()));
  const bool in_progress = pending_checkpoint_ && pending_checkpoint_->id == r.checkpoint_id();
  // A late acknowledgement (the member's shard write outlasted its checkpoint: aborted by a
  // generation change or another member's failure) is not a refused call: it is answered
  // "not committed" and logged once per checkpoint as what it is.
  if (!in_progress && r.checkpoint_id() != 0 && r.checkpoint_id() < state_.next_checkpoint_id() &&
      r.generation() <= state_.generation()) {
    if (r.checkpoint_id() != last_late_ack_logged_) {
      last_late_ack_logged_ = r.checkpoint_id();
      LOG_INFO("coordinator") << "checkpoint " << r.checkpoint_id() << ": late acknowledgement by "
                              << r.member_id() << " (generation " << r.generation()
                              << ") ignored: the checkpoint is no longer in progress";
    }
    return v1::AckCheckpointResponse();
  }
  RETORT_RETURN_IF_ERROR(CheckGenerationLocked(r.generation(), "ack checkpoint"));
  if (!in_progress)
    return FailedPreconditionError("checkpoint " + std::to_string(r.checkpoint_id()) +
                                   " is not in progress");
  if (!r.error().empty()) {
    AbortPendingCheckpointLocked(
        r.member_id() + " could not write its shard: " + r.error().substr(0, 512),
        /*failed=*/true);
    return v1::AckCheckpointResponse();
  }
  for (const auto& f : r.files())
    if (f.path().empty() || f.path().find("..") != std::string::npos || f.path()[0] == '/' ||
        f.size_bytes() < 0)
      return InvalidArgumentError("files: path '" + f.path().substr(0, 128) +
                                  "' must be relative, without '..'");
  pending_checkpoint_->acks[r.member_id()] =
      std::vector<v1::CheckpointFile>(r.files().begin(), r.files().end());
  v1::AckCheckpointResponse resp;
  for (const auto& m : generation_->members())
    if (pending_checkpoint_->acks.count(m.member_id()) == 0) return resp;
  Status st = CommitCheckpointLocked();
  if (!st.ok()) {
    AbortPendingCheckpointLocked("commit failed: " + st.message(), /*failed=*/true);
    return st;
  }
  resp.set_committed(true);
  return resp;
}

Status Coordinator::CommitCheckpointLocked() {
  const PendingCheckpoint& p = *pending_checkpoint_;
  v1::CheckpointManifest manifest;
  manifest.set_checkpoint_id(p.id);
  manifest.set_step(p.step);
  manifest.set_generation(p.generation);
  manifest.set_world_size(generation_->members_size());
  *manifest.mutable_plan() = generation_->plan();
  *manifest.mutable_job() = state_.job();
  int64_t epoch = 0, bytes = 0;
  for (const auto& [id, files] : p.acks) {
    RETORT_RETURN_IF_ERROR(checkpoint_files_.CheckFiles(p.id, files));
    for (const auto& f : files) {
      *manifest.add_files() = f;
      bytes += f.size_bytes();
    }
    epoch = std::max(epoch, members_.count(id) ? members_.at(id).epoch : 0);
  }
  manifest.set_epoch(epoch);
  manifest.set_committed_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count());
  RETORT_RETURN_IF_ERROR(checkpoint_files_.WriteManifest(manifest));
  state_.set_last_checkpoint_id(p.id);
  state_.set_last_checkpoint_step(p.step);
  state_.add_committed_checkpoints(p.id);
  std::vector<uint64_t> dropped;
  while (state_.committed_checkpoints_size() > std::max(1, state_.job().checkpoint().keep())) {
    dropped.push_back(state_.committed_checkpoints(0));
    state_.mutable_committed_checkpoints()->erase(state_.mutable_committed_checkpoints()->begin());
  }
  RETORT_RETURN_IF_ERROR(PersistLocked());
  for (uint64_t id : dropped) checkpoint_files_.Remove(id);
  uint64_t id = p.id;
  int64_t step = p.step;
  pending_checkpoint_.reset();
  checkpoint_health_.set_consecutive_failures(0);
  if (options_.observer) options_.observer->OnCheckpointCommitted(bytes);
  EmitLocked("checkpoint",
             "checkpoint " + std::to_string(id) + " committed at step " + std::to_string(step));
  return Status::Ok();
}

StatusOr<v1::GetCheckpointResponse> Coordinator::GetCheckpoint(const v1::GetCheckpointRequest& r) {
  uint64_t id;
  google::protobuf::RepeatedField<uint64_t> committed;
  {
    MutexLock lock(mu_);
    RETORT_RETURN_IF_ERROR(CheckMemberLocked(r.member_id()));
    id = r.checkpoint_id() != 0 ? r.checkpoint_id() : state_.last_checkpoint_id();
    committed = state_.committed_checkpoints();
  }
  v1::GetCheckpointResponse resp;
  *resp.mutable_committed_checkpoints() = committed;
  if (id == 0) return resp;
  std::error_code ec;
  std::string dir =
      std::filesystem::absolute(checkpoint_files_.Dir(id), ec).lexically_normal().string();
  if (ec) dir = checkpoint_files_.Dir(id);
  auto manifest = checkpoint_files_.ReadManifest(id);
  // Asked for the latest (checkpoint_id 0): an unreadable or corrupt newest manifest still
  // lists the committed ids, so the caller falls back to an older one instead of starting over.
  if (!manifest.ok()) {
    if (manifest.status().code() == StatusCode::kNotFound || r.checkpoint_id() == 0) return resp;
    return manifest.status();
  }
  *resp.mutable_manifest() = std::move(manifest).value();
  resp.set_found(true);
  resp.set_dir(dir);
  return resp;
}

}  // namespace retort::coordinator

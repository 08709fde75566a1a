// Operator-facing operations of the Coordinator (see coordinator.h for the threading contract).
#include <algorithm>

#include "common/logging.h"
#include "coordinator/coordinator.h"
#include "retort/config.h"
#include "rpc/job_state.h"

namespace retort::coordinator {
namespace {

v1::ControlResponse Reply(const std::string& message, v1::JobState state) {
  v1::ControlResponse r;
  r.set_message(message);
  r.set_state(state);
  return r;
}

}  // namespace

std::vector<std::string> Coordinator::StalledMembers(std::chrono::milliseconds deadline) const {
  MutexLock lock(mu_);
  std::vector<std::string> stalled;
  if (state_.state() != v1::JOB_STATE_RUNNING) return stalled;
  const auto now = clock_->Now();
  for (const auto& [id, m] : members_) {
    if (m.rank < 0 || m.draining || now - m.step_advanced_at < deadline) continue;
    stalled.push_back(id + " (" + m.identity.node() + "/" +
                      std::to_string(m.identity.local_rank()) + ") at step " +
                      std::to_string(m.step));
  }
  return stalled;
}

v1::StatusResponse Coordinator::GetStatus() const {
  MutexLock lock(mu_);
  v1::StatusResponse s;
  s.set_job_name(state_.job().name());
  s.set_state(state_.state());
  s.set_generation(generation_ ? generation_->number() : state_.generation());
  s.set_min_workers(state_.min_workers());
  s.set_max_workers(state_.max_workers());
  s.set_total_steps(state_.job().steps());
  s.set_last_checkpoint_id(state_.last_checkpoint_id());
  s.set_last_checkpoint_step(state_.last_checkpoint_step());
  if (checkpoint_health_.failures_total() > 0) *s.mutable_checkpoint_health() = checkpoint_health_;
  if (last_evaluation_.step() > 0) {
    *s.mutable_last_evaluation() = last_evaluation_;
    *s.mutable_best_evaluation() = best_evaluation_;
  }
  s.set_coordinator_version(RETORT_VERSION);
  if (state_.has_failure()) *s.mutable_failure() = state_.failure();
  auto now = clock_->Now();
  s.set_uptime_ms(std::chrono::duration_cast<std::chrono::milliseconds>(now - started_).count());
  std::vector<const MemberRecord*> ordered;
  for (const auto& [id, m] : members_) ordered.push_back(&m);
  std::sort(ordered.begin(), ordered.end(), [](const MemberRecord* a, const MemberRecord* b) {
    if ((a->rank < 0) != (b->rank < 0)) return b->rank < 0;
    if (a->rank != b->rank) return a->rank < b->rank;
    return a->id < b->id;
  });
  int64_t step = 0;
  for (const MemberRecord* m : ordered) {
    auto* ms = s.add_members();
    ms->set_member_id(m->id);
    ms->set_rank(m->rank);
    ms->set_node(m->identity.node());
    ms->set_local_rank(m->identity.local_rank());
    ms->set_data_address(m->identity.data_address());
    ms->set_step(m->step);
    ms->set_epoch(m->epoch);
    *ms->mutable_metrics() = m->metrics;
    ms->set_last_heartbeat_ms_ago(
        std::chrono::duration_cast<std::chrono::milliseconds>(now - m->last_heartbeat).count());
    ms->set_draining(m->draining);
    ms->set_generation(m->generation);
    ms->set_local_batch(m->metrics.local_batch());
    *ms->mutable_devices() = m->identity.devices();
    step = std::max(step, m->step);
  }
  s.set_step(step);
  if (batch_split_.samples_size() > 0) *s.mutable_batch_split() = batch_split_;
  for (const auto& m : rejoin_gate_.Missing(MemberPlacesLocked())) s.add_awaiting_rejoin(m);
  return s;
}

StatusOr<v1::ControlResponse> Coordinator::Pause() {
  MutexLock lock(mu_);
  auto s = state_.state();
  if (s == v1::JOB_STATE_PAUSED) return Reply("already paused", s);
  if (s != v1::JOB_STATE_RUNNING && s != v1::JOB_STATE_WAITING)
    return FailedPreconditionError(std::string("cannot pause a job that is ") +
                                   rpc::JobStateName(s));
  SetStateLocked(v1::JOB_STATE_PAUSED, "operator");
  return Reply("paused; members stop at their next step boundary", state_.state());
}

StatusOr<v1::ControlResponse> Coordinator::Resume() {
  MutexLock lock(mu_);
  auto s = state_.state();
  if (s != v1::JOB_STATE_PAUSED)
    return FailedPreconditionError(std::string("cannot resume a job that is ") +
                                   rpc::JobStateName(s));
  int world = generation_ ? generation_->members_size() : 0;
  SetStateLocked(world >= state_.min_workers() ? v1::JOB_STATE_RUNNING : v1::JOB_STATE_WAITING,
                 "operator");
  // A generation formed while the job was paused was published paused, and workers start only
  // a running one (the pause of a running generation is a heartbeat directive instead): form
  // the next one, published with the state the job resumed to.
  if (generation_ && generation_->state() != state_.state()) MarkMembershipChangedLocked();
  return Reply("resumed", state_.state());
}

StatusOr<v1::ControlResponse> Coordinator::Scale(const v1::ScaleRequest& r) {
  MutexLock lock(mu_);
  int new_min = r.min_workers() > 0 ? r.min_workers() : state_.min_workers();
  int new_max = r.max_workers() > 0 ? r.max_workers() : state_.max_workers();
  if (r.min_workers() < 0 || r.max_workers() < 0)
    return InvalidArgumentError("bounds must be positive (0 = unchanged)");
  if (new_max > 100000) return InvalidArgumentError("max_workers must be <= 100000");
  if (new_max < new_min)
    return InvalidArgumentError("max_workers (" + std::to_string(new_max) + ") < min_workers (" +
                                std::to_string(new_min) + ")");
  state_.set_min_workers(new_min);
  state_.set_max_workers(new_max);
  Status st = PersistLocked();
  if (!st.ok()) return UnavailableError("cannot persist state: " + st.message());
  // Above the new max: drain the highest ranks (newest joiners when not yet ranked).
  std::vector<MemberRecord*> active;
  for (auto& [id, m] : members_)
    if (!m.draining) active.push_back(&m);
  std::sort(active.begin(), active.end(), [](MemberRecord* a, MemberRecord* b) {
    int ra = a->rank < 0 ? INT32_MAX : a->rank, rb = b->rank < 0 ? INT32_MAX : b->rank;
    return ra != rb ? ra < rb : a->id < b->id;
  });
  int drained = 0;
  for (size_t i = static_cast<size_t>(new_max); i < active.size(); ++i) {
    active[i]->draining = true;
    active[i]->leave_reason = "scaled down to max_workers=" + std::to_string(new_max);
    ++drained;
  }
  MarkMembershipChangedLocked();  // state (waiting/running) is re-evaluated with the next
                                  // generation
  std::string msg = "bounds now min=" + std::to_string(new_min) + " max=" + std::to_string(new_max);
  if (drained > 0) msg += "; draining " + std::to_string(drained) + " member(s)";
  EmitLocked("scale", msg);
  return Reply(msg, state_.state());
}

StatusOr<v1::ControlResponse> Coordinator::Drain(const v1::DrainRequest& r) {
  MutexLock lock(mu_);
  RETORT_RETURN_IF_ERROR(CheckMemberLocked(r.member_id()));
  auto& m = members_[r.member_id()];
  if (m.draining) return Reply(r.member_id() + " is already draining", state_.state());
  m.draining = true;
  m.leave_reason = "drained by operator";
  EmitLocked("member_draining", r.member_id() + " will leave at its next step boundary",
             r.member_id());
  return Reply(r.member_id() + " will leave at its next step boundary", state_.state());
}

StatusOr<v1::ControlResponse> Coordinator::Stop(const v1::StopRequest& r) {
  if (r.reason().size() > 1024) return InvalidArgumentError("reason: longer than 1024 characters");
  MutexLock lock(mu_);
  auto s = state_.state();
  if (rpc::IsFinalJobState(s)) return Reply(std::string("job already ") + rpc::JobStateName(s), s);
  std::string why = r.reason().empty() ? "operator" : r.reason();
  if (members_.empty()) {
    SetStateLocked(v1::JOB_STATE_STOPPED, why);
    return Reply("stopped", state_.state());
  }
  SetStateLocked(v1::JOB_STATE_STOPPING, why);
  return Reply("stopping; " + std::to_string(members_.size()) +
                   " member(s) will leave at their next step boundary",
               state_.state());
}

}  // namespace retort::coordinator

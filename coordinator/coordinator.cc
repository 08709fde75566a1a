#include "coordinator/coordinator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <regex>

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/message_differencer.h>

#include "common/backoff.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/unix_time.h"
#include "coordinator/evaluation_record.h"
#include "coordinator/job_spec.h"
#include "coordinator/member_secret.h"
#include "coordinator/planner.h"
#include "coordinator/reported_batch_split.h"
#include "rpc/job_state.h"

namespace retort::coordinator {
namespace {

constexpr size_t kMaxNodeName = 253;
constexpr size_t kMaxShortField = 256;
constexpr int kMaxLocalRank = 4096;
constexpr int kMaxDevices = 64;

bool ValidNodeName(const std::string& s) {
  if (s.empty() || s.size() > kMaxNodeName) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_'))
      return false;
  return true;
}

Status ValidateIdentity(const v1::MemberIdentity& id) {
  if (!ValidNodeName(id.node()))
    return InvalidArgumentError("identity.node: must be 1-253 characters of [A-Za-z0-9._-], got '" +
                                id.node().substr(0, 64) + "'");
  if (id.local_rank() < 0 || id.local_rank() >= kMaxLocalRank)
    return InvalidArgumentError("identity.local_rank: must be in [0, 4096), got " +
                                std::to_string(id.local_rank()));
  if (id.devices_size() > kMaxDevices)
    return InvalidArgumentError("identity.devices: at most 64 devices");
  for (const auto& d : id.devices())
    if (d.kind().size() > 32 || d.name().size() > kMaxShortField || d.index() < 0)
      return InvalidArgumentError("identity.devices: malformed device entry");
  if (id.data_address().size() > kMaxShortField)
    return InvalidArgumentError("identity.data_address: longer than 256 characters");
  if (id.incarnation().empty() || id.incarnation().size() > 64)
    return InvalidArgumentError("identity.incarnation: must be 1-64 characters");
  return Status::Ok();
}

}  // namespace

std::string ResolveCheckpointDir(const std::string& flag, const v1::JobSpec& job,
                                 const std::string& state_dir) {
  const std::string& spec = job.checkpoint().dir();
  std::string dir = !flag.empty() ? flag : !spec.empty() ? spec : state_dir + "/checkpoints";
  // Workers open checkpoint files by the paths the coordinator hands out: absolute, so they do
  // not depend on the coordinator's working directory.
  auto absolute = [](const std::string& path) {
    std::error_code ec;
    auto a = std::filesystem::absolute(path, ec);
    return ec ? path : a.lexically_normal().string();
  };
  dir = absolute(dir);
  if (!flag.empty() && !spec.empty() && absolute(spec) != dir)
    LOG_WARN("coordinator") << "--checkpoint-dir=" << flag << " overrides the job spec's "
                            << "checkpoint.dir (" << spec << "): checkpoints go to " << dir;
  return dir;
}

uint64_t MemberIdBoot(const std::string& member_id) {
  // "w<boot>-<serial>"
  if (member_id.size() < 4 || member_id[0] != 'w') return 0;
  size_t dash = member_id.find('-');
  if (dash == std::string::npos || dash == 1 || dash > 21) return 0;
  uint64_t boot = 0;
  for (size_t i = 1; i < dash; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(member_id[i]))) return 0;
    boot = boot * 10 + static_cast<uint64_t>(member_id[i] - '0');
  }
  return boot;
}

namespace {

// What a state file must hold for the coordinator to run on it: the checks a job spec and a
// member's reports pass before they are first written (a file edited by hand, or written by a
// version with other rules, is refused like a corrupt one, and left alone).
Status CheckRestoredState(const std::string& path, const v1::CoordinatorState& state) {
  auto refuse = [&path](const std::string& what) {
    return DataLossError("state file " + path + " holds " + what +
                         "; refusing to start. Move it away to start a new job.");
  };
  if (Status v = ValidateJobSpec(state.job()); !v.ok())
    return refuse("a job spec that does not validate (" + v.message() + ")");
  if (Status v = ValidateParameterCount(state.parameter_count()); !v.ok())
    return refuse("an invalid " + v.message());
  if (state.min_workers() < 1 || state.max_workers() < state.min_workers())
    return refuse("worker bounds [" + std::to_string(state.min_workers()) + ", " +
                  std::to_string(state.max_workers()) + "]");
  return Status::Ok();
}

// The differences of `given` from `stored`, one "field: old -> new" per change, "; "-separated
// (both with their defaults applied, so spelling out a default is no change); "" when equal.
std::string JobSpecChanges(const v1::JobSpec& stored, const v1::JobSpec& given) {
  v1::JobSpec a = stored, b = given;
  ApplyJobSpecDefaults(&a);
  ApplyJobSpecDefaults(&b);
  std::string report;
  {
    google::protobuf::io::StringOutputStream out(&report);
    google::protobuf::util::MessageDifferencer::StreamReporter reporter(&out);
    google::protobuf::util::MessageDifferencer differencer;
    differencer.ReportDifferencesTo(&reporter);
    if (differencer.Compare(a, b)) return "";
  }
  std::string joined;
  size_t start = 0;
  while (start < report.size()) {
    size_t end = report.find('\n', start);
    if (end == std::string::npos) end = report.size();
    if (end > start) joined += (joined.empty() ? "" : "; ") + report.substr(start, end - start);
    start = end + 1;
  }
  return joined.empty() ? "fields differ" : joined;
}

}  // namespace

StatusOr<std::unique_ptr<Coordinator>> Coordinator::Create(CoordinatorOptions options,
                                                           std::optional<v1::JobSpec> job,
                                                           const Clock* clock) {
  if (options.state_dir.empty()) return InvalidArgumentError("--state-dir is required");
  if (options.heartbeat_interval_ms <= 0 ||
      options.eviction_timeout_ms <= options.heartbeat_interval_ms)
    return InvalidArgumentError("eviction timeout must be longer than the heartbeat interval");
  if (options.settle_ms < 0 || options.tick_ms <= 0)
    return InvalidArgumentError("settle/tick must be >= 0");
  if (options.own_pause_threshold_ms < 0 ||
      (options.own_pause_threshold_ms > 0 && options.own_pause_threshold_ms <= options.tick_ms))
    return InvalidArgumentError("the own-pause threshold (" +
                                std::to_string(options.own_pause_threshold_ms) +
                                " ms) must be 0 (off) or longer than the tick (" +
                                std::to_string(options.tick_ms) + " ms)");
  JobStateFile store(options.state_dir, options.state_writer);
  auto loaded = store.Load();
  v1::CoordinatorState state;
  if (loaded.ok()) {
    state = std::move(loaded).value();
    if (job.has_value()) {
      // A running job keeps the spec it started with; a different one (a ConfigMap edited
      // under a running job) is refused, naming what changed, instead of ignored.
      const std::string changed = JobSpecChanges(state.job(), *job);
      if (!changed.empty())
        return InvalidArgumentError(
            "the job spec given (--job) differs from the one job '" + state.job().name() +
            "' started with (state dir " + options.state_dir + "): " + changed +
            ". A running job's spec cannot change: restore the original spec (or start without "
            "--job to use the stored one), or start a new job with another --state-dir");
    }
    RETORT_RETURN_IF_ERROR(CheckRestoredState(store.path(), state));
    options.checkpoint_dir =
        ResolveCheckpointDir(options.checkpoint_dir, state.job(), options.state_dir);
    LOG_INFO("coordinator") << "resuming job '" << state.job().name() << "' from " << store.path()
                            << ": last generation " << state.generation() << ", state "
                            << rpc::JobStateName(state.state());
    RETORT_RETURN_IF_ERROR(ReconcileCheckpoints(CheckpointFiles(options.checkpoint_dir),
                                                options.restart_from_scratch, &state));
  } else if (loaded.status().code() == StatusCode::kNotFound) {
    if (!job.has_value())
      return InvalidArgumentError("no state in " + options.state_dir +
                                  " and no --job given: nothing to run");
    *state.mutable_job() = *job;
    options.checkpoint_dir = ResolveCheckpointDir(options.checkpoint_dir, *job, options.state_dir);
    state.set_min_workers(job->elastic().min_workers());
    state.set_max_workers(job->elastic().max_workers());
    state.set_state(v1::JOB_STATE_WAITING);
    state.set_next_checkpoint_id(1);
  } else {
    return loaded.status();
  }
  if (options.min_workers > 0) state.set_min_workers(options.min_workers);
  if (options.max_workers > 0) state.set_max_workers(options.max_workers);
  if (state.max_workers() < state.min_workers())
    return InvalidArgumentError("max workers (" + std::to_string(state.max_workers()) +
                                ") < min workers (" + std::to_string(state.min_workers()) + ")");
  state.set_boot_count(state.boot_count() + 1);
  RETORT_RETURN_IF_ERROR(MakeDirectories(options.checkpoint_dir));
  std::unique_ptr<Coordinator> c(new Coordinator(std::move(options), std::move(state), clock));
  {
    MutexLock lock(c->mu_);
    const auto s = c->state_.state();
    const bool live = s == v1::JOB_STATE_WAITING || s == v1::JOB_STATE_RUNNING ||
                      s == v1::JOB_STATE_PAUSED || s == v1::JOB_STATE_STOPPING;
    if (live && c->options_.rejoin_grace_ms > 0) {
      std::set<RejoinGate::Place> expected;
      for (const auto& m : c->state_.last_generation_members())
        expected.emplace(m.node(), m.local_rank());
      c->rejoin_gate_.Expect(std::move(expected),
                             clock->Now() + std::chrono::milliseconds(c->options_.rejoin_grace_ms));
      if (c->rejoin_gate_.waiting()) {
        c->NoteLossLocked("coordinator_restart", false);
        LOG_INFO("coordinator") << "waiting up to " << c->options_.rejoin_grace_ms
                                << " ms for the previous generation's "
                                << c->rejoin_gate_.expected()
                                << " member(s) to re-join before forming a generation";
      }
    }
    RETORT_RETURN_IF_ERROR(c->PersistLocked());
    c->UpdateFinishedLocked();
  }
  return c;
}

Coordinator::Coordinator(CoordinatorOptions options, v1::CoordinatorState state, const Clock* clock)
    : options_(std::move(options)),
      clock_(clock),
      store_(options_.state_dir, options_.state_writer),
      checkpoint_files_(options_.checkpoint_dir),
      started_(clock->Now()),
      state_(std::move(state)),
      kv_(KvLimits{options_.max_kv_value_bytes, options_.max_kv_keys_per_generation,
                   options_.max_kv_bytes_per_member, options_.max_kv_bytes_total}),
      peer_reports_(PeerReportLimits{options_.max_peer_reports_per_window,
                                     std::chrono::milliseconds(options_.peer_report_window_ms)}),
      own_pauses_(std::chrono::milliseconds(options_.tick_ms),
                  std::chrono::milliseconds(options_.own_pause_threshold_ms)) {
  const auto& straggler = state_.job().elastic().straggler();
  straggler_drain_ = StragglerDrain(straggler.drain_below(), straggler.drain_after_steps());
}

Coordinator::~Coordinator() { Shutdown(); }

void Coordinator::Start() {
  ticker_ = std::thread([this] {
    MutexLock lock(thread_mu_);
    while (!stopping_) {
      lock.Unlock();
      Tick();
      lock.Lock();
      thread_cv_.WaitFor(thread_mu_, std::chrono::milliseconds(options_.tick_ms),
                         [this]() RETORT_REQUIRES(thread_mu_) { return stopping_; });
    }
  });
}

void Coordinator::Shutdown() {
  {
    MutexLock lock(thread_mu_);
    stopping_ = true;
  }
  thread_cv_.NotifyAll();
  if (ticker_.joinable()) ticker_.join();
}

Status Coordinator::PersistLocked() { return store_.Save(state_); }

void Coordinator::EmitLocked(const std::string& kind, const std::string& message,
                             const std::string& member_id) {
  v1::Event e;
  e.set_unix_ms(UnixMillisNow());
  e.set_kind(kind);
  e.set_message(message);
  e.set_generation(state_.generation());
  e.set_member_id(member_id);
  e.set_state(state_.state());
  LOG_INFO("coordinator") << kind << ": " << message;
  MutexLock lock(subs_mu_);
  for (auto* l : event_listeners_) l->OnEvent(e);
}

void Coordinator::SetStateLocked(v1::JobState s, const std::string& why) {
  if (state_.state() == s) return;
  state_.set_state(s);
  Status st = PersistLocked();
  if (!st.ok()) LOG_ERROR("coordinator") << "persisting state: " << st;
  EmitLocked("state",
             std::string("job is ") + rpc::JobStateName(s) + (why.empty() ? "" : " (" + why + ")"));
  UpdateFinishedLocked();
}

void Coordinator::UpdateFinishedLocked() {
  if (rpc::IsFinalJobState(state_.state()) && members_.empty() && !finished_) {
    finished_ = true;
    finished_cv_.NotifyAll();
  }
}

bool Coordinator::Finished() const {
  MutexLock lock(mu_);
  return finished_;
}

bool Coordinator::WaitFinished(int64_t timeout_ms) {
  MutexLock lock(mu_);
  return finished_cv_.WaitFor(mu_, std::chrono::milliseconds(timeout_ms),
                              [this]() RETORT_REQUIRES(mu_) { return finished_; });
}

void Coordinator::MarkMembershipChangedLocked() {
  membership_dirty_ = true;
  membership_changed_at_ = clock_->Now();
}

void Coordinator::RemoveMemberLocked(const std::string& id, const std::string& kind,
                                     const std::string& why) {
  auto it = members_.find(id);
  if (it == members_.end()) return;
  std::string desc = id + " (" + it->second.identity.node() + "/" +
                     std::to_string(it->second.identity.local_rank()) + ")";
  members_.erase(it);
  peer_reports_.Forget(id);
  straggler_drain_.Forget(id);
  MarkMembershipChangedLocked();
  EmitLocked(kind, desc + ": " + why, id);
  if (pending_checkpoint_) AbortPendingCheckpointLocked("member " + id + " left");
  if (members_.empty()) {
    if (state_.state() == v1::JOB_STATE_STOPPING)
      SetStateLocked(v1::JOB_STATE_STOPPED, "all members left");
    UpdateFinishedLocked();
  }
}

void Coordinator::NoteLossLocked(const char* cause, bool eviction) {
  recovery_cause_ = cause;
  if (eviction && options_.observer) options_.observer->OnEviction(cause);
}

StatusOr<Coordinator::WatchKind> Coordinator::WatchOpened(const std::string& member_id) {
  MutexLock lock(mu_);
  auto it = members_.find(member_id);
  if (it == members_.end()) {
    const int limit = state_.max_workers() + kStreamMargin;
    if (anonymous_watches_ >= limit)
      return ResourceExhaustedError("too many generation streams of non-members (limit " +
                                    std::to_string(limit) + ")");
    ++anonymous_watches_;
    return WatchKind::kOther;
  }
  if (it->second.open_watches >= options_.max_generation_streams_per_member)
    return ResourceExhaustedError(member_id + " already has " +
                                  std::to_string(it->second.open_watches) +
                                  " generation streams open (limit " +
                                  std::to_string(options_.max_generation_streams_per_member) + ")");
  ++it->second.open_watches;
  it->second.watch_lost_at.reset();
  return WatchKind::kMember;
}

void Coordinator::WatchClosed(const std::string& member_id, WatchKind kind) {
  MutexLock lock(mu_);
  if (kind == WatchKind::kOther) {
    if (anonymous_watches_ > 0) --anonymous_watches_;
    return;
  }
  auto it = members_.find(member_id);
  if (it == members_.end() || it->second.open_watches == 0) return;
  if (--it->second.open_watches == 0) it->second.watch_lost_at = clock_->Now();
}

void Coordinator::Tick() {
  MutexLock lock(mu_);
  auto now = clock_->Now();
  if (const auto pause = own_pauses_.Observe(now); pause.count() > 0)
    ForgiveOwnPauseLocked(pause, now);
  auto timeout = std::chrono::milliseconds(options_.eviction_timeout_ms);
  std::vector<std::string> expired;
  for (const auto& [id, m] : members_)
    if (now - m.last_heartbeat > timeout) expired.push_back(id);
  for (const auto& id : expired) {
    NoteLossLocked("heartbeat_timeout", true);
    RemoveMemberLocked(id, "member_evicted",
                       "no heartbeat for " + std::to_string(options_.eviction_timeout_ms) + " ms");
  }
  if (options_.disconnect_grace_ms > 0) {
    auto grace = std::chrono::milliseconds(options_.disconnect_grace_ms);
    std::vector<std::string> disconnected;
    for (const auto& [id, m] : members_)
      if (m.open_watches == 0 && m.watch_lost_at && now - *m.watch_lost_at >= grace)
        disconnected.push_back(id);
    for (const auto& id : disconnected) {
      NoteLossLocked("disconnected", true);
      RemoveMemberLocked(id, "member_evicted",
                         "its generation stream closed and was not reopened within " +
                             std::to_string(options_.disconnect_grace_ms) + " ms");
    }
  }
  if (AwaitingRejoinLocked(now)) return;
  // An ended job forms no more generations (its members leave; a coordinator lingering after
  // the end, --linger-after-end-ms, only answers late workers).
  if (!membership_dirty_ || rpc::IsFinalJobState(state_.state())) return;
  bool settled = now - membership_changed_at_ >= std::chrono::milliseconds(options_.settle_ms);
  bool full = static_cast<int>(members_.size()) >= state_.max_workers();
  if (settled || full) FormGenerationLocked();
}

void Coordinator::ForgiveOwnPauseLocked(std::chrono::nanoseconds pause,
                                        std::chrono::steady_clock::time_point now) {
  auto forgive = [&](std::chrono::steady_clock::time_point t) { return std::min(now, t + pause); };
  for (auto& [id, m] : members_) {
    m.last_heartbeat = forgive(m.last_heartbeat);
    m.step_advanced_at = forgive(m.step_advanced_at);
    if (m.watch_lost_at) m.watch_lost_at = forgive(*m.watch_lost_at);
  }
  const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(pause).count();
  const std::string what = "this coordinator did not run for " + std::to_string(ms) +
                           " ms (a gap in its own ticks: stopped, throttled or migrated); " +
                           std::to_string(members_.size()) +
                           " member(s) get that time back before their heartbeats are judged";
  LOG_WARN("coordinator") << what;
  EmitLocked("coordinator_paused", what);
  if (options_.observer)
    options_.observer->OnOwnPause(std::chrono::duration<double>(pause).count());
}

std::set<RejoinGate::Place> Coordinator::MemberPlacesLocked() const {
  std::set<RejoinGate::Place> places;
  for (const auto& [id, m] : members_) places.emplace(m.identity.node(), m.identity.local_rank());
  return places;
}

bool Coordinator::AwaitingRejoinLocked(std::chrono::steady_clock::time_point now) {
  std::string why;
  if (rejoin_gate_.StillWaiting(now, MemberPlacesLocked(), options_.rejoin_grace_ms, &why))
    return true;
  if (why.empty()) return false;  // was not waiting
  EmitLocked("rejoin", why + "; generations form again");
  if (members_.empty() && state_.state() == v1::JOB_STATE_RUNNING)
    SetStateLocked(v1::JOB_STATE_WAITING, "no member re-joined after the coordinator restart");
  return false;
}

void Coordinator::FormGenerationLocked() {
  auto gen = std::make_shared<v1::Generation>();
  std::vector<v1::Member> members;
  members.reserve(members_.size());
  for (const auto& [id, m] : members_) {
    v1::Member member;
    member.set_member_id(id);
    // With its incarnation: a worker tells a member that re-joined (same process, e.g. after a
    // coordinator restart) from a restarted process by it.
    *member.mutable_identity() = m.identity;
    members.push_back(std::move(member));
  }
  std::vector<v1::NodeGroup> nodes;
  AssignRanks(&members, &nodes);
  const int world = static_cast<int>(members.size());
  v1::JobState job_state = state_.state();
  if (job_state == v1::JOB_STATE_WAITING || job_state == v1::JOB_STATE_RUNNING)
    job_state = world >= state_.min_workers() ? v1::JOB_STATE_RUNNING : v1::JOB_STATE_WAITING;

  uint64_t number = state_.generation() + 1;
  v1::CoordinatorState next = state_;
  next.set_generation(number);
  next.set_state(job_state);
  next.clear_last_generation_members();
  for (const auto& m : members) {
    auto* id = next.add_last_generation_members();
    id->set_node(m.identity().node());
    id->set_local_rank(m.identity().local_rank());
  }
  const auto now = clock_->Now();
  if (persist_failures_ > 0 && now < next_persist_attempt_) return;  // backing off
  Status st = store_.Save(next);
  if (!st.ok()) {
    // Publishing a generation we could not persist would break monotonicity after a restart.
    // Retry with backoff (the disk may be full for a while); log once per generation and error.
    ++persist_failures_;
    const std::chrono::milliseconds wait =
        DoublingDelay(std::chrono::milliseconds(options_.tick_ms),
                      std::chrono::milliseconds(options_.persist_retry_max_ms), persist_failures_);
    next_persist_attempt_ = now + wait;
    std::string what = "generation " + std::to_string(number) + ": " + st.ToString();
    if (what != persist_failure_logged_) {
      LOG_ERROR("coordinator") << "cannot persist " << what << "; retrying with backoff (up to "
                               << options_.persist_retry_max_ms << " ms between attempts)";
      persist_failure_logged_ = what;
    }
    return;
  }
  if (persist_failures_ > 0)
    LOG_INFO("coordinator") << "persisted generation " << number << " after " << persist_failures_
                            << " failed attempt(s)";
  persist_failures_ = 0;
  persist_failure_logged_.clear();
  bool state_changed = job_state != state_.state();
  state_ = std::move(next);
  membership_dirty_ = false;
  if (!recovery_cause_.empty() && world > 0) {
    if (options_.observer) options_.observer->OnRecovery(recovery_cause_);
    recovery_cause_.clear();
  }

  gen->set_number(number);
  for (auto& m : members) {
    MemberRecord& rec = members_[m.member_id()];
    rec.rank = m.rank();
    rec.step_advanced_at = clock_->Now();  // a new generation is progress, not a stall
    *gen->add_members() = std::move(m);
  }
  for (auto& n : nodes) *gen->add_nodes() = std::move(n);
  if (world > 0)
    *gen->mutable_plan() =
        ComputeShardingPlan(state_.parameter_count(), world, options_.shard_alignment);
  gen->set_state(job_state);
  gen->set_checkpoint_id(state_.last_checkpoint_id());
  gen->set_checkpoint_step(state_.last_checkpoint_step());
  generation_ = gen;
  batch_split_.Clear();  // a new generation starts even; its members' reports fill it in
  kv_.Clear();           // bootstrap data belongs to one generation
  if (pending_checkpoint_) AbortPendingCheckpointLocked("new generation");

  EmitLocked("generation", "generation " + std::to_string(number) + " formed with " +
                               std::to_string(world) + " member(s) on " +
                               std::to_string(gen->nodes_size()) + " node(s)");
  if (state_changed) EmitLocked("state", std::string("job is ") + rpc::JobStateName(job_state));
  {
    MutexLock sl(subs_mu_);
    for (auto* l : generation_listeners_) l->OnGeneration(gen);
  }
  UpdateFinishedLocked();
}

Status Coordinator::CheckMemberLocked(const std::string& member_id) const {
  if (member_id.empty()) return InvalidArgumentError("member_id is empty");
  if (members_.count(member_id) == 0)
    return NotFoundError("unknown member '" + member_id.substr(0, 64) +
                         "' (evicted, left, or from before a coordinator restart); join again");
  return Status::Ok();
}

Status Coordinator::CheckGenerationLocked(uint64_t generation, const char* what) const {
  uint64_t current = generation_ ? generation_->number() : 0;
  if (generation != current)
    return AbortedError(std::string(what) + ": generation " + std::to_string(generation) +
                        (generation < current ? " is stale" : " is unknown") + "; current is " +
                        std::to_string(current));
  return Status::Ok();
}

Status ValidateParameterCount(int64_t count) {
  if (count < 0 || count > kMaxParameterCount)
    return InvalidArgumentError("parameter_count " + std::to_string(count) +
                                " is outside [0, 2^40]");
  return Status::Ok();
}

Status Coordinator::CheckParameterCountLocked(int64_t count) const {
  RETORT_RETURN_IF_ERROR(ValidateParameterCount(count));
  if (count > 0 && state_.parameter_count() > 0 && count != state_.parameter_count())
    return FailedPreconditionError(
        "parameter_count " + std::to_string(count) + " does not match the job's " +
        std::to_string(state_.parameter_count()) + " (different student model?)");
  return Status::Ok();
}

StatusOr<v1::JoinResponse> Coordinator::Join(const v1::JoinRequest& req) {
  RETORT_RETURN_IF_ERROR(ValidateIdentity(req.identity()));
  RETORT_RETURN_IF_ERROR(ValidateParameterCount(req.parameter_count()));
  MutexLock lock(mu_);
  auto s = state_.state();
  if (s == v1::JOB_STATE_STOPPING || s == v1::JOB_STATE_STOPPED || s == v1::JOB_STATE_COMPLETED ||
      s == v1::JOB_STATE_FAILED) {
    // Not an error of the request: the job is over, and the worker decides what that means.
    v1::JoinResponse refused;
    refused.set_ended_state(s);
    if (s == v1::JOB_STATE_FAILED) *refused.mutable_failure() = state_.failure();
    return refused;
  }
  RETORT_RETURN_IF_ERROR(CheckParameterCountLocked(req.parameter_count()));
  // Same (node, local_rank): a duplicate join (same incarnation) or a restarted process.
  std::string replaced;
  for (const auto& [id, m] : members_) {
    if (m.identity.node() == req.identity().node() &&
        m.identity.local_rank() == req.identity().local_rank()) {
      if (m.identity.incarnation() == req.identity().incarnation())
        return AlreadyExistsError("duplicate join: " + req.identity().node() + "/" +
                                  std::to_string(req.identity().local_rank()) +
                                  " is already member " + id);
      // A live member (its generation stream open, its heartbeats on time) is not replaced by
      // a join naming its node and local rank: only a process that is gone is. The new one
      // retries until the old one's stream closes or its heartbeats stop.
      const bool live =
          m.open_watches > 0 && clock_->Now() - m.last_heartbeat <
                                    std::chrono::milliseconds(2 * options_.heartbeat_interval_ms);
      if (live)
        return AlreadyExistsError(
            req.identity().node() + "/" + std::to_string(req.identity().local_rank()) +
            " is held by live member " + id + "; a new incarnation replaces it once it is gone");
      replaced = id;
    }
  }
  if (!replaced.empty()) {
    NoteLossLocked("worker_restart", false);
    RemoveMemberLocked(replaced, "member_replaced", "a new incarnation joined");
  }
  if (static_cast<int>(members_.size()) >= state_.max_workers())
    return ResourceExhaustedError("job is at max_workers=" + std::to_string(state_.max_workers()) +
                                  "; retry later");
  if (req.parameter_count() > 0 && state_.parameter_count() == 0) {
    state_.set_parameter_count(req.parameter_count());
    Status st = PersistLocked();
    if (!st.ok()) return UnavailableError("cannot persist state: " + st.message());
  }
  MemberRecord rec;
  rec.id = "w" + std::to_string(state_.boot_count()) + "-" + std::to_string(next_member_serial_++);
  rec.secret = NewMemberSecret();
  rec.identity = req.identity();
  rec.parameter_count = req.parameter_count();
  rec.last_heartbeat = clock_->Now();
  rec.step_advanced_at = rec.last_heartbeat;
  std::string id = rec.id;
  std::string secret = rec.secret;
  members_.emplace(id, std::move(rec));
  MarkMembershipChangedLocked();
  EmitLocked(
      "member_joined",
      id + " (" + req.identity().node() + "/" + std::to_string(req.identity().local_rank()) + ")",
      id);

  v1::JoinResponse resp;
  resp.set_member_id(id);
  *resp.mutable_job() = state_.job();
  resp.set_heartbeat_interval_ms(options_.heartbeat_interval_ms);
  resp.set_eviction_timeout_ms(options_.eviction_timeout_ms);
  resp.set_current_generation(state_.generation());
  resp.set_member_secret(secret);
  return resp;
}

StatusOr<v1::HeartbeatResponse> Coordinator::Heartbeat(const v1::HeartbeatRequest& req) {
  MutexLock lock(mu_);
  RETORT_RETURN_IF_ERROR(CheckMemberLocked(req.member_id()));
  {
    // A heartbeat carries the newest generation its member has seen: never one that was not
    // published, and never older than one the member already reported (a replayed or forged
    // heartbeat cannot keep a member alive with an old generation).
    const uint64_t floor = members_.at(req.member_id()).heartbeat_generation;
    if (req.generation() > state_.generation())
      return AbortedError("heartbeat: generation " + std::to_string(req.generation()) +
                          " is unknown; newest is " + std::to_string(state_.generation()));
    if (req.generation() < floor)
      return AbortedError("heartbeat: generation " + std::to_string(req.generation()) +
                          " is stale; " + req.member_id() + " already reported " +
                          std::to_string(floor));
  }
  if (req.step() > kMaxReportedStep || req.epoch() > kMaxReportedStep)
    return InvalidArgumentError("heartbeat: step " + std::to_string(req.step()) + " / epoch " +
                                std::to_string(req.epoch()) + " is beyond 2^53");
  RETORT_RETURN_IF_ERROR(CheckParameterCountLocked(req.parameter_count()));
  if (req.has_evaluation())
    RETORT_RETURN_IF_ERROR(ValidateEvaluationResult(req.evaluation(), kMaxReportedStep));
  if (req.parameter_count() > 0 && state_.parameter_count() == 0) {
    state_.set_parameter_count(req.parameter_count());
    Status st = PersistLocked();
    if (!st.ok()) return UnavailableError("cannot persist state: " + st.message());
    // The plan depends on the count: re-plan (at once if a generation already formed without it).
    MarkMembershipChangedLocked();
  }
  auto& m = members_[req.member_id()];
  m.heartbeat_generation = req.generation();
  m.last_heartbeat = clock_->Now();
  if (req.step() > m.step || req.generation() != m.generation)
    m.step_advanced_at = m.last_heartbeat;
  if (req.step() >= 0) m.step = req.step();
  if (req.epoch() >= 0) m.epoch = req.epoch();
  m.generation = req.generation();
  if (req.has_metrics()) {
    m.metrics = req.metrics();
    UpdateBatchSplitLocked();
    MaybeDrainStragglerLocked(req.member_id());
  }
  if (req.has_evaluation())
    RecordEvaluation(req.evaluation(), &last_evaluation_, &best_evaluation_);
  MaybeStartPeriodicCheckpointLocked();
  v1::HeartbeatResponse resp;
  resp.set_current_generation(generation_ ? generation_->number() : 0);
  resp.set_state(state_.state());
  auto* d = resp.mutable_directives();
  d->set_paused(state_.state() == v1::JOB_STATE_PAUSED || state_.state() == v1::JOB_STATE_WAITING);
  if (m.draining || state_.state() == v1::JOB_STATE_STOPPING) {
    d->set_leave(true);
    d->set_leave_reason(m.draining ? m.leave_reason : "job stopping");
  } else if (state_.state() == v1::JOB_STATE_FAILED) {
    d->set_leave(true);
    d->set_leave_reason("job failed: " + state_.failure().message().substr(0, 900));
  }
  if (pending_checkpoint_) {
    d->set_checkpoint_id(pending_checkpoint_->id);
    d->set_checkpoint_step(pending_checkpoint_->step);
  }
  if (trace_last_step_ > 0) {
    d->set_trace_first_step(trace_first_step_);
    d->set_trace_last_step(trace_last_step_);
  }
  return resp;
}

void Coordinator::UpdateBatchSplitLocked() {
  if (!generation_) return;
  std::vector<std::pair<int, int64_t>> reported;
  for (const auto& [id, m] : members_)
    if (m.rank >= 0 && m.generation == generation_->number())
      reported.emplace_back(m.rank, m.metrics.local_batch());
  const std::vector<int64_t> shares =
      ReportedBatchSplit(reported, generation_->members_size(), state_.job().global_batch());
  if (shares.empty() || std::equal(shares.begin(), shares.end(), batch_split_.samples().begin(),
                                   batch_split_.samples().end()))
    return;
  const bool first = batch_split_.samples_size() == 0;
  batch_split_.clear_samples();
  for (int64_t n : shares) batch_split_.add_samples(n);
  int64_t step = 0;
  for (const auto& [id, m] : members_)
    if (m.rank >= 0) step = std::max(step, m.step);
  batch_split_.set_from_step(step);
  std::string text;
  for (int64_t n : shares) text += (text.empty() ? "" : " ") + std::to_string(n);
  // The first report of a job is the even split it starts with, not a decision.
  if (!first)
    EmitLocked("batch_split", "samples by rank from about step " + std::to_string(step) + ": " +
                                  text + " (generation " + std::to_string(generation_->number()) +
                                  ")");
}

void Coordinator::MaybeDrainStragglerLocked(const std::string& id) {
  if (!straggler_drain_.enabled() || !generation_) return;
  MemberRecord& m = members_.at(id);
  if (m.draining || m.rank < 0 || m.generation != generation_->number()) return;
  std::vector<double> others;
  int active = 0;
  for (const auto& [other_id, o] : members_) {
    if (o.draining || o.rank < 0) continue;
    ++active;
    if (other_id != id && o.metrics.compute_samples_per_second() > 0)
      others.push_back(o.metrics.compute_samples_per_second());
  }
  double median = 0;
  if (!others.empty()) {
    std::sort(others.begin(), others.end());
    median = others[others.size() / 2];
  }
  const double mine = m.metrics.compute_samples_per_second();
  const auto steps = straggler_drain_.Observe(id, m.step, mine, median);
  if (!steps) return;
  if (active <= state_.min_workers()) {
    LOG_WARN("coordinator") << id << " is a straggler (" << mine << " samples/s against the "
                            << "others' median " << median << ") but draining it would leave "
                            << "fewer than min_workers " << state_.min_workers();
    return;
  }
  m.draining = true;
  char why[200];
  std::snprintf(why, sizeof(why),
                "straggler: %.1f samples/s of compute, below %.0f%% of the others' median "
                "%.1f for %lld steps",
                mine, 100.0 * state_.job().elastic().straggler().drain_below(), median,
                static_cast<long long>(*steps));
  m.leave_reason = why;
  EmitLocked("member_draining", id + " will leave at its next step boundary (" + why + ")", id);
}

Status Coordinator::Leave(const v1::LeaveRequest& req) {
  if (req.reason().size() > 1024)
    return InvalidArgumentError("reason: longer than 1024 characters");
  RETORT_RETURN_IF_ERROR(ValidateJobFailure(req.failure()));
  MutexLock lock(mu_);
  if (req.job_completed() && members_.count(req.member_id()) == 0 &&
      MemberIdBoot(req.member_id()) > 0 && MemberIdBoot(req.member_id()) < state_.boot_count()) {
    // A worker that completed the job while this coordinator was down (its Leave is retried
    // until the restarted coordinator answers): the job is completed, not waiting for workers
    // that will never come back.
    if (state_.state() == v1::JOB_STATE_RUNNING || state_.state() == v1::JOB_STATE_WAITING ||
        state_.state() == v1::JOB_STATE_STOPPING)
      SetStateLocked(v1::JOB_STATE_COMPLETED,
                     req.member_id() + " of a previous coordinator run completed it");
    rejoin_gate_.Open();
    UpdateFinishedLocked();
    return Status::Ok();
  }
  RETORT_RETURN_IF_ERROR(CheckMemberLocked(req.member_id()));
  if (req.failure().kind() == v1::FAILURE_KIND_RECURRING) {
    v1::JobFailure failure = req.failure();
    failure.set_member_id(req.member_id());  // the caller's id, whatever it wrote
    FailJobLocked(failure);
  }
  if (req.job_completed() &&
      (state_.state() == v1::JOB_STATE_RUNNING || state_.state() == v1::JOB_STATE_STOPPING)) {
    // The first member that finishes the job moves it to completed; the rest follow.
    state_.set_state(v1::JOB_STATE_COMPLETED);
    Status st = PersistLocked();
    if (!st.ok()) LOG_ERROR("coordinator") << "persisting state: " << st;
    EmitLocked("state", "job is completed");
  }
  RemoveMemberLocked(req.member_id(), "member_left", req.reason().empty() ? "left" : req.reason());
  UpdateFinishedLocked();
  return Status::Ok();
}

void Coordinator::SubscribeGenerations(GenerationListener* l) {
  MutexLock lock(mu_);
  MutexLock sl(subs_mu_);
  generation_listeners_.insert(l);
  if (generation_) l->OnGeneration(generation_);
}

void Coordinator::UnsubscribeGenerations(GenerationListener* l) {
  MutexLock sl(subs_mu_);
  generation_listeners_.erase(l);
}

void Coordinator::SubscribeEvents(EventListener* l) {
  MutexLock sl(subs_mu_);
  event_listeners_.insert(l);
}

void Coordinator::UnsubscribeEvents(EventListener* l) {
  MutexLock sl(subs_mu_);
  event_listeners_.erase(l);
}

std::shared_ptr<const v1::Generation> Coordinator::CurrentGeneration() const {
  MutexLock lock(mu_);
  return generation_;
}

int64_t Coordinator::MaxMemberStepLocked() const {
  int64_t step = 0;
  for (const auto& [id, m] : members_) step = std::max(step, m.step);
  return step;
}

}  // namespace retort::coordinator

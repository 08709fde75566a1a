#include "worker/worker_agent.h"

#include <algorithm>
#include <random>
#include <thread>
#include <utility>

#include "common/backoff.h"
#include "common/backoff_policies.h"
#include "common/deadline.h"
#include "common/logging.h"
#include "common/retry.h"
#include "rpc/job_state.h"
#include "worker/generation_follower.h"
#include "worker/job_failure.h"

namespace retort::worker {
namespace {

std::string RandomIncarnation() {
  std::random_device rd;
  std::mt19937_64 rng((static_cast<uint64_t>(rd()) << 32) ^ rd());
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

// How long training may take to reach a step boundary before the member leaves anyway.
constexpr int64_t kLeaveGraceMs = 120000;
// How long a worker that completed the job retries telling an unreachable coordinator.
constexpr int64_t kCompletedLeaveRetryMs = 30000;

// Join is repeated for more than the common set (IsRetryable, common/retry.h): a full job
// admits members later (RESOURCE_EXHAUSTED, "retry later"), this incarnation's earlier join
// may still be registered until it is dropped (ALREADY_EXISTS), and a coordinator failing
// mid-call (ABORTED, UNKNOWN, INTERNAL) may be back: a worker keeps trying to join until it
// is told no (INVALID_ARGUMENT, FAILED_PRECONDITION, ...).
bool RetryableJoinError(StatusCode c) {
  return IsRetryable(c) || c == StatusCode::kResourceExhausted || c == StatusCode::kAlreadyExists ||
         c == StatusCode::kAborted || c == StatusCode::kUnknown || c == StatusCode::kInternal;
}

}  // namespace

WorkerAgent::WorkerAgent(WorkerOptions options, CoordinatorClient* client,
                         GenerationHandler* handler)
    : options_(std::move(options)), client_(client), handler_(handler) {
  if (options_.identity.incarnation().empty())
    options_.identity.set_incarnation(RandomIncarnation());
}

WorkerAgent::~WorkerAgent() {
  RequestStop("destroyed");
  if (watch_thread_.joinable()) watch_thread_.join();
}

std::string WorkerAgent::member_id() const {
  MutexLock lock(mu_);
  return member_id_;
}

v1::JobState WorkerAgent::ended_state() const {
  MutexLock lock(mu_);
  return ended_state_;
}

void WorkerAgent::RequestStop(const std::string& reason) {
  MutexLock lock(mu_);
  if (!stop_) {
    stop_ = true;
    stop_reason_ = reason;
  }
  if (watch_ != nullptr) watch_->Cancel();
  cv_.NotifyAll();
}

void WorkerAgent::CompleteJob() {
  {
    MutexLock lock(mu_);
    job_completed_ = true;
  }
  RequestStop("completed");
}

void WorkerAgent::FailJob(v1::JobFailure failure) {
  std::string reason = "job failed: " + failure.message();
  {
    MutexLock lock(mu_);
    if (failure_) return;
    failure.set_member_id(member_id_);
    failure.set_node(options_.identity.node());
    failure.set_local_rank(options_.identity.local_rank());
    failure_ = std::move(failure);
  }
  RequestStop(reason.substr(0, 1000));
}

void WorkerAgent::LeaveAfterSetupFailure(const std::string& member_id, const Status& error) {
  v1::JobFailure failure = MakeJobFailure(FailurePhase::kSetup, error, 0);
  v1::LeaveRequest leave;
  leave.set_member_id(member_id);
  if (failure.kind() == v1::FAILURE_KIND_RECURRING) {
    failure.set_member_id(member_id);
    failure.set_node(options_.identity.node());
    failure.set_local_rank(options_.identity.local_rank());
    leave.set_reason(("job failed: " + failure.message()).substr(0, 1000));
    *leave.mutable_failure() = std::move(failure);
  } else {
    leave.set_reason(("setup failed: " + failure.message()).substr(0, 1000));
  }
  Status s = client_->Leave(leave);
  if (s.ok())
    LOG_INFO("worker") << "left the job (" << leave.reason() << ")";
  else if (s.code() != StatusCode::kNotFound)
    LOG_WARN("worker") << "leave after a setup failure failed: " << s;
}

void WorkerAgent::ReportProgress(int64_t step, int64_t epoch, const v1::StepMetrics& metrics) {
  MutexLock lock(mu_);
  step_ = step;
  epoch_ = epoch;
  metrics_ = metrics;
}

void WorkerAgent::ReportEvaluation(const v1::EvaluationResult& evaluation) {
  MutexLock lock(mu_);
  evaluation_ = evaluation;
}

bool WorkerAgent::SleepUnlessStopped(std::chrono::milliseconds d) {
  MutexLock lock(mu_);
  return !cv_.WaitFor(mu_, d, [this]() RETORT_REQUIRES(mu_) { return stop_; });
}

Status WorkerAgent::JoinWithBackoff(bool rejoin) {
  Backoff backoff(std::chrono::milliseconds(options_.join_backoff_initial_ms),
                  std::chrono::milliseconds(options_.join_backoff_max_ms));
  const int64_t timeout_ms = rejoin ? options_.rejoin_timeout_ms : options_.join_timeout_ms;
  Deadline deadline = timeout_ms > 0 ? Deadline::AfterMs(timeout_ms) : Deadline::Never();
  v1::JoinRequest req;
  *req.mutable_identity() = options_.identity;
  req.set_parameter_count(options_.parameter_count);
  {
    MutexLock lock(mu_);
    if (stop_) return CancelledError("stopped before joining: " + stop_reason_);
  }
  StatusCode last_logged = StatusCode::kOk;
  bool stopped = false;
  auto resp = RetryUntil(
      deadline, backoff, RetryableJoinError,
      [&] {
        auto r = client_->Join(req);
        if (!r.ok() && RetryableJoinError(r.status().code()) && r.status().code() != last_logged) {
          LOG_WARN("worker") << "join failed, retrying with backoff: " << r.status();
          last_logged = r.status().code();
        }
        return r;
      },
      [&](std::chrono::milliseconds wait) {
        stopped = !SleepUnlessStopped(wait);
        return !stopped;
      });
  if (!resp.ok()) {
    if (stopped) return CancelledError("stopped before joining");
    if (RetryableJoinError(resp.status().code()))
      return rejoin ? DeadlineExceededError(
                          "this worker is no longer a member (evicted, or the coordinator "
                          "restarted) and could not re-join within " +
                          std::to_string(timeout_ms) +
                          " ms (--rejoin-timeout-ms): " + resp.status().message())
                    : DeadlineExceededError("could not join within " + std::to_string(timeout_ms) +
                                            " ms (--join-timeout-ms): " + resp.status().message());
    return resp.status();
  }
  MutexLock lock(mu_);
  if (resp->ended_state() != v1::JOB_STATE_UNSPECIFIED) {
    ended_state_ = resp->ended_state();
    return FailedPreconditionError(
        std::string("job is ") + rpc::JobStateName(ended_state_) + "; not accepting members" +
        (resp->has_failure() ? " (" + resp->failure().message().substr(0, 512) + ")" : ""));
  }
  member_id_ = resp->member_id();
  // A re-join: the stream open under the old id is reopened under the new one, and a
  // generation it delivered meanwhile is judged again under the new id (GenerationFollower).
  if (rejoin && watch_ != nullptr) {
    rejoined_ = true;
    watch_->Cancel();
  }
  job_ = resp->job();
  heartbeat_interval_ms_ = resp->heartbeat_interval_ms() > 0 ? resp->heartbeat_interval_ms() : 1000;
  LOG_INFO("worker") << "joined " << client_->address() << " as " << member_id_ << " (job '"
                     << job_.name() << "', generation " << resp->current_generation() << ")";
  if (handler_) {
    auto count = handler_->OnJoined(*resp);
    if (!count.ok()) {
      LeaveAfterSetupFailure(member_id_, count.status());
      return count.status();
    }
    if (*count > 0) options_.parameter_count = *count;
  }
  return Status::Ok();
}

void WorkerAgent::WatchLoop() {
  Backoff backoff = backoff_policies::kWatchReconnect.Make();
  GenerationFollower follower;
  while (true) {
    std::unique_ptr<CoordinatorClient::GenerationWatch> watch;
    {
      MutexLock lock(mu_);
      if (stop_) return;
      watch = client_->WatchGenerations(member_id_, follower.ResumeAfter(member_id_));
      watch_ = watch.get();
    }
    v1::Generation gen;
    while (watch->Read(&gen)) {
      backoff.Reset();
      const std::string me = member_id();
      if (!follower.Accept(gen.number(), me)) continue;
      generation_ = gen.number();
      int rank = -1;
      for (const auto& m : gen.members())
        if (m.member_id() == me) rank = m.rank();
      LOG_INFO("worker") << "GENERATION number=" << gen.number() << " rank=" << rank
                         << " world=" << gen.members_size() << " nodes=" << gen.nodes_size()
                         << " state=" << gen.state();
      if (handler_) handler_->OnGeneration(gen, me, rank);
    }
    bool rejoined;
    {
      MutexLock lock(mu_);
      watch_ = nullptr;
      if (stop_) return;
      rejoined = std::exchange(rejoined_, false);
    }
    Status s = watch->Finish();
    LOG_DEBUG("worker") << "generation stream ended: " << s;
    // Reopened at once after a re-join (JoinWithBackoff cancelled it), after a backoff otherwise.
    if (!rejoined && !SleepUnlessStopped(backoff.Next())) return;
  }
}

Status WorkerAgent::Run() {
  RETORT_RETURN_IF_ERROR(JoinWithBackoff(/*rejoin=*/false));
  watch_thread_ = std::thread([this] { WatchLoop(); });
  Backoff reconnect = backoff_policies::kCoordinatorAway.Make();
  bool coordinator_away = false;
  Deadline away_deadline = Deadline::Never();  // armed while the coordinator is unreachable
  Status result = Status::Ok();
  std::string leave_reason;
  while (true) {
    v1::HeartbeatRequest hb;
    {
      MutexLock lock(mu_);
      if (stop_) {
        leave_reason = stop_reason_;
        break;
      }
      hb.set_member_id(member_id_);
      hb.set_step(step_);
      hb.set_epoch(epoch_);
      *hb.mutable_metrics() = metrics_;
      if (evaluation_.step() > 0) *hb.mutable_evaluation() = evaluation_;
    }
    hb.set_generation(generation_.load());
    hb.set_parameter_count(options_.parameter_count);
    auto resp = client_->Heartbeat(hb);
    auto wait = std::chrono::milliseconds(heartbeat_interval_ms_);
    if (resp.ok()) {
      if (coordinator_away) LOG_INFO("worker") << "coordinator is back";
      coordinator_away = false;
      reconnect.Reset();
      if (handler_) handler_->OnDirectives(resp->directives());
      if (resp->directives().leave()) {
        leave_reason = resp->directives().leave_reason();
        LOG_INFO("worker") << "coordinator asks this member to leave: " << leave_reason;
        break;
      }
      // The job ended while this member is still in it (it joined too late to get a rank, or
      // its generation was superseded by the end, or it is finishing its own last writes):
      // nothing more will come, so leave (after training stops) rather than wait for a signal.
      // (Not a completion: only the member that finished the last step completes a job.)
      if (const auto st = resp->state(); st == v1::JOB_STATE_COMPLETED ||
                                         st == v1::JOB_STATE_STOPPED ||
                                         st == v1::JOB_STATE_FAILED) {
        leave_reason = st == v1::JOB_STATE_COMPLETED ? "job completed"
                       : st == v1::JOB_STATE_STOPPED ? "job stopped"
                                                     : "job failed";
        LOG_INFO("worker") << "leaving: " << leave_reason;
        break;
      }
    } else if (resp.status().code() == StatusCode::kNotFound) {
      // The coordinator restarted (or evicted us): join again under a new member id.
      LOG_WARN("worker") << "coordinator no longer knows " << member_id() << "; re-joining";
      Status s = JoinWithBackoff(/*rejoin=*/true);
      if (!s.ok()) {
        result = s;
        break;
      }
      continue;
    } else {
      if (!coordinator_away) {
        LOG_WARN("worker") << "coordinator unreachable, training continues: " << resp.status();
        away_deadline = options_.rejoin_timeout_ms > 0
                            ? Deadline::AfterMs(options_.rejoin_timeout_ms)
                            : Deadline::Never();
      } else if (away_deadline.Expired()) {
        result = DeadlineExceededError(
            "the coordinator " + client_->address() + " stayed unreachable for " +
            std::to_string(options_.rejoin_timeout_ms) +
            " ms (--rejoin-timeout-ms); giving up: " + resp.status().message());
        LOG_ERROR("worker") << result;
        leave_reason = "coordinator unreachable";
        break;
      }
      coordinator_away = true;
      wait = std::min(wait, reconnect.Next());
    }
    if (!SleepUnlessStopped(wait)) continue;  // loop re-checks stop_ and leaves
  }
  if (handler_) handler_->OnLeaving(leave_reason, Deadline::AfterMs(kLeaveGraceMs));
  RequestStop(leave_reason);
  if (watch_thread_.joinable()) watch_thread_.join();
  v1::LeaveRequest leave;
  {
    MutexLock lock(mu_);
    leave.set_member_id(member_id_);
    if (failure_) *leave.mutable_failure() = *failure_;
    leave.set_job_completed(job_completed_);
  }
  leave.set_reason(leave_reason.substr(0, 1000));
  // The job's completion must reach the coordinator even when it is restarting right now
  // (a restarted one accepts it from a member of its previous run): retry while it is away.
  // Any other reason to leave gets one attempt.
  Backoff backoff = backoff_policies::kLeave.Make();
  const Deadline deadline = leave.job_completed() ? Deadline::AfterMs(kCompletedLeaveRetryMs)
                                                  : Deadline::After(std::chrono::seconds(0));
  Status s = RetryUntil(deadline, backoff, IsRetryable, [&] { return client_->Leave(leave); });
  if (s.ok())
    LOG_INFO("worker") << "left the job (" << leave_reason << ")";
  else if (s.code() != StatusCode::kNotFound)
    LOG_WARN("worker") << "leave failed: " << s;
  return result;
}

}  // namespace retort::worker

// The worker's control-plane agent: joins the coordinator, heartbeats, follows generations,
// re-joins with backoff after a coordinator restart, obeys directives (pause, leave, checkpoint)
// and leaves cleanly on Stop/SIGTERM. Training plugs in through GenerationHandler and
// ReportProgress; the agent itself never blocks on training.
//
// Threading: Run() blocks the calling thread (heartbeats) and owns one extra thread that reads
// the generation stream. RequestStop() and ReportProgress() may be called from any thread;
// handler callbacks run on the watch thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "common/backoff_policies.h"
#include "common/deadline.h"
#include "common/mutex.h"
#include "common/status.h"
#include "retort/v1/retort.pb.h"
#include "worker/coordinator_client.h"

namespace retort::worker {

struct WorkerOptions {
  v1::MemberIdentity identity;  // incarnation is filled in when empty
  int64_t parameter_count = 0;
  int64_t join_backoff_initial_ms = backoff_policies::kJoin.initial.count();
  int64_t join_backoff_max_ms = backoff_policies::kJoin.max.count();
  // Give up the first join after this long without success (0 = never).
  int64_t join_timeout_ms = 0;
  // Give up after this long once the coordinator is lost: unreachable for heartbeats, or no
  // longer knowing this member (evicted, or restarted) with every re-join failing (0 = never).
  // Bounded by default: a worker cut off by a partition whose job then ended with its
  // coordinator must exit, not retry forever; long enough for a coordinator restart on
  // Kubernetes.
  int64_t rejoin_timeout_ms = 300000;
};

class GenerationHandler {
 public:
  virtual ~GenerationHandler() = default;
  // A new generation; `member_id` is this worker's id when it is a member, and `rank` its rank
  // (-1 when this worker is not in the generation yet).
  virtual void OnGeneration(const v1::Generation& generation, const std::string& member_id,
                            int rank) = 0;
  virtual void OnDirectives(const v1::Directives& directives) {}
  // After every successful join (also re-joins after a coordinator restart). Returns the
  // student's flat parameter count once known (0 = unknown); an error makes the worker leave.
  virtual StatusOr<int64_t> OnJoined(const v1::JoinResponse& response) { return int64_t{0}; }
  // The agent is about to leave the job (stop request, drain, job stop): return once training
  // has stopped at a step boundary, or by `deadline`.
  virtual void OnLeaving(const std::string& reason, Deadline deadline) {}
};

class WorkerAgent {
 public:
  WorkerAgent(WorkerOptions options, CoordinatorClient* client, GenerationHandler* handler);
  ~WorkerAgent();

  // Runs until a stop is requested, the coordinator asks this member to leave, or a fatal error
  // (the job is over, invalid identity). Leaves the job before returning.
  Status Run();
  // Async-signal-unsafe; from signal handlers set a flag and call this from a normal thread.
  void RequestStop(const std::string& reason) RETORT_EXCLUDES(mu_);
  // This member finished the job's last step: the agent stops, and its Leave completes the job
  // (retried while the coordinator is away, so a restart does not lose the completion).
  // Thread-safe; a stop requested earlier keeps its reason but the Leave still completes.
  void CompleteJob() RETORT_EXCLUDES(mu_);
  // A recurring failure (see job_failure.h): the agent stops and its Leave carries `failure`,
  // which fails the job. The first call wins. Thread-safe.
  void FailJob(v1::JobFailure failure) RETORT_EXCLUDES(mu_);
  void ReportProgress(int64_t step, int64_t epoch, const v1::StepMetrics& metrics)
      RETORT_EXCLUDES(mu_);
  // The job's latest evaluation during training (rank 0): every later heartbeat carries it.
  void ReportEvaluation(const v1::EvaluationResult& evaluation) RETORT_EXCLUDES(mu_);

  std::string member_id() const RETORT_EXCLUDES(mu_);
  // The job's state when the coordinator refused this worker's join (or re-join) because the
  // job had ended or was ending; Run() then returns FAILED_PRECONDITION saying so.
  // JOB_STATE_UNSPECIFIED otherwise. Thread-safe.
  v1::JobState ended_state() const RETORT_EXCLUDES(mu_);
  uint64_t generation() const { return generation_.load(); }
  const v1::JobSpec& job() const { return job_; }

 private:
  // Joins (or re-joins: `rejoin`), retrying retryable failures with backoff until the join
  // or re-join timeout.
  Status JoinWithBackoff(bool rejoin);
  // Leaves after the handler's OnJoined failed (a setup failure, classified by job_failure.h).
  void LeaveAfterSetupFailure(const std::string& member_id, const Status& error);
  void WatchLoop();
  bool SleepUnlessStopped(std::chrono::milliseconds d) RETORT_EXCLUDES(mu_);

  WorkerOptions options_;
  CoordinatorClient* const client_;
  GenerationHandler* const handler_;

  mutable Mutex mu_;
  CondVar cv_;
  bool stop_ RETORT_GUARDED_BY(mu_) = false;
  std::string stop_reason_ RETORT_GUARDED_BY(mu_);
  bool job_completed_ RETORT_GUARDED_BY(mu_) = false;  // see CompleteJob
  std::string member_id_ RETORT_GUARDED_BY(mu_);
  int64_t step_ RETORT_GUARDED_BY(mu_) = 0;
  int64_t epoch_ RETORT_GUARDED_BY(mu_) = 0;
  v1::StepMetrics metrics_ RETORT_GUARDED_BY(mu_);
  v1::EvaluationResult evaluation_ RETORT_GUARDED_BY(mu_);  // step 0: none yet
  std::optional<v1::JobFailure> failure_ RETORT_GUARDED_BY(mu_);
  v1::JobState ended_state_ RETORT_GUARDED_BY(mu_) = v1::JOB_STATE_UNSPECIFIED;
  CoordinatorClient::GenerationWatch* watch_ RETORT_GUARDED_BY(mu_) = nullptr;
  // Set with the cancel of watch_ after a re-join: the watch thread reopens the stream at once.
  bool rejoined_ RETORT_GUARDED_BY(mu_) = false;

  std::atomic<uint64_t> generation_{0};
  v1::JobSpec job_;  // written once by Run() before the watch thread starts
  int64_t heartbeat_interval_ms_ = 1000;
  std::thread watch_thread_;
};

}  // namespace retort::worker

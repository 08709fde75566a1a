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
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/deadline.h"
#include "common/status.h"
#include "retort/v1/retort.pb.h"
#include "worker/coordinator_client.h"

namespace retort::worker {

struct WorkerOptions {
  v1::MemberIdentity identity;  // incarnation is filled in when empty
  int64_t parameter_count = 0;
  int64_t join_backoff_initial_ms = 100;
  int64_t join_backoff_max_ms = 2000;
  // Give up joining after this long without success (0 = never).
  int64_t join_timeout_ms = 0;
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
  void RequestStop(const std::string& reason);
  // A recurring failure (see job_failure.h): the agent stops and its Leave carries `failure`,
  // which fails the job. The first call wins. Thread-safe.
  void FailJob(v1::JobFailure failure);
  void ReportProgress(int64_t step, int64_t epoch, const v1::StepMetrics& metrics);

  std::string member_id() const;
  uint64_t generation() const { return generation_.load(); }
  const v1::JobSpec& job() const { return job_; }

 private:
  Status JoinWithBackoff();
  // Leaves after the handler's OnJoined failed (a setup failure, classified by job_failure.h).
  void LeaveAfterSetupFailure(const std::string& member_id, const Status& error);
  void WatchLoop();
  bool SleepUnlessStopped(std::chrono::milliseconds d);

  WorkerOptions options_;
  CoordinatorClient* const client_;
  GenerationHandler* const handler_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                                    // GUARDED_BY(mu_)
  std::string stop_reason_;                              // GUARDED_BY(mu_)
  std::string member_id_;                                // GUARDED_BY(mu_)
  int64_t step_ = 0, epoch_ = 0;                         // GUARDED_BY(mu_)
  v1::StepMetrics metrics_;                              // GUARDED_BY(mu_)
  std::optional<v1::JobFailure> failure_;                // GUARDED_BY(mu_)
  CoordinatorClient::GenerationWatch* watch_ = nullptr;  // GUARDED_BY(mu_)

  std::atomic<uint64_t> generation_{0};
  v1::JobSpec job_;  // written once by Run() before the watch thread starts
  int64_t heartbeat_interval_ms_ = 1000;
  std::thread watch_thread_;
};

}  // namespace retort::worker

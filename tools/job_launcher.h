// The local launcher's job loop as an object (tools/job_runner.h's RunJob is its one user): one
// method per step, so that each rule of job_runner.h has one place.
//
//   Run:            the steps in order, then the verdict
//   before the loop (job_launcher_start.cc):
//     CheckWorkerCount, HandlePreviousRun, WriteRunFiles (job.json, TLS certificates),
//     StartCoordinator (waits for its port), SpawnWorker (one slot's process)
//   each round of the loop (job_launcher_loop.cc), every 200 ms, in this order:
//     HandleInterrupts   Ctrl-C: Stop RPC, then SIGTERM, then SIGKILL
//     ReapWorkers        exited workers; RestartOrNot applies the restart policy and
//                        StopIfBelowMinWorkers the job's elastic bounds
//     StartDueRestarts   respawns slots whose backoff has passed
//     WatchCoordinator   the coordinator's exit (a crash stops the workers at once)
//     EscalateAfterEnd   exit_grace_s after the job ended: SIGTERM workers, 2x: all, 3x: SIGKILL
//     EnforceTimeout     --timeout-s
//     ShowProgress       generations (and --stop-when-formed) and steps
//   Verdict (job_runner.cc): the one line and the exit code, from the coordinator's state.
//
// Threading: thread-compatible; one thread (RunJob's) calls Run once. `interrupts` is written by
// the signal watcher and only read here.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "retort/v1/retort.grpc.pb.h"
#include "rpc/client_channel.h"
#include "tools/job_runner.h"
#include "tools/process_group.h"
#include "tools/run_layout.h"

namespace retort::tools {

class JobLauncher {
 public:
  JobLauncher(const RunOptions& options, const v1::JobSpec& job, std::atomic<int>& interrupts);
  JobLauncher(const JobLauncher&) = delete;
  JobLauncher& operator=(const JobLauncher&) = delete;

  // Runs the job to its end; returns RunJob's exit code and sets *results_dir (when not null).
  int Run(std::string* results_dir);

 private:
  using Clock = std::chrono::steady_clock;

  // One worker of the launcher: the process now in it and its restart budget.
  struct Slot {
    int process = -1;  // index in group_
    bool exited = false;
    int restarts = 0;
    std::optional<Clock::time_point> restart_at;
  };

  // Before the loop. Each returns the exit code when the run ends there, nullopt to go on.
  std::optional<int> CheckWorkerCount() const;
  std::optional<int> HandlePreviousRun(std::string* results_dir);
  std::optional<int> WriteRunFiles();
  std::optional<int> StartCoordinator();
  void SpawnWorker(int slot);
  // A process's TLS flags for `role` (coordinator, worker, operator); none without TLS.
  std::vector<std::string> TlsFlags(const std::string& role) const;

  // One round of the loop; false once every process exited and no restart is pending.
  bool Round();
  void HandleInterrupts();
  void ReapWorkers(bool ending);
  void OnWorkerExit(size_t slot, int code, bool ending);
  // Schedules the slot's next restart when the policy allows one; says what happens next.
  std::string RestartOrNot(Slot& slot, int code);
  void StopIfBelowMinWorkers(int live, int needed);
  void StartDueRestarts();
  void WatchCoordinator();
  void EscalateAfterEnd();
  void EnforceTimeout();
  void ShowProgress();

  int Verdict() const;

  // The coordinator's control service: Stop (2 s deadline) and Status (500 ms deadline; the
  // reply is kept in last_status_).
  bool CallStop(const std::string& reason);
  bool PollStatus();
  // Stops the job by the Stop RPC, or SIGTERM to every process when that fails; no restarts.
  void StopJob(const std::string& reason);
  bool JobTerminal() const;
  int LiveWorkers() const;
  void CancelRestarts();
  bool RestartsPending() const;
  std::string Took() const;  // "m:ss" since the coordinator started

  const RunOptions& o_;
  const v1::JobSpec& job_in_;
  std::atomic<int>& interrupts_;
  const RunLayout layout_;
  const int min_workers_;
  const std::chrono::seconds grace_;

  // Set before the loop.
  v1::JobSpec job_;  // job_in_ with the run's output directory
  std::string spec_path_, port_path_, tls_dir_, address_;
  ProcessGroup group_;
  int coord_ = -1;  // the coordinator's index in group_
  Clock::time_point start_;
  std::vector<Slot> slots_;
  std::unique_ptr<v1::ControlService::Stub> control_;

  // What the loop saw and did.
  std::optional<v1::StatusResponse> last_status_;
  int handled_interrupts_ = 0;
  bool stop_requested_ = false;
  std::string stopped_because_;      // --timeout-s / --stop-when-formed
  std::string cannot_continue_;      // why the launcher gave up on the job
  std::vector<std::string> deaths_;  // "worker 1 exited with status 137 (...)", in order
  std::string crash_after_end_;      // a process that died of a signal once the job had ended
  std::optional<int> coord_rc_;
  std::optional<Clock::time_point> ended_at_;
  bool sent_term_ = false, sent_coord_term_ = false, sent_kill_ = false;
  uint64_t shown_generation_ = 0;
  int64_t shown_step_ = -1;
  Clock::time_point last_progress_;
};

}  // namespace retort::tools

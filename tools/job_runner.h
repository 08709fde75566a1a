// The local launcher's job loop (retort-run): starts a coordinator and N workers on 127.0.0.1
// for one job spec, follows the job's elastic bounds, and ends with one line that says how the
// job ended and why.
//
// Elasticity: a worker that exits with a non-zero status while the job runs is reported; its
// slot is restarted (a new process with the same node and local rank, which joins as a new
// member) up to RestartPolicy::max_restarts times with exponential backoff. The job goes on
// while at least min_workers workers run or wait for a restart; below that it is stopped and
// the launcher fails, naming the workers that died. Exit status 2 (usage) is never restarted.
//
// Lifecycle: workers leave by themselves when the job completes and the coordinator exits once
// all have left. Once the job has ended (the coordinator exited or reports completed, stopped or
// failed) the launcher waits exit_grace_s before it sends SIGTERM to a worker still running,
// then SIGTERM to every process after twice that and SIGKILL after three times.
//
// Re-running: the state directory is read before anything starts. A completed job is reported
// ("already completed; results in DIR") with exit 0; a job interrupted mid-run is resumed by the
// coordinator; a stopped or failed one is refused unless `fresh` clears it first.
//
// Exit codes of RunJob: 0 completed (now or earlier), or stopped as asked (Ctrl-C, --timeout-s,
// --stop-when-formed) with every process exiting cleanly; 1 the job failed or cannot continue,
// or a process crashed; 2 usage (the spec and flags cannot work together).
//
// Threading: one thread (main's) runs RunJob; `interrupts` is incremented by the signal watcher.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "retort/v1/retort.pb.h"
#include "tools/launcher_policy.h"

namespace retort::tools {

struct RunOptions {
  std::string bin_dir, log_level = "info";
  int workers = 2, workers_per_node = 0, threads = 0;
  // > 0: nodes of this many workers, each worker on the GPU of its local rank (--device=cuda:L).
  int gpus_per_node = 0;
  int64_t timeout_s = 0;
  bool stop_when_formed = false, train = true;
  RestartPolicy restarts;
  // How long workers get to exit by themselves after the coordinator exited.
  int64_t exit_grace_s = 10;
  // Remove what an earlier run of the job left (state, checkpoints, metrics, results) first.
  bool fresh = false;
  // --output-dir and --state-dir as given ("" = not given; see run_layout.h).
  std::string output_flag, state_flag;
  // Extra flags for every worker process, restarted ones included (--worker-arg).
  std::vector<std::string> worker_args;
  // Mutual TLS between every process of the job: a folder as `retortctl certs` writes it
  // (ca.crt, coordinator/worker/operator .crt and .key). With `tls` and no folder, the launcher
  // makes one in the output directory (tls/, kept across re-runs). Empty and false: plain TCP
  // on 127.0.0.1.
  std::string tls_dir;
  bool tls = false;
};

// Runs one job to its end. On return *results_dir (when not null) names the directory holding
// the job's result.json.
int RunJob(const RunOptions& options, const v1::JobSpec& job, std::atomic<int>& interrupts,
           std::string* results_dir = nullptr);

}  // namespace retort::tools

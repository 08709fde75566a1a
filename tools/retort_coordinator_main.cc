// retort-coordinator: runs a job's coordinator (membership, generations, checkpoints, control).
//
// Exit status: 0 the job completed or was stopped (or a signal ended the coordinator, whose
// state is durable), 1 internal error (state dir, listen address), 2 usage or an invalid job spec
// (including its pre-flight checks, coordinator/job_preflight.h), 3 the job failed (a failure
// that recurs on every try; `retortctl status` shows it).
#include <atomic>
#include <cstdio>
#include <optional>
#include <thread>

#include "common/args.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "coordinator/coordinator.h"
#include "coordinator/job_preflight.h"
#include "coordinator/job_spec.h"
#include "coordinator/server.h"
#include "tools/signals.h"

using namespace retort;

int main(int argc, char** argv) {
  tools::BlockTerminationSignals();
  std::string listen = "0.0.0.0:7070", job_path, log_level = "info", port_file;
  coordinator::CoordinatorOptions opts;
  bool exit_when_finished = true;
  bool check_paths = true;
  constexpr int kExitJobFailed = 3;
  ArgParser args(
      "retort-coordinator --state-dir=DIR [--job=SPEC.yaml] [flags]",
      "Runs the coordinator of one retort job: worker membership and generations, the\n"
      "optimizer-state sharding plan, coordinated checkpoints and the operator control API\n"
      "(gRPC, with grpc.health.v1 and server reflection). State survives restarts in --state-dir.\n"
      "\nExit status: 0 job completed or stopped (or signalled), 1 internal error, 2 usage or\n"
      "invalid job spec, 3 job failed (a failure that recurs on every try).");
  args.AddString("listen", &listen, "gRPC listen address host:port (port 0 picks a free port)");
  args.AddString("state-dir", &opts.state_dir, "directory for durable state (required)");
  args.AddString("job", &job_path,
                 "job spec (YAML or JSON); required on first start, optional on restart");
  args.AddInt("heartbeat-interval-ms", &opts.heartbeat_interval_ms, "how often workers heartbeat");
  args.AddInt("eviction-timeout-ms", &opts.eviction_timeout_ms,
              "evict a worker silent for this long");
  args.AddInt("disconnect-grace-ms", &opts.disconnect_grace_ms,
              "evict a worker whose generation stream closed and stayed closed this long "
              "(0 = heartbeats only)");
  args.AddInt("settle-ms", &opts.settle_ms,
              "form a generation after membership is quiet this long");
  args.AddInt("min-workers", &opts.min_workers,
              "override the job's elastic.min_workers (0 = job's)");
  args.AddInt("max-workers", &opts.max_workers,
              "override the job's elastic.max_workers (0 = job's)");
  args.AddInt("rejoin-grace-ms", &opts.rejoin_grace_ms,
              "after a restart, wait up to this long for the previous generation's workers to "
              "re-join before forming a generation (their in-memory state may be newer than the "
              "last checkpoint); ends early once all are back; 0 = do not wait");
  args.AddBool("restart-from-scratch", &opts.restart_from_scratch,
               "when state.json lists checkpoints and none of them is usable, forget them and "
               "start the job from step 0 (without it the coordinator refuses to start)");
  args.AddString("checkpoint-dir", &opts.checkpoint_dir,
                 "where checkpoints are committed (default STATE_DIR/checkpoints)");
  args.AddBool("exit-when-finished", &exit_when_finished,
               "exit once the job is stopped/completed and all workers left");
  args.AddBool("check-paths", &check_paths,
               "check that the job's local dataset/model paths exist on this host before any "
               "worker starts (--no-check-paths: only the workers can see them)");
  args.AddString("port-file", &port_file,
                 "write the bound port to this file (for launchers and tests)");
  args.AddString("log-level", &log_level, "debug, info, warning or error");
  auto parsed = args.Parse(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "retort-coordinator: %s\n", parsed.status().message().c_str());
    return 2;
  }
  if (!*parsed) return 0;
  LogLevel level;
  if (!ParseLogLevel(log_level, &level)) {
    std::fprintf(stderr,
                 "retort-coordinator: --log-level: '%s' is not debug, info, warning or error\n",
                 log_level.c_str());
    return 2;
  }
  SetLogLevel(level);
  if (opts.state_dir.empty()) {
    std::fprintf(stderr, "retort-coordinator: --state-dir is required (see --help)\n");
    return 2;
  }
  std::optional<v1::JobSpec> job;
  if (!job_path.empty()) {
    auto spec = coordinator::LoadJobSpecFile(job_path);
    if (!spec.ok()) {
      std::fprintf(stderr, "retort-coordinator: invalid job spec: %s\n",
                   spec.status().message().c_str());
      return 2;
    }
    job = *spec;
    coordinator::PreflightOptions preflight;
    preflight.check_paths = check_paths;
    Status checked = coordinator::PreflightJob(*job, preflight);
    if (!checked.ok()) {
      std::fprintf(stderr, "retort-coordinator: job spec %s fails pre-flight checks: %s\n",
                   job_path.c_str(), checked.message().c_str());
      return 2;
    }
  }
  RealClock clock;
  auto c = coordinator::Coordinator::Create(opts, job, &clock);
  if (!c.ok()) {
    std::fprintf(stderr, "retort-coordinator: %s\n", c.status().ToString().c_str());
    return 1;
  }
  auto server = coordinator::CoordinatorServer::Start(c->get(), listen);
  if (!server.ok()) {
    std::fprintf(stderr, "retort-coordinator: %s\n", server.status().message().c_str());
    return 1;
  }
  (*c)->Start();
  LOG_INFO("coordinator") << "listening on port " << (*server)->port() << " (job '"
                          << (*c)->GetStatus().job_name() << "', state dir " << opts.state_dir
                          << ")";
  if (!port_file.empty()) {
    Status s = WriteFileAtomically(port_file, std::to_string((*server)->port()) + "\n");
    if (!s.ok()) LOG_ERROR("coordinator") << "writing --port-file: " << s;
  }
  std::atomic<bool> signalled{false};
  coordinator::Coordinator* coord = c->get();
  tools::TerminationSignalWatcher signal_watcher([&signalled, coord](int sig) {
    LOG_INFO("coordinator") << "signal " << sig
                            << ": shutting down (state is durable; restart to resume)";
    signalled = true;
    (void)coord;
  });
  while (!signalled) {
    if (exit_when_finished && coord->WaitFinished(200)) {
      LOG_INFO("coordinator") << "job finished ("
                              << coordinator::JobStateName(coord->GetStatus().state())
                              << "); exiting";
      break;
    }
    if (!exit_when_finished) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const v1::StatusResponse final_status = coord->GetStatus();
  (*server)->Shutdown(1000);
  (*c)->Shutdown();
  if (final_status.state() == v1::JOB_STATE_FAILED) {
    const auto& f = final_status.failure();
    std::fprintf(stderr, "retort-coordinator: job '%s' failed: %s (member %s, %s, step %lld)\n",
                 final_status.job_name().c_str(), f.message().c_str(), f.member_id().c_str(),
                 f.phase().c_str(), static_cast<long long>(f.step()));
    return kExitJobFailed;
  }
  return 0;
}

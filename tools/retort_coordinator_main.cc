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
#include "common/deadline.h"
#include "common/logging.h"
#include "common/port_file.h"
#include "coordinator/coordinator.h"
#include "coordinator/coordinator_metrics.h"
#include "coordinator/job_preflight.h"
#include "coordinator/job_spec.h"
#include "coordinator/listen_policy.h"
#include "coordinator/server.h"
#include "rpc/health_server.h"
#include "rpc/job_state.h"
#include "tools/check_job.h"
#include "tools/exit_status.h"
#include "tools/signals.h"

using namespace retort;

namespace {

constexpr const char* kProgram = "retort-coordinator";
constexpr int kExitJobFailed = 3;
// The health port's readiness signal: SERVING while every ranked worker's step advances within
// --stall-deadline-ms (the overall status "" stays the liveness signal).
constexpr const char* kProgressService = "retort.v1.TrainingProgress";

// Everything the flags say.
struct Config {
  std::string listen = "127.0.0.1:7070", job_path, port_file;
  std::string metrics_listen, health_listen;
  std::string check_job;
  bool json = false;
  int64_t stall_deadline_ms = 300000;
  coordinator::CoordinatorOptions opts;
  bool exit_when_finished = true;
  int64_t linger_after_end_ms = 0;
  bool check_paths = true;
  bool insecure_listen = false;
  int signal_exit_code = tools::kExitSignalledDefault;
  coordinator::ServerSecurity security;
};

// How Run ended: the job's last status, and whether a signal ended it before the job did.
struct RunOutcome {
  v1::StatusResponse status;
  bool interrupted = false;
};

void RegisterFlags(ArgParser& args, Config* c) {
  args.AddString("listen", &c->listen,
                 "gRPC listen address host:port (port 0 picks a free port); without TLS only a "
                 "loopback address unless --insecure-listen");
  args.AddBool("insecure-listen", &c->insecure_listen,
               "allow --listen on an address other hosts can reach without TLS: anyone who "
               "reaches it can join, steer or stop the job (logs a warning at start)");
  args.AddString("tls-cert", &c->security.tls_cert,
                 "PEM certificate of this coordinator: serve TLS (re-read when the file changes)");
  args.AddString("tls-key", &c->security.tls_key, "PEM private key of --tls-cert");
  args.AddString("tls-ca", &c->security.tls_ca,
                 "PEM CA: require client certificates signed by it (mutual TLS); the role is the "
                 "certificate subject's OU: worker or operator");
  args.AddInt("tls-refresh-s", &c->security.refresh_s,
              "how often the certificate, key and CA files are checked for changes");
  args.AddString("worker-token-file", &c->security.worker_token_file,
                 "file holding the bearer token of the worker role (re-read when it changes)");
  args.AddString("operator-token-file", &c->security.operator_token_file,
                 "file holding the bearer token of the operator role (re-read when it changes)");
  args.AddString("state-dir", &c->opts.state_dir, "directory for durable state (required)");
  args.AddString("job", &c->job_path,
                 "job spec (YAML or JSON); required on first start, optional on restart");
  args.AddInt("heartbeat-interval-ms", &c->opts.heartbeat_interval_ms,
              "how often workers heartbeat");
  args.AddInt("eviction-timeout-ms", &c->opts.eviction_timeout_ms,
              "evict a worker silent for this long");
  // On in the binary (the library's default is off: see CoordinatorOptions).
  c->opts.own_pause_threshold_ms = 1000;
  args.AddInt("own-pause-threshold-ms", &c->opts.own_pause_threshold_ms,
              "a gap this long in the coordinator's own ticks means it was paused (stopped, "
              "throttled, migrated): every worker then gets the paused time back before its "
              "heartbeats are judged, instead of being evicted for the coordinator's pause "
              "(0 = off)");
  args.AddInt("disconnect-grace-ms", &c->opts.disconnect_grace_ms,
              "evict a worker whose generation stream closed and stayed closed this long "
              "(0 = heartbeats only)");
  args.AddInt("settle-ms", &c->opts.settle_ms,
              "form a generation after membership is quiet this long");
  args.AddInt("min-workers", &c->opts.min_workers,
              "override the job's elastic.min_workers (0 = job's)");
  args.AddInt("max-workers", &c->opts.max_workers,
              "override the job's elastic.max_workers (0 = job's)");
  args.AddInt("rejoin-grace-ms", &c->opts.rejoin_grace_ms,
              "after a restart, wait up to this long for the previous generation's workers to "
              "re-join before forming a generation (their in-memory state may be newer than the "
              "last checkpoint); ends early once all are back; 0 = do not wait");
  args.AddBool("restart-from-scratch", &c->opts.restart_from_scratch,
               "when state.json lists checkpoints and none of them is usable, forget them and "
               "start the job from step 0 (without it the coordinator refuses to start)");
  args.AddString("checkpoint-dir", &c->opts.checkpoint_dir,
                 "where checkpoints are committed (default: the job spec's checkpoint.dir, else "
                 "STATE_DIR/checkpoints); overrides the spec's checkpoint.dir, and says so");
  args.AddBool("exit-when-finished", &c->exit_when_finished,
               "exit once the job is stopped/completed and all workers left");
  args.AddInt("linger-after-end-ms", &c->linger_after_end_ms,
              "with --exit-when-finished: keep answering this long after the job ended and its "
              "members left, so a worker that was waiting or restarting learns the job ended and "
              "exits 0 instead of waiting for a coordinator that is gone (0 = exit at once)");
  tools::AddSignalExitCodeFlag(args, &c->signal_exit_code);
  args.AddBool("check-paths", &c->check_paths,
               "check that the job's local dataset/model paths exist on this host before any "
               "worker starts (--no-check-paths: only the workers can see them)");
  args.AddString("port-file", &c->port_file,
                 "write the bound port to this file (for launchers and tests)");
  args.AddString("health-listen", &c->health_listen,
                 "also serve grpc.health.v1 alone, in plain TCP, on host:port (for probes that "
                 "cannot present a client certificate; no other service there; empty = off)");
  args.AddInt("stall-deadline-ms", &c->stall_deadline_ms,
              "the health port's service retort.v1.TrainingProgress (a readiness signal) turns "
              "NOT_SERVING while a ranked worker's step has not advanced for this long (0 = off)");
  metrics::AddMetricsListenFlag(args, &c->metrics_listen);
  args.AddString("check-job", &c->check_job,
                 "only check this job spec (YAML or JSON; - = stdin) with the coordinator's "
                 "rules and pre-flight checks, print the result and exit (0 valid, 2 invalid)");
  args.AddBool("json", &c->json,
               "--check-job: print one JSON object ({valid, job with defaults} or {valid, "
               "error})");
  args.AddLogLevel();
}

// The flags' rules and the job spec (loaded and pre-flight checked): usage errors.
StatusOr<std::optional<v1::JobSpec>> CheckConfig(const Config& c) {
  if (c.opts.state_dir.empty()) return InvalidArgumentError("--state-dir is required (see --help)");
  if (c.stall_deadline_ms < 0 || c.linger_after_end_ms < 0)
    return InvalidArgumentError("--stall-deadline-ms and --linger-after-end-ms must be >= 0");
  RETORT_RETURN_IF_ERROR(tools::CheckSignalExitCode(c.signal_exit_code));
  if (Status allowed =
          coordinator::CheckListenPolicy(c.listen, c.security.tls(), c.insecure_listen);
      !allowed.ok())
    return tools::UsageError(allowed);
  if (Status valid = coordinator::ValidateServerSecurity(c.security); !valid.ok())
    return tools::UsageError(valid);
  if (c.job_path.empty()) return std::optional<v1::JobSpec>();
  auto spec = coordinator::LoadJobSpecFile(c.job_path);
  if (!spec.ok()) return tools::UsageError(spec.status(), "invalid job spec");
  coordinator::PreflightOptions preflight;
  preflight.check_paths = c.check_paths;
  if (Status checked = coordinator::PreflightJob(*spec, preflight); !checked.ok())
    return tools::UsageError(checked, "job spec " + c.job_path + " fails pre-flight checks");
  return std::optional<v1::JobSpec>(*spec);
}

void LogTransport(const Config& c) {
  const auto& security = c.security;
  LOG_INFO("coordinator") << "transport: "
                          << (!security.tls()           ? "plain TCP"
                              : security.tls_ca.empty() ? "TLS (no client certificates)"
                                                        : "mutual TLS")
                          << (security.worker_token_file.empty() &&
                                      security.operator_token_file.empty()
                                  ? ""
                                  : ", bearer tokens");
  if (!security.tls() && !coordinator::IsLoopbackListenAddress(c.listen))
    LOG_WARN("coordinator") << "INSECURE: serving the control plane on " << c.listen
                            << " without TLS (--insecure-listen): anyone who can reach it can "
                               "join, steer or stop the job";
}

// Serves the job until it finishes (with --exit-when-finished) or a signal arrives; returns the
// job's last status.
// Keeps kProgressService on the health port SERVING while training advances (called from the
// main loop; no threads of its own).
struct ProgressSignal {
  rpc::HealthServer* health;  // null: no health port
  int64_t stall_deadline_ms;  // 0: off
  bool progressing = true;

  void Update(coordinator::Coordinator& coord) {
    if (health == nullptr || stall_deadline_ms <= 0) return;
    const std::vector<std::string> stalled =
        coord.StalledMembers(std::chrono::milliseconds(stall_deadline_ms));
    if (stalled.empty() == progressing) return;
    progressing = stalled.empty();
    health->SetServing(kProgressService, progressing);
    if (progressing) {
      LOG_INFO("coordinator") << "training progresses again: " << kProgressService << " SERVING";
      return;
    }
    std::string who;
    for (const auto& m : stalled) who += (who.empty() ? "" : ", ") + m;
    LOG_WARN("coordinator") << "no step for " << stall_deadline_ms << " ms from " << who << ": "
                            << kProgressService << " NOT_SERVING";
  }
};

StatusOr<RunOutcome> Run(Config c) {
  RETORT_ASSIGN_OR_RETURN(std::optional<v1::JobSpec> job, CheckConfig(c));
  RETORT_ASSIGN_OR_RETURN(
      std::unique_ptr<coordinator::CoordinatorMetricsEndpoint> metrics,
      coordinator::CoordinatorMetricsEndpoint::StartIfListening(c.metrics_listen, "coordinator"));
  if (metrics) c.opts.observer = metrics->metrics();
  RealClock clock;
  auto created = coordinator::Coordinator::Create(c.opts, job, &clock);
  // A refused spec or flags (INVALID_ARGUMENT: exit 2, the same on every try) or a state dir it
  // cannot use (exit 1).
  if (!created.ok()) return created.status();
  coordinator::Coordinator* coord = created->get();
  if (metrics) coordinator::AttachStatusCollector(*metrics, coord);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  if (metrics) interceptors = coordinator::RpcMetricsInterceptors(*metrics);
  auto server =
      coordinator::CoordinatorServer::Start(coord, c.listen, c.security, std::move(interceptors));
  if (!server.ok()) return tools::RunError(server.status());
  std::unique_ptr<rpc::HealthServer> health;
  if (!c.health_listen.empty()) {
    const std::vector<std::string> services = {v1::WorkerService::service_full_name(),
                                               v1::ControlService::service_full_name(),
                                               kProgressService};
    RETORT_ASSIGN_OR_RETURN(health, rpc::HealthServer::Start(c.health_listen, services));
    LOG_INFO("coordinator") << "health checks (plain TCP, grpc.health.v1 only) on port "
                            << health->port();
  }
  coord->Start();
  LogTransport(c);
  LOG_INFO("coordinator") << "listening on port " << (*server)->port() << " (job '"
                          << coord->GetStatus().job_name() << "', state dir " << c.opts.state_dir
                          << ")";
  if (!c.port_file.empty()) {
    Status s = WritePortFile(c.port_file, (*server)->port());
    if (!s.ok()) LOG_ERROR("coordinator") << "writing --port-file: " << s;
  }
  std::atomic<bool> signalled{false};
  tools::TerminationSignalWatcher signal_watcher([&signalled](int sig) {
    LOG_INFO("coordinator") << "signal " << sig
                            << ": shutting down (state is durable; restart to resume)";
    signalled = true;
  });
  ProgressSignal progress{health.get(), c.stall_deadline_ms};
  std::optional<Deadline> linger;  // set once the job finished
  while (!signalled) {
    progress.Update(*coord);
    if (linger) {
      if (linger->Expired()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    } else if (c.exit_when_finished && coord->WaitFinished(200)) {
      const char* state = rpc::JobStateName(coord->GetStatus().state());
      if (c.linger_after_end_ms == 0) {
        LOG_INFO("coordinator") << "job finished (" << state << "); exiting";
        break;
      }
      LOG_INFO("coordinator") << "job finished (" << state << "); answering late workers for "
                              << c.linger_after_end_ms << " ms before exiting";
      linger = Deadline::AfterMs(c.linger_after_end_ms);
    } else if (!c.exit_when_finished) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  RunOutcome outcome{coord->GetStatus()};
  outcome.interrupted = signalled && !rpc::IsFinalJobState(outcome.status.state());
  if (health) health->Shutdown();
  (*server)->Shutdown(1000);
  coord->Shutdown();
  metrics.reset();  // no scrape may outlive the coordinator
  return outcome;
}

}  // namespace

int main(int argc, char** argv) {
  tools::BlockTerminationSignals();
  Config config;
  ArgParser args(
      "retort-coordinator --state-dir=DIR [--job=SPEC.yaml] [flags]\n"
      "       retort-coordinator --check-job=SPEC.yaml [--json] [--no-check-paths]",
      "Runs the coordinator of one retort job: worker membership and generations, the\n"
      "optimizer-state sharding plan, coordinated checkpoints and the operator control API\n"
      "(gRPC, with grpc.health.v1 and server reflection). State survives restarts in --state-dir.\n"
      "\nExit status: 0 job completed or stopped (or signalled: see --signal-exit-code), 1 "
      "internal\n"
      "error, 2 usage or invalid job spec, 3 job failed (a failure that recurs on every try).\n"
      "--check-job only applies the job-spec rules and pre-flight checks: 0 valid, 2 invalid.");
  RegisterFlags(args, &config);
  if (auto code = args.ParseOrExitCode(argc, argv, kProgram)) return *code;
  if (!config.check_job.empty())
    return tools::CheckJobFile(config.check_job, config.json, config.check_paths);
  const int signal_exit_code = config.signal_exit_code;
  StatusOr<RunOutcome> outcome = Run(std::move(config));
  if (!outcome.ok()) return tools::ExitCode(kProgram, outcome.status());
  const v1::StatusResponse& final_status = outcome->status;
  if (final_status.state() == v1::JOB_STATE_FAILED) {
    const auto& f = final_status.failure();
    std::fprintf(stderr, "%s: job '%s' failed: %s (member %s, %s, step %lld)\n", kProgram,
                 final_status.job_name().c_str(), f.message().c_str(), f.member_id().c_str(),
                 f.phase().c_str(), static_cast<long long>(f.step()));
    return kExitJobFailed;
  }
  return outcome->interrupted ? signal_exit_code : tools::kExitOk;
}

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
#include "tools/signals.h"

using namespace retort;

// The health port's readiness signal: SERVING while every ranked worker's step advances within
// --stall-deadline-ms (the overall status "" stays the liveness signal).
constexpr const char* kProgressService = "retort.v1.TrainingProgress";

int main(int argc, char** argv) {
  tools::BlockTerminationSignals();
  std::string listen = "127.0.0.1:7070", job_path, port_file;
  std::string metrics_listen, health_listen;
  coordinator::CoordinatorOptions opts;
  bool exit_when_finished = true;
  bool check_paths = true;
  bool insecure_listen = false;
  coordinator::ServerSecurity security;
  constexpr int kExitJobFailed = 3;
  int64_t stall_deadline_ms = 300000;
  ArgParser args(
      "retort-coordinator --state-dir=DIR [--job=SPEC.yaml] [flags]",
      "Runs the coordinator of one retort job: worker membership and generations, the\n"
      "optimizer-state sharding plan, coordinated checkpoints and the operator control API\n"
      "(gRPC, with grpc.health.v1 and server reflection). State survives restarts in --state-dir.\n"
      "\nExit status: 0 job completed or stopped (or signalled), 1 internal error, 2 usage or\n"
      "invalid job spec, 3 job failed (a failure that recurs on every try).");
  args.AddString("listen", &listen,
                 "gRPC listen address host:port (port 0 picks a free port); without TLS only a "
                 "loopback address unless --insecure-listen");
  args.AddBool("insecure-listen", &insecure_listen,
               "allow --listen on an address other hosts can reach without TLS: anyone who "
               "reaches it can join, steer or stop the job (logs a warning at start)");
  args.AddString("tls-cert", &security.tls_cert,
                 "PEM certificate of this coordinator: serve TLS (re-read when the file changes)");
  args.AddString("tls-key", &security.tls_key, "PEM private key of --tls-cert");
  args.AddString("tls-ca", &security.tls_ca,
                 "PEM CA: require client certificates signed by it (mutual TLS); the role is the "
                 "certificate subject's OU: worker or operator");
  args.AddInt("tls-refresh-s", &security.refresh_s,
              "how often the certificate, key and CA files are checked for changes");
  args.AddString("worker-token-file", &security.worker_token_file,
                 "file holding the bearer token of the worker role (re-read when it changes)");
  args.AddString("operator-token-file", &security.operator_token_file,
                 "file holding the bearer token of the operator role (re-read when it changes)");
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
  args.AddString("health-listen", &health_listen,
                 "also serve grpc.health.v1 alone, in plain TCP, on host:port (for probes that "
                 "cannot present a client certificate; no other service there; empty = off)");
  args.AddInt("stall-deadline-ms", &stall_deadline_ms,
              "the health port's service retort.v1.TrainingProgress (a readiness signal) turns "
              "NOT_SERVING while a ranked worker's step has not advanced for this long (0 = off)");
  args.AddString("metrics-listen", &metrics_listen,
                 "serve Prometheus metrics at http://HOST:PORT/metrics (empty = off)");
  args.AddLogLevel();
  if (auto code = args.ParseOrExitCode(argc, argv, "retort-coordinator")) return *code;
  if (stall_deadline_ms < 0) {
    std::fprintf(stderr, "retort-coordinator: --stall-deadline-ms must be >= 0\n");
    return 2;
  }
  if (opts.state_dir.empty()) {
    std::fprintf(stderr, "retort-coordinator: --state-dir is required (see --help)\n");
    return 2;
  }
  if (Status allowed = coordinator::CheckListenPolicy(listen, security.tls(), insecure_listen);
      !allowed.ok()) {
    std::fprintf(stderr, "retort-coordinator: %s\n", allowed.message().c_str());
    return 2;
  }
  if (Status valid = coordinator::ValidateServerSecurity(security); !valid.ok()) {
    std::fprintf(stderr, "retort-coordinator: %s\n", valid.message().c_str());
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
  std::unique_ptr<coordinator::CoordinatorMetricsEndpoint> metrics;
  if (!metrics_listen.empty()) {
    auto m = coordinator::CoordinatorMetricsEndpoint::Start(metrics_listen);
    if (!m.ok()) {
      std::fprintf(stderr, "retort-coordinator: %s\n", m.status().message().c_str());
      return m.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
    }
    metrics = std::move(*m);
    opts.observer = metrics->observer();
    LOG_INFO("coordinator") << "metrics on port " << metrics->port() << " (/metrics)";
  }
  RealClock clock;
  auto c = coordinator::Coordinator::Create(opts, job, &clock);
  if (!c.ok()) {
    std::fprintf(stderr, "retort-coordinator: %s\n", c.status().ToString().c_str());
    // A refused spec or bad flags (2: the same on every try) or a state dir it cannot use (1).
    return c.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  if (metrics) metrics->Attach(c->get());
  auto server = coordinator::CoordinatorServer::Start(
      c->get(), listen, security,
      metrics
          ? metrics->TakeInterceptors()
          : std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>());
  if (!server.ok()) {
    std::fprintf(stderr, "retort-coordinator: %s\n", server.status().message().c_str());
    return 1;
  }
  std::unique_ptr<rpc::HealthServer> health;
  if (!health_listen.empty()) {
    auto h = rpc::HealthServer::Start(health_listen,
                                      {v1::WorkerService::service_full_name(),
                                       v1::ControlService::service_full_name(), kProgressService});
    if (!h.ok()) {
      std::fprintf(stderr, "retort-coordinator: %s\n", h.status().message().c_str());
      return 1;
    }
    health = std::move(*h);
    LOG_INFO("coordinator") << "health checks (plain TCP, grpc.health.v1 only) on port "
                            << health->port();
  }
  (*c)->Start();
  LOG_INFO("coordinator") << "transport: "
                          << (!security.tls()           ? "plain TCP"
                              : security.tls_ca.empty() ? "TLS (no client certificates)"
                                                        : "mutual TLS")
                          << (security.worker_token_file.empty() &&
                                      security.operator_token_file.empty()
                                  ? ""
                                  : ", bearer tokens");
  if (!security.tls() && !coordinator::IsLoopbackListenAddress(listen))
    LOG_WARN("coordinator") << "INSECURE: serving the control plane on " << listen
                            << " without TLS (--insecure-listen): anyone who can reach it can "
                               "join, steer or stop the job";
  LOG_INFO("coordinator") << "listening on port " << (*server)->port() << " (job '"
                          << (*c)->GetStatus().job_name() << "', state dir " << opts.state_dir
                          << ")";
  if (!port_file.empty()) {
    Status s = WritePortFile(port_file, (*server)->port());
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
  bool progressing = true;  // the health port's kProgressService status
  while (!signalled) {
    if (health && stall_deadline_ms > 0) {
      const std::vector<std::string> stalled =
          coord->StalledMembers(std::chrono::milliseconds(stall_deadline_ms));
      if (stalled.empty() != progressing) {
        progressing = stalled.empty();
        health->SetServing(kProgressService, progressing);
        if (progressing) {
          LOG_INFO("coordinator") << "training progresses again: " << kProgressService
                                  << " SERVING";
        } else {
          std::string who;
          for (const auto& m : stalled) who += (who.empty() ? "" : ", ") + m;
          LOG_WARN("coordinator") << "no step for " << stall_deadline_ms << " ms from " << who
                                  << ": " << kProgressService << " NOT_SERVING";
        }
      }
    }
    if (exit_when_finished && coord->WaitFinished(200)) {
      LOG_INFO("coordinator") << "job finished (" << rpc::JobStateName(coord->GetStatus().state())
                              << "); exiting";
      break;
    }
    if (!exit_when_finished) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const v1::StatusResponse final_status = coord->GetStatus();
  if (health) health->Shutdown();
  (*server)->Shutdown(1000);
  (*c)->Shutdown();
  metrics.reset();  // no scrape may outlive the coordinator
  if (final_status.state() == v1::JOB_STATE_FAILED) {
    const auto& f = final_status.failure();
    std::fprintf(stderr, "retort-coordinator: job '%s' failed: %s (member %s, %s, step %lld)\n",
                 final_status.job_name().c_str(), f.message().c_str(), f.member_id().c_str(),
                 f.phase().c_str(), static_cast<long long>(f.step()));
    return kExitJobFailed;
  }
  return 0;
}

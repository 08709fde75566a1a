// JobLauncher's steps before the loop: the worker count, what an earlier run left, the run's
// files, the coordinator and the workers (job_launcher.h).
#include <unistd.h>

#include <cstdio>

#include "common/file_util.h"
#include "common/port_file.h"
#include "coordinator/job_spec.h"
#include "tools/cert_generator.h"
#include "tools/job_launcher.h"
#include "tools/launcher_policy.h"

namespace retort::tools {

JobLauncher::JobLauncher(const RunOptions& options, const v1::JobSpec& job,
                         std::atomic<int>& interrupts)
    : o_(options),
      job_in_(job),
      interrupts_(interrupts),
      layout_(ResolveLayout(options.output_flag, options.state_flag, job)),
      min_workers_(job.elastic().min_workers()),
      grace_(options.exit_grace_s) {}

std::optional<int> JobLauncher::CheckWorkerCount() const {
  if (o_.workers >= min_workers_) return std::nullopt;
  std::fprintf(stderr,
               "retort-run: --workers=%d is below the job's elastic.min_workers=%d: the job "
               "could never start\n",
               o_.workers, min_workers_);
  return 2;
}

std::optional<int> JobLauncher::HandlePreviousRun(std::string* results_dir) {
  if (o_.fresh) {
    auto removed = RemovePreviousRun(layout_);
    if (!removed.ok()) {
      std::fprintf(stderr, "retort-run: %s\n", removed.status().message().c_str());
      return 1;
    }
    for (const auto& p : *removed) std::printf("retort-run: --fresh: removed %s\n", p.c_str());
  }
  const PreviousRun previous = InspectPreviousRun(layout_, job_in_);
  const char* name = job_in_.name().c_str();
  switch (previous.kind) {
    case PreviousRun::Kind::kCompleted:
      if (results_dir) *results_dir = previous.results_dir;
      std::printf("retort-run: job '%s' already completed; results in %s (--fresh runs it again)\n",
                  name, previous.results_dir.c_str());
      return 0;
    case PreviousRun::Kind::kStopped:
      std::fprintf(stderr,
                   "retort-run: job '%s' in %s was stopped before it completed and cannot be "
                   "resumed; --fresh starts it again\n",
                   name, layout_.state_dir.c_str());
      return 1;
    case PreviousRun::Kind::kFailed:
      std::fprintf(
          stderr, "retort-run: job '%s' in %s failed earlier%s%s; --fresh starts it again\n", name,
          layout_.state_dir.c_str(), previous.detail.empty() ? "" : ": ", previous.detail.c_str());
      return 1;
    case PreviousRun::Kind::kOtherJob:
      std::fprintf(stderr,
                   "retort-run: %s holds the state of job '%s', not '%s'; choose another "
                   "--output-dir (or --state-dir)\n",
                   layout_.state_dir.c_str(), previous.job_name.c_str(), name);
      return 2;
    case PreviousRun::Kind::kUnreadable:
      std::fprintf(stderr, "retort-run: cannot read the state in %s: %s\n",
                   layout_.state_dir.c_str(), previous.detail.c_str());
      return 1;
    case PreviousRun::Kind::kResumable:
      std::printf("retort-run: resuming job '%s' from %s (last checkpoint at step %lld)\n", name,
                  layout_.state_dir.c_str(), static_cast<long long>(previous.last_checkpoint_step));
      return std::nullopt;
    case PreviousRun::Kind::kNone:
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<int> JobLauncher::WriteRunFiles() {
  // The spec the coordinator hands to workers names the run's output directory, so metrics,
  // weights and results land next to the state.
  job_ = job_in_;
  job_.set_output_dir(layout_.output_dir);
  if (Status mk = MakeDirectories(layout_.output_dir); !mk.ok()) {
    std::fprintf(stderr, "retort-run: %s\n", mk.message().c_str());
    return 1;
  }
  spec_path_ = layout_.output_dir + "/job.json";
  port_path_ = layout_.output_dir + "/coordinator.port";
  ::unlink(port_path_.c_str());
  if (Status s = WriteFileAtomically(spec_path_, coordinator::JobSpecToJson(job_) + "\n");
      !s.ok()) {
    std::fprintf(stderr, "retort-run: %s\n", s.message().c_str());
    return 1;
  }

  tls_dir_ = o_.tls_dir;
  if (tls_dir_.empty() && o_.tls) {
    tls_dir_ = layout_.output_dir + "/tls";
    if (!PathExists(tls_dir_ + "/coordinator.crt")) {
      CertOptions certs;
      certs.out_dir = tls_dir_;
      if (auto made = GenerateClusterCertificates(certs); !made.ok()) {
        std::fprintf(stderr, "retort-run: making certificates: %s\n",
                     made.status().message().c_str());
        return 1;
      }
    }
  }
  return std::nullopt;
}

std::vector<std::string> JobLauncher::TlsFlags(const std::string& role) const {
  if (tls_dir_.empty()) return {};
  return {"--tls-cert=" + tls_dir_ + "/" + role + ".crt",
          "--tls-key=" + tls_dir_ + "/" + role + ".key", "--tls-ca=" + tls_dir_ + "/ca.crt"};
}

std::optional<int> JobLauncher::StartCoordinator() {
  std::vector<std::string> argv = {
      o_.bin_dir + "/retort-coordinator", "--listen=127.0.0.1:0",
      "--state-dir=" + layout_.state_dir, "--job=" + spec_path_,
      "--port-file=" + port_path_,        "--log-level=" + o_.log_level};
  if (!layout_.checkpoint_dir.empty()) argv.push_back("--checkpoint-dir=" + layout_.checkpoint_dir);
  for (const auto& f : TlsFlags("coordinator")) argv.push_back(f);
  coord_ = group_.Spawn("coordinator", argv);
  std::printf("retort-run: coordinator started (pid %d)\n", static_cast<int>(group_.pid(coord_)));
  start_ = Clock::now();
  const StatusOr<int> port = WaitForPortFile(port_path_, Deadline::After(std::chrono::seconds(30)),
                                             [&] { return group_.Poll(coord_).has_value(); });
  if (!port.ok()) {
    if (auto rc = group_.Poll(coord_)) {
      group_.WaitForOutput();
      std::printf("retort-run: FAILED: %s before it listened\n",
                  DescribeCoordinatorExit(*rc).c_str());
    } else if (port.status().code() == StatusCode::kDeadlineExceeded) {
      std::printf("retort-run: FAILED: the coordinator did not start within 30 s\n");
    } else {
      std::printf("retort-run: FAILED: %s\n", port.status().message().c_str());
    }
    return 1;
  }
  address_ = "127.0.0.1:" + std::to_string(*port);

  rpc::ClientSecurity security;
  if (!tls_dir_.empty()) {
    security.tls_cert = tls_dir_ + "/operator.crt";
    security.tls_key = tls_dir_ + "/operator.key";
    security.tls_ca = tls_dir_ + "/ca.crt";
  }
  control_ = v1::ControlService::NewStub(
      grpc::CreateChannel(address_, rpc::MakeChannelCredentials(security)));
  return std::nullopt;
}

void JobLauncher::SpawnWorker(int i) {
  const int node = o_.workers_per_node > 0 ? i / o_.workers_per_node : 0;
  const int local = o_.workers_per_node > 0 ? i % o_.workers_per_node : i;
  std::vector<std::string> argv = {
      o_.bin_dir + "/retort-worker",         "--coordinator=" + address_,
      "--node=local" + std::to_string(node), "--local-rank=" + std::to_string(local),
      "--log-level=" + o_.log_level,         "--output-dir=" + layout_.output_dir};
  if (!o_.train) argv.push_back("--no-train");
  for (const auto& f : TlsFlags("worker")) argv.push_back(f);
  if (o_.threads > 0) argv.push_back("--threads=" + std::to_string(o_.threads));
  if (o_.gpus_per_node > 0) argv.push_back("--device=cuda:" + std::to_string(local));
  argv.insert(argv.end(), o_.worker_args.begin(), o_.worker_args.end());
  Slot& s = slots_[static_cast<size_t>(i)];
  s.process = group_.Spawn("worker " + std::to_string(i), argv);
  s.exited = false;
  s.restart_at.reset();
  std::printf("retort-run: worker %d started (pid %d)\n", i,
              static_cast<int>(group_.pid(s.process)));
}

}  // namespace retort::tools

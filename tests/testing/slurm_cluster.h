// SlurmCluster: a real Slurm cluster (Debian's slurm-wlm 22.05 and munge) on test hosts
// (testing/test_hosts.h): slurmctld on host 0, one slurmd on every other host, each with its
// own NodeName (the host's name), address (NodeAddr), spool directory and log. The plugins
// need no cgroup hierarchy of their own (proctrack/linuxproc, task/none, no accounting);
// every node has `gpus_per_node` GPUs as a GRES backed by character devices under the
// cluster's directory (copies of /dev/null), so `--gpus-per-node` and `--gpus-per-task`
// schedule and Slurm sets CUDA_VISIBLE_DEVICES as on a GPU node. One munged (own key and
// socket) runs in the test's namespace and serves every host (a Unix socket on the shared
// file system). Each host's /etc/hosts (a bind mount in its mount namespace) names every
// host, so node names resolve everywhere as on a cluster.
//
// Start() waits (bounded) until every node is idle; the destructor stops the daemons (the
// hosts' teardown would kill them anyway). Client commands (sbatch, scontrol, scancel,
// squeue) run in the test's namespace through Client(), with SLURM_CONF pointing at this
// cluster; a batch job inherits SLURM_CONF (sbatch --export=ALL), so the srun inside it
// finds the cluster too.
//
// Needs root, the test hosts, and slurmctld, slurmd, sbatch and munged (scripts/setup
// installs them); Available() says what is missing. Not thread-safe: one test thread drives it.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "testing/subprocess.h"
#include "testing/test_hosts.h"

namespace retort::testing {

struct SlurmClusterOptions {
  int cpus_per_node = 4;  // declared CPUs (SlurmdParameters=config_overrides: not the hardware's)
  int gpus_per_node = 2;  // GRES gpu count per node
  // A node silent this long is DOWN (a job with --no-kill keeps its other nodes).
  int slurmd_timeout_s = 10;
  // Seconds between SIGTERM and SIGKILL when a job or step is ended (scancel, requeue, limits).
  int kill_wait_s = 10;
  // Lifetime of step credentials, and the wait of a requeued job before it may start again.
  int cred_expire_s = 10;
};

class SlurmCluster {
 public:
  // Whether the Slurm and munge programs are installed; *why names the missing ones.
  static bool Available(std::string* why);
  // Writes the configuration under `dir`, starts munged, slurmctld on host 0 and slurmd on
  // hosts 1..n-1, and waits up to `timeout` for every node to be idle. Null with *why (and
  // the daemons' log tails) when a step fails. `hosts` must outlive the cluster.
  static std::unique_ptr<SlurmCluster> Start(TestHosts* hosts, const std::string& dir,
                                             const SlurmClusterOptions& options,
                                             std::chrono::milliseconds timeout, std::string* why);
  ~SlurmCluster();
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  const std::string& conf_path() const { return conf_; }
  // Environment a client or batch job needs ("SLURM_CONF=...").
  std::string conf_env() const { return "SLURM_CONF=" + conf_; }
  int nodes() const { return hosts_->size() - 1; }

  // Runs a Slurm client (argv[0] a program name: sbatch, scontrol, ...) in the test's
  // namespace with `env` ("NAME=VALUE" entries) added; stdout and stderr land in *out.
  // Returns the exit status, -1 on timeout.
  int Client(const std::vector<std::string>& argv, std::string* out,
             const std::vector<std::string>& env = {},
             std::chrono::milliseconds timeout = std::chrono::milliseconds(20000)) const;
  // sbatch --parsable ARGS...; the job id, or "" with *why.
  std::string Submit(const std::vector<std::string>& args, const std::vector<std::string>& env,
                     std::string* why) const;
  // A field of `scontrol -o show job ID` (e.g. "JobState", "Restarts", "NodeList"); "" when
  // the job or the field is unknown.
  std::string JobField(const std::string& job, const std::string& field) const;
  // Waits up to `timeout` until the job's state satisfies `done`; the last state seen lands
  // in *state.
  bool WaitForJobState(const std::string& job, const std::function<bool(const std::string&)>& done,
                       std::chrono::milliseconds timeout, std::string* state) const;
  // The last lines of slurmctld's and every slurmd's log (for failure messages).
  std::string Logs() const;

 private:
  SlurmCluster() = default;
  bool WriteConfig(const SlurmClusterOptions& options, std::string* why);
  bool StartDaemons(std::chrono::milliseconds timeout, std::string* why);

  TestHosts* hosts_ = nullptr;
  std::string dir_, conf_, munge_socket_;
  std::unique_ptr<Subprocess> munged_;
  std::unique_ptr<Subprocess> slurmctld_;
  std::vector<std::unique_ptr<Subprocess>> slurmd_;  // index h-1 for host h
  mutable int clients_ = 0;                          // names the client commands' logs
};

}  // namespace retort::testing

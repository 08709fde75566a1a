// Harness for elasticity and fault scenarios: one retort-coordinator and any number of training
// retort-worker processes of a small Fashion-MNIST distillation job on 127.0.0.1 (or on test
// hosts, testing/test_hosts.h: ClusterOptions::hosts), steered with
// retortctl and observed through `retortctl status --json` and the job's metrics.jsonl (one line
// per completed step, appended by whichever worker is rank 0).
//
// Every wait is bounded by the caller's timeout. The destructor SIGKILLs every process still
// running. Not thread-safe: one test thread drives one cluster.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "testing/subprocess.h"
#include "testing/test_hosts.h"

namespace retort::elastic_testing {

// The job every scenario runs. Only the trajectory fields (TrajectoryYaml) decide the loss curve;
// elastic bounds and checkpoints do not.
struct JobOptions {
  // Long enough that the slowest event sequence (coordinator restart, then a checkpoint) ends
  // well before the last step on an idle machine (~0.08 s per step).
  int steps = 120;
  int global_batch = 48;
  int min_workers = 1;
  int max_workers = 8;
  int checkpoint_every_steps = 0;  // 0: no periodic checkpoints
  int checkpoint_keep = 3;
  int checkpoint_max_consecutive_failures = -1;  // -1: left out of the spec (the default)
  // A TorchScript student instead of the built-in fm-student-p7 (e.g. a CNN with BatchNorm).
  std::string student_torchscript;
  // More trajectory lines, e.g. a `mixing:` mapping (a `dataset:` replaces the default one).
  std::string trajectory_extra;
  // More entries of the scenario's `elastic:` mapping, e.g. "straggler: {rebalance: true}" (not
  // part of the trajectory: the reference run is without them).
  std::string elastic_extra;
};

// Model, data, batch, steps, optimizer, distillation: what the loss curve depends on.
std::string TrajectoryYaml(const JobOptions& job);
// The full job spec of a scenario (trajectory + elastic bounds + checkpoints + output_dir).
std::string ScenarioJobYaml(const JobOptions& job, const std::string& output_dir);

// Where Fashion-MNIST is expected (the job spec's default dataset path).
constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
bool FashionMnistAvailable();

struct MetricLine {
  int64_t step = 0;
  int64_t time_unix_ms = 0;
  int64_t epoch = 0;
  uint64_t generation = 0;
  int world_size = 0;
  double loss = 0;
};

struct MetricsFile {
  std::vector<MetricLine> lines;  // in file order
  // Complete lines (ending in '\n') that are not a metrics object: corruption.
  std::vector<std::string> malformed;
};

// Reads a metrics.jsonl that may be being appended to: an unterminated last line is ignored.
MetricsFile ReadMetrics(const std::string& path);

// Where metrics.jsonl stood when a test triggered an event; the checks afterwards look at what
// came after it (ExpectNoLostSteps in scenario_test.h).
struct MetricsMark {
  size_t lines = 0;  // lines written before the event
  int64_t step = 0;  // the highest step completed before it (0 when none)
};

// The build whose binaries compute reference runs: RETORT_REFERENCE_BUILD_DIR when it names a
// build with tools/retort-run, else this test's own build. The sanitizer suites point it at the
// plain build (tests/tools/CMakeLists.txt): LibTorch does the arithmetic in both, so their
// losses are the same numbers (checked bit for bit on both sanitizer builds), and an
// uninstrumented reference run costs a fraction of an instrumented one.
std::string ReferenceBuildDir();

// Losses (index i = step i + 1) of an uninterrupted run of the same trajectory by two workers
// through ReferenceBuildDir()'s tools/retort-run. Cached under that build directory, keyed by
// the trajectory, the Fashion-MNIST files' sizes and the binaries' size and modification time,
// so the scenarios of one build (and the sanitizer suites beside it) share one reference run.
// With RETORT_REFERENCE_LOSSES_DIR set, a file there keyed by the trajectory and the data alone
// is used when present and written when not: scripts/gpu-check --prepare makes it on the CPU
// machine so that a GPU machine's test need not run the CPU reference itself. Safe against
// concurrent test processes (flock). On failure returns empty and sets *error.
std::vector<double> ReferenceLosses(const JobOptions& job, std::string* error);

struct MemberView {
  std::string id;
  int rank = -1;
  std::string node;
  int local_rank = -1;
  int64_t step = 0;
};

struct StatusView {
  std::string state;
  uint64_t generation = 0;
  int64_t step = 0;
  int min_workers = 0;
  int max_workers = 0;
  uint64_t last_checkpoint_id = 0;
  int64_t last_checkpoint_step = 0;
  std::vector<MemberView> members;
  std::string raw;

  bool AllRanked() const;
  const MemberView* ByRank(int rank) const;
  const MemberView* ById(const std::string& id) const;
};

// Parses the output of `retortctl status --json` (text before the first '{' is ignored).
std::optional<StatusView> ParseStatusJson(const std::string& out);

// What the scenarios wait for in the status (ElasticCluster::WaitForStatus).
using StatusPredicate = std::function<bool(const StatusView&)>;
// A generation newer than `after` in which `members` members all hold ranks.
StatusPredicate FormedAfter(size_t members, uint64_t after);
// The same, and member `gone` is not among them (it left, or was evicted).
StatusPredicate FormedAfterWithout(size_t members, uint64_t after, const std::string& gone);

struct ClusterOptions {
  int64_t eviction_timeout_ms = 2000;
  int64_t heartbeat_interval_ms = 200;
  int64_t settle_ms = 300;
  // How long a restarted coordinator waits for the previous generation's members to re-join
  // before forming a generation without them (--rejoin-grace-ms; 0: the coordinator's default).
  int64_t rejoin_grace_ms = 0;
  // Deadline of every collective: how long survivors wait on a dead peer at the latest.
  int64_t comm_timeout_ms = 5000;
  int64_t rpc_timeout_ms = 1000;
  // Workers give up joining after join_timeout_ms, and give up a lost coordinator (unreachable,
  // or every re-join failing) after rejoin_timeout_ms.
  int64_t join_timeout_ms = 60000;
  int64_t rejoin_timeout_ms = 60000;
  // Fixed coordinator port (0: the coordinator picks one and writes it to a port file).
  int port = 0;
  // Run the processes on these test hosts (not owned; must outlive the cluster) instead of
  // 127.0.0.1: the coordinator listens on coordinator_host's address, StartWorkerOnHost()
  // places workers. retortctl runs in the test's namespace (it reaches every host).
  const testing::TestHosts* hosts = nullptr;
  int coordinator_host = 0;
  // Extra flags of every worker (e.g. --emulate-device-data-plane).
  std::vector<std::string> worker_args;
};

class ElasticCluster {
 public:
  ElasticCluster(JobOptions job, ClusterOptions options);
  ~ElasticCluster();
  ElasticCluster(const ElasticCluster&) = delete;
  ElasticCluster& operator=(const ElasticCluster&) = delete;

  // Starts (or restarts, same state dir and port) the coordinator and waits until it answers
  // `retortctl status`. Returns false (with *error) when it does not within `timeout`.
  bool StartCoordinator(std::chrono::milliseconds timeout, std::string* error);
  // Starts a worker on node "node0" with the given local rank (workers are identified by it).
  // Returns the index of the new process in workers().
  int StartWorker(int local_rank);
  // Starts a worker on node `node` (a name: workers of one node form an intra-node group) with
  // the given local rank on 127.0.0.1. Returns the index of the new process in workers().
  int StartWorkerOnNode(const std::string& node, int local_rank);
  // Starts a worker on test host `host` (options.hosts): node = the host's name, data address =
  // the host's address. Returns the index of the new process in workers().
  int StartWorkerOnHost(int host, int local_rank);
  // The test host worker `index` runs on (-1: 127.0.0.1).
  int host_of(int index) const { return hosts_of_.at(index); }
  testing::Subprocess& coordinator() { return *coordinator_; }
  testing::Subprocess& worker(int index) { return *workers_.at(index); }
  int worker_count() const { return static_cast<int>(workers_.size()); }
  int local_rank_of(int index) const { return local_ranks_.at(index); }
  // The newest worker process started with `local_rank` (-1 when none).
  int WorkerIndexForLocalRank(int local_rank) const;

  // retortctl --coordinator=ADDR ARGS...; returns its exit code, output in *out.
  int Ctl(const std::vector<std::string>& args, std::string* out,
          std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));
  std::optional<StatusView> Status();
  // Polls Status() every 200 ms until `pred` holds; false once `timeout` passes or the
  // coordinator process has exited.
  bool WaitForStatus(const StatusPredicate& pred, std::chrono::milliseconds timeout,
                     StatusView* last = nullptr);
  // Every (checkpoint id -> step) a Status() call has reported as last committed.
  const std::set<std::pair<uint64_t, int64_t>>& committed_seen() const { return committed_seen_; }

  MetricsFile Metrics() const;
  int64_t LastStep() const;  // highest step in metrics.jsonl (0 when none)
  MetricsMark Mark() const;  // where metrics.jsonl stands now
  // Waits until metrics.jsonl reaches `step`; false when `timeout` passes or every worker exited.
  bool WaitForStep(int64_t step, std::chrono::milliseconds timeout);
  // Waits until the newest metrics line has reached `step` with `world` ranks (so the event a
  // test triggers next happens in a generation of that size); false as WaitForStep.
  bool WaitForWorld(int world, int64_t step, std::chrono::milliseconds timeout);
  // Waits for the coordinator and every worker process to exit. True when all exited. Gives up
  // early when metrics.jsonl gains no line for `stall` while processes still run (a hung job);
  // *why says which limit was hit.
  bool WaitAllExited(std::chrono::milliseconds timeout, std::chrono::milliseconds stall,
                     std::string* why);

  const std::string& dir() const { return dir_; }
  std::string metrics_path() const { return dir_ + "/out/metrics.jsonl"; }
  std::string state_dir() const { return dir_ + "/state"; }
  std::string checkpoint_dir() const { return dir_ + "/state/checkpoints"; }
  const std::string& address() const { return address_; }
  // The last `max_chars` of every process's log, for failure messages.
  std::string Logs(size_t max_chars = 6000) const;

 private:
  // A worker on test host `host` (-1: 127.0.0.1) with --node=`node`.
  int StartWorkerAt(int host, const std::string& node, int local_rank);

  const JobOptions job_;
  const ClusterOptions options_;
  std::string dir_;
  std::string address_;
  int port_ = 0;
  int coordinator_starts_ = 0;
  int ctl_calls_ = 0;
  std::unique_ptr<testing::Subprocess> coordinator_;
  std::vector<std::unique_ptr<testing::Subprocess>> old_coordinators_;
  std::vector<std::unique_ptr<testing::Subprocess>> workers_;
  std::vector<int> local_ranks_;
  std::vector<int> hosts_of_;
  std::set<std::pair<uint64_t, int64_t>> committed_seen_;
};

// A free TCP port on 127.0.0.1 at the time of the call (bound to port 0, then released).
int PickFreePort();

// Committed checkpoints found on disk: id -> (step, manifest JSON text). Only directories with a
// MANIFEST.json count: a checkpoint without a committed manifest does not exist.
struct CommittedCheckpoint {
  uint64_t id = 0;
  int64_t step = 0;
  std::string dir;
  std::vector<std::string> files;  // relative to dir, as listed in the manifest
};
std::vector<CommittedCheckpoint> ListCommittedCheckpoints(const std::string& checkpoint_dir);

}  // namespace retort::elastic_testing

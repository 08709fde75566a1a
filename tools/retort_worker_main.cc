// retort-worker: one training process of a retort job. Joins the coordinator, follows its
// generations and leaves cleanly on SIGTERM/SIGINT or when the coordinator asks it to.
// Exit status: 0 left the job (completed, also before this worker could join; drained; stopped;
// SIGTERM/SIGINT at any moment, also before joining); 1 an error (the message says which);
// 2 a usage error.
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <tuple>
#include <vector>

#include "collectives/net_interface.h"
#include "common/args.h"
#include "common/logging.h"
#include "tools/signals.h"
#include "worker/coordinator_client.h"
#include "worker/pause_points.h"
#include "worker/worker_agent.h"
#include "worker/worker_metrics.h"
#if RETORT_WORKER_WITH_TRAINER
#include "collectives/ucx/cma_chooser.h"
#include "trainer/cpu_runtime.h"
#include "trainer/device.h"
#include "worker/training_session.h"
#endif

using namespace retort;

namespace {

std::string HostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

// Parses "cpu", "cuda:0,cuda:1".
StatusOr<std::vector<v1::Device>> ParseDevices(const std::string& text) {
  std::vector<v1::Device> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    v1::Device d;
    auto colon = item.find(':');
    d.set_kind(item.substr(0, colon));
    if (d.kind() != "cpu" && d.kind() != "cuda")
      return InvalidArgumentError("--devices: '" + item + "' is not cpu or cuda:N");
    if (colon != std::string::npos) {
      RETORT_ASSIGN_OR_RETURN(int64_t idx, ParseInt64(item.substr(colon + 1), "--devices"));
      d.set_index(static_cast<int32_t>(idx));
    }
    d.set_name(item);
    out.push_back(d);
  }
  if (out.empty()) return InvalidArgumentError("--devices: empty list");
  return out;
}

// Logs generations; the trainer hooks in here.
class LoggingHandler : public worker::GenerationHandler {
 public:
  void OnGeneration(const v1::Generation& g, const std::string& member_id, int rank) override {
    if (rank < 0) return;
    const auto& r = g.plan().ranges_size() > rank ? g.plan().ranges(rank) : v1::ShardRange();
    LOG_INFO("worker") << member_id << " is rank " << rank << " of " << g.members_size()
                       << " in generation " << g.number() << "; shard [" << r.offset() << ", "
                       << r.offset() + r.count() << ") of " << g.plan().total_elements();
  }
};

}  // namespace

int main(int argc, char** argv) {
#if RETORT_WORKER_WITH_TRAINER
  // Before any thread allocates (see the function's contract).
  trainer::KeepTensorMemoryInProcess();
#endif
  tools::BlockTerminationSignals();
  std::string coordinator = "127.0.0.1:7070", node = HostName(), data_address = "127.0.0.1",
              devices = "cpu";
  std::string health_listen, device = "auto";
  int local_rank = 0, threads = 0;
  int64_t parameter_count = 0, rpc_timeout_ms = 5000, join_timeout_ms = 0,
          rejoin_timeout_ms = worker::WorkerOptions{}.rejoin_timeout_ms, comm_timeout_ms = 60000;
  bool train = RETORT_WORKER_WITH_TRAINER;
  rpc::ClientSecurity security;
  std::string output_dir = "retort-out";
  std::vector<std::string> pause_at;
  std::string metrics_listen, trace_steps;
  ArgParser args(
      "retort-worker --coordinator=HOST:PORT [flags]",
      "Runs one worker of a retort job: joins the coordinator, follows membership generations,\n"
      "trains its share of every global batch, and leaves at a step boundary on SIGTERM.");
  args.AddString("coordinator", &coordinator, "coordinator address host:port");
  args.AddString("tls-ca", &security.tls_ca,
                 "PEM CA that signed the coordinator's certificate: connect over TLS");
  args.AddString("tls-cert", &security.tls_cert,
                 "PEM client certificate (subject OU=worker) for mutual TLS; re-read when it "
                 "changes");
  args.AddString("tls-key", &security.tls_key, "PEM private key of --tls-cert");
  args.AddInt("tls-refresh-s", &security.refresh_s,
              "how often the certificate, key and CA files are checked for changes");
  args.AddString("token-file", &security.token_file,
                 "file holding the worker role's bearer token, sent with every call");
  bool emulate_device_data_plane = false;
  std::string cma_policy = "adaptive";
  args.AddString("node", &node, "node name; workers on one node get consecutive ranks");
  args.AddInt("local-rank", &local_rank, "index of this worker on its node");
  args.AddString("data-address", &data_address,
                 "IP address peers reach this worker's data plane at; the data plane listens on "
                 "the interface that holds it only");
  args.AddString("devices", &devices, "devices this worker uses: cpu or cuda:N[,cuda:M]");
  args.AddString("device", &device,
                 "training device: auto (cuda:<local-rank> when a GPU is visible, else cpu), "
                 "cpu, cuda (cuda:<local-rank>) or cuda:N");
  args.AddInt("threads", &threads, "compute threads (0 = the job spec's threads_per_worker)");
  args.AddString("cma-policy", &cma_policy,
                 "large data-plane messages to workers on this host: adaptive (measure single-copy "
                 "reads against the shared-memory FIFO per operation), always (single-copy) or "
                 "never (FIFO)");
  args.AddBool("emulate-device-data-plane", &emulate_device_data_plane,
               "testing: on --device cpu, build the data plane GPU workers use (NCCL's place "
               "taken by UCX, host memory standing in for device memory)");
  args.AddString("health-listen", &health_listen,
                 "serve grpc.health.v1 on host:port (empty = off)");
  args.AddInt("parameter-count", &parameter_count,
              "flat parameter buffer size to announce (0 = from the model)");
  args.AddInt("rpc-timeout-ms", &rpc_timeout_ms, "deadline of every coordinator RPC");
  args.AddInt("join-timeout-ms", &join_timeout_ms,
              "give up when joining takes longer (0 = keep trying)");
  args.AddInt("rejoin-timeout-ms", &rejoin_timeout_ms,
              "give up when the coordinator stays unreachable, or re-joining after losing "
              "membership (evicted, coordinator restarted) fails, for longer (0 = keep trying)");
  args.AddBool("train", &train,
               "train the job (--no-train: control plane only, for tests and load generators)");
  args.AddString("output-dir", &output_dir,
                 "where outputs go when the job spec names no output_dir");
  args.AddInt("comm-timeout-ms", &comm_timeout_ms,
              "deadline of every collective and of communicator bootstrap");
  args.AddStringList("pause-at", &pause_at,
                     "tests only: pause once at POINT for up to MS ms (POINT:MS; POINT is "
                     "checkpoint-write or generation-switch), logging 'PAUSE POINT' first");
  args.AddString("metrics-listen", &metrics_listen,
                 "serve Prometheus metrics at http://HOST:PORT/metrics (empty = off)");
  args.AddString("trace-steps", &trace_steps,
                 "record a step trace for steps A:B into OUTPUT_DIR/traces/ (empty = only when "
                 "`retortctl trace` asks)");
  args.AddLogLevel();
  if (auto code = args.ParseOrExitCode(argc, argv, "retort-worker")) return *code;
  auto devs = ParseDevices(devices);
  if (!devs.ok()) {
    std::fprintf(stderr, "retort-worker: %s\n", devs.status().message().c_str());
    return 2;
  }
  if (local_rank < 0 || threads < 0 || parameter_count < 0 || rpc_timeout_ms <= 0) {
    std::fprintf(stderr,
                 "retort-worker: --local-rank, --threads, --parameter-count must be >= 0 and "
                 "--rpc-timeout-ms > 0\n");
    return 2;
  }

  auto armed = worker::PausePoints::Parse(pause_at);
  if (!armed.ok()) {
    std::fprintf(stderr, "retort-worker: %s\n", armed.status().message().c_str());
    return 2;
  }
  worker::PausePoints pause_points(std::move(*armed));
  int64_t trace_first = 0, trace_last = 0;
  if (!trace_steps.empty()) {
    auto window = ParseStepWindow("--trace-steps", trace_steps);
    if (!window.ok()) {
      std::fprintf(stderr, "retort-worker: %s\n", window.status().message().c_str());
      return 2;
    }
    std::tie(trace_first, trace_last) = *window;
  }
  std::unique_ptr<worker::WorkerMetricsEndpoint> metrics;
  if (!metrics_listen.empty()) {
    auto m = worker::WorkerMetricsEndpoint::Start(metrics_listen);
    if (!m.ok()) {
      std::fprintf(stderr, "retort-worker: %s\n", m.status().message().c_str());
      return m.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
    }
    metrics = std::move(*m);
    LOG_INFO("worker") << "metrics on port " << metrics->port() << " (/metrics)";
  }

  if (Status valid = rpc::ValidateClientSecurity(security); !valid.ok()) {
    std::fprintf(stderr, "retort-worker: %s\n", valid.message().c_str());
    return 2;
  }
  std::unique_ptr<grpc::Server> health;
  if (!health_listen.empty()) {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort(health_listen, grpc::InsecureServerCredentials(), &port);
    health = b.BuildAndStart();
    if (!health || port == 0) {
      std::fprintf(stderr, "retort-worker: cannot serve health checks on %s\n",
                   health_listen.c_str());
      return 1;
    }
  }

  worker::WorkerOptions opts;
  opts.identity.set_node(node);
  opts.identity.set_local_rank(local_rank);
  opts.identity.set_data_address(data_address);
  for (const auto& d : *devs) *opts.identity.add_devices() = d;
  opts.parameter_count = parameter_count;
  opts.join_timeout_ms = join_timeout_ms;
  opts.rejoin_timeout_ms = rejoin_timeout_ms;
  worker::CoordinatorClient client(coordinator, rpc_timeout_ms, security);
  LoggingHandler logging_handler;
  worker::GenerationHandler* handler = &logging_handler;
  // The data plane binds the interface of --data-address: checked in every build (a worker
  // without a trainer still announces the address to its peers).
  auto data_interface = collectives::InterfaceForAddress(data_address);
  if (!data_interface.ok()) {
    std::fprintf(stderr, "retort-worker: --data-address: %s\n",
                 data_interface.status().message().c_str());
    return 2;
  }
#if RETORT_WORKER_WITH_TRAINER
  std::unique_ptr<worker::TrainingSession> session;
  if (train) {
    auto resolved = trainer::ResolveDevice(device, local_rank, trainer::VisibleCudaDevices());
    if (!resolved.ok()) {
      std::fprintf(stderr, "retort-worker: --device: %s\n", resolved.status().message().c_str());
      return 2;
    }
    auto policy = collectives::ucx::ParseCmaPolicy(cma_policy);
    if (!policy.ok()) {
      std::fprintf(stderr, "retort-worker: --cma-policy: %s\n", policy.status().message().c_str());
      return 2;
    }
    worker::TrainingOptions topts;
    topts.device = *resolved;
    topts.cma_policy = *policy;
    topts.threads = threads;
    topts.comm_timeout_ms = comm_timeout_ms;
    topts.default_output_dir = output_dir;
    // A user's UCX_NET_DEVICES (e.g. the RDMA devices of an HCA: mlx5_0:1) wins over the
    // interface of --data-address: UCX reads it from the environment itself.
    const char* user_devices = std::getenv("UCX_NET_DEVICES");
    if (user_devices != nullptr && *user_devices != '\0') {
      LOG_INFO("worker") << "data plane devices from UCX_NET_DEVICES=" << user_devices
                         << " (not the interface of --data-address, " << *data_interface << ")";
    } else {
      topts.data_plane_devices = *data_interface;
    }
    topts.emulate_device_data_plane = emulate_device_data_plane;
    topts.pause_points = &pause_points;
    topts.node = node;
    topts.local_rank = local_rank;
    topts.step_observer = metrics ? metrics->observer() : nullptr;
    topts.trace_first_step = trace_first;
    topts.trace_last_step = trace_last;
    session = std::make_unique<worker::TrainingSession>(topts, &client);
    handler = session.get();
  }
#else
  if (train) {
    std::fprintf(
        stderr,
        "retort-worker: this build has no trainer (LibTorch or UCX missing); use --no-train\n");
    return 2;
  }
#endif
  worker::WorkerAgent agent(opts, &client, handler);
#if RETORT_WORKER_WITH_TRAINER
  if (session) session->AttachAgent(&agent);
#endif
  std::atomic<bool> signalled{false};
  tools::TerminationSignalWatcher signal_watcher([&agent, &signalled](int sig) {
    LOG_INFO("worker") << "signal " << sig << ": leaving at the next step boundary";
    signalled = true;
    agent.RequestStop(sig == SIGTERM ? "SIGTERM" : "SIGINT");
  });
  Status s = agent.Run();
#if RETORT_WORKER_WITH_TRAINER
  if (s.ok() && session && !session->result().ok()) s = session->result();
  session.reset();  // joins the training thread
#endif
  if (health) health->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  // Stopped by a signal before it joined: a requested stop like any other, not an error.
  if (!s.ok() && s.code() == StatusCode::kCancelled && signalled.load()) {
    LOG_INFO("worker") << "stopped before joining the job";
    return 0;
  }
  // The job completed before this worker could join (or re-join): nothing to do, like a worker
  // that finished it.
  if (!s.ok() && agent.ended_state() == v1::JOB_STATE_COMPLETED) {
    LOG_INFO("worker") << "the job is already completed; nothing to do";
    return 0;
  }
  if (!s.ok()) {
    std::fprintf(stderr, "retort-worker: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

// retort-worker: one training process of a retort job. Joins the coordinator, follows its
// generations and leaves cleanly on SIGTERM/SIGINT or when the coordinator asks it to.
// Exit status: 0 left the job (completed or stopped, also before this worker could join;
// drained; SIGTERM/SIGINT at any moment, also before joining, unless --signal-exit-code says
// otherwise); 1 an error (the message says which; also a job that failed); 2 a usage error.
// --print-device[-table] prints what the device flags resolve to and exits: 0, or 2 when they do
// not resolve (worker/worker_device.h).
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <tuple>
#include <vector>

#include "collectives/net_interface.h"
#include "common/args.h"
#include "common/logging.h"
#include "rpc/health_server.h"
#include "rpc/job_state.h"
#include "tools/exit_status.h"
#include "tools/signals.h"
#include "worker/coordinator_client.h"
#include "worker/pause_points.h"
#include "worker/worker_agent.h"
#include "worker/worker_device.h"
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

constexpr const char* kProgram = "retort-worker";

// Everything the flags say.
struct Config {
  std::string coordinator = "127.0.0.1:7070", node = HostName(), data_address = "127.0.0.1",
              devices;
  std::string health_listen, device = "auto";
  int local_rank = 0, threads = 0;
  int64_t parameter_count = 0, rpc_timeout_ms = 5000, join_timeout_ms = 0,
          rejoin_timeout_ms = worker::WorkerOptions{}.rejoin_timeout_ms, comm_timeout_ms = 60000;
  bool train = RETORT_WORKER_WITH_TRAINER;
  rpc::ClientSecurity security;
  std::string output_dir = "retort-out";
  std::vector<std::string> pause_at;
  std::string metrics_listen, trace_steps;
  bool emulate_device_data_plane = false;
  std::string cma_policy = "adaptive";
  bool print_device = false, json = false;
  int print_device_table = 0, visible_devices = -1;
  int signal_exit_code = tools::kExitSignalledDefault;
};

void RegisterFlags(ArgParser& args, Config* c) {
  args.AddString("coordinator", &c->coordinator, "coordinator address host:port");
  rpc::AddClientSecurityFlags(args, &c->security, "worker");
  args.AddString("node", &c->node, "node name; workers on one node get consecutive ranks");
  args.AddInt("local-rank", &c->local_rank, "index of this worker on its node");
  args.AddString("data-address", &c->data_address,
                 "IP address peers reach this worker's data plane at; the data plane listens on "
                 "the interface that holds it only");
  args.AddString("devices", &c->devices,
                 "devices this worker reports to the coordinator (cpu or cuda:N): empty = the "
                 "device --device resolves to, which a training worker's --devices must name "
                 "(--no-train: cpu unless given)");
  args.AddString("device", &c->device,
                 "training device: auto (cpu when no GPU is visible, else the worker's GPU), cpu, "
                 "cuda (the worker's GPU) or cuda:N. The worker's GPU: cuda:0 when the process "
                 "sees one GPU (one per pod or task), else cuda:<local-rank>, refused when the "
                 "local rank is not below the visible count");
  args.AddBool("print-device", &c->print_device,
               "print the device --device, --devices and --local-rank resolve to and exit (0; 2 "
               "with the error when they do not resolve)");
  args.AddInt("print-device-table", &c->print_device_table,
              "print the device of local ranks 0..N-1 and exit (0 when every rank resolves, else "
              "2): what N workers of one node or N pods would train on");
  args.AddInt("visible-devices", &c->visible_devices,
              "with --print-device[-table]: resolve as if this many CUDA devices were visible "
              "(-1: count them)");
  args.AddBool("json", &c->json, "with --print-device[-table]: print one JSON object");
  tools::AddSignalExitCodeFlag(args, &c->signal_exit_code);
  args.AddInt("threads", &c->threads, "compute threads (0 = the job spec's threads_per_worker)");
  args.AddString("cma-policy", &c->cma_policy,
                 "large data-plane messages to workers on this host: adaptive (measure single-copy "
                 "reads against the shared-memory FIFO per operation), always (single-copy) or "
                 "never (FIFO)");
  args.AddBool("emulate-device-data-plane", &c->emulate_device_data_plane,
               "testing: on --device cpu, build the data plane GPU workers use (NCCL's place "
               "taken by UCX, host memory standing in for device memory)");
  args.AddString("health-listen", &c->health_listen,
                 "serve grpc.health.v1 on host:port (empty = off)");
  args.AddInt("parameter-count", &c->parameter_count,
              "flat parameter buffer size to announce (0 = from the model)");
  args.AddInt("rpc-timeout-ms", &c->rpc_timeout_ms, "deadline of every coordinator RPC");
  args.AddInt("join-timeout-ms", &c->join_timeout_ms,
              "give up when joining takes longer (0 = keep trying)");
  args.AddInt("rejoin-timeout-ms", &c->rejoin_timeout_ms,
              "give up when the coordinator stays unreachable, or re-joining after losing "
              "membership (evicted, coordinator restarted) fails, for longer (0 = keep trying)");
  args.AddBool("train", &c->train,
               "train the job (--no-train: control plane only, for tests and load generators)");
  args.AddString("output-dir", &c->output_dir,
                 "where outputs go when the job spec names no output_dir");
  args.AddInt("comm-timeout-ms", &c->comm_timeout_ms,
              "deadline of every collective and of communicator bootstrap");
  args.AddStringList("pause-at", &c->pause_at,
                     "tests only: pause once at POINT for up to MS ms (POINT:MS; POINT is "
                     "checkpoint-write or generation-switch), logging 'PAUSE POINT' first");
  metrics::AddMetricsListenFlag(args, &c->metrics_listen);
  args.AddString("trace-steps", &c->trace_steps,
                 "record a step trace for steps A:B into OUTPUT_DIR/traces/ (empty = only when "
                 "`retortctl trace` asks)");
  args.AddLogLevel();
}

// What the flags hold beyond their values, checked before anything starts: usage errors.
struct Checked {
  std::string train_device;  // the device a training worker trains on, resolved once
  std::vector<v1::Device> devices;
  std::map<std::string, int64_t> pause_at;
  int64_t trace_first = 0, trace_last = 0;
  std::string data_interface;
};

StatusOr<Checked> CheckConfig(const Config& c) {
  Checked out;
  if (c.local_rank < 0 || c.threads < 0 || c.parameter_count < 0 || c.rpc_timeout_ms <= 0)
    return InvalidArgumentError(
        "--local-rank, --threads, --parameter-count must be >= 0 and --rpc-timeout-ms > 0");
  RETORT_RETURN_IF_ERROR(tools::CheckSignalExitCode(c.signal_exit_code));
  // What a training worker reports follows from the device it resolves.
  std::string devices = c.devices;
#if RETORT_WORKER_WITH_TRAINER
  if (c.train) {
    auto resolved = worker::ResolveDevice(c.device, c.local_rank, trainer::VisibleCudaDevices());
    if (!resolved.ok()) return tools::UsageError(resolved.status(), "--device");
    auto reported = worker::ReportedDevices(devices, *resolved);
    if (!reported.ok()) return tools::UsageError(reported.status());
    out.train_device = *resolved;
    devices = *reported;
  }
#endif
  if (devices.empty()) devices = "cpu";
  RETORT_ASSIGN_OR_RETURN(out.devices, ParseDevices(devices));
  auto armed = worker::PausePoints::Parse(c.pause_at);
  if (!armed.ok()) return tools::UsageError(armed.status());
  out.pause_at = std::move(*armed);
  if (!c.trace_steps.empty()) {
    auto window = ParseStepWindow("--trace-steps", c.trace_steps);
    if (!window.ok()) return tools::UsageError(window.status());
    std::tie(out.trace_first, out.trace_last) = *window;
  }
  if (Status valid = rpc::ValidateClientSecurity(c.security); !valid.ok())
    return tools::UsageError(valid);
  // The data plane binds the interface of --data-address: checked in every build (a worker
  // without a trainer still announces the address to its peers).
  auto data_interface = collectives::InterfaceForAddress(c.data_address);
  if (!data_interface.ok()) return tools::UsageError(data_interface.status(), "--data-address");
  out.data_interface = *data_interface;
  return out;
}

// --print-device[-table]: what the device flags resolve to, printed; the exit status.
int PrintDevice(const Config& c) {
  if (c.local_rank < 0 || c.print_device_table < 0 || c.print_device_table > 4096 ||
      c.visible_devices < -1) {
    std::fprintf(stderr,
                 "%s: --local-rank must be >= 0, --print-device-table in [0, 4096] and "
                 "--visible-devices >= -1\n",
                 kProgram);
    return tools::kExitUsage;
  }
  worker::DeviceQuery query;
  query.spec = c.device;
  query.devices_flag = c.devices;
  query.local_rank = c.local_rank;
  query.table_ranks = c.print_device_table;
  query.json = c.json;
#if RETORT_WORKER_WITH_TRAINER
  query.visible_cuda_devices =
      c.visible_devices >= 0 ? c.visible_devices : trainer::VisibleCudaDevices();
#else
  query.visible_cuda_devices = c.visible_devices >= 0 ? c.visible_devices : 0;
#endif
  const worker::DeviceReport report = worker::PrintDevice(query);
  std::fputs(report.out.c_str(), stdout);
  std::fputs(report.err.c_str(), stderr);
  return report.exit_code;
}

// Joins the job and follows it until it leaves; OK when it left as a worker may (the job ended,
// drained, stopped, a signal). *interrupted: a SIGTERM/SIGINT made it leave (a signal that
// arrives as the job completes may count too: a supervisor's retry then finds the job completed
// and exits 0).
Status Run(const Config& c, bool* interrupted) {
  RETORT_ASSIGN_OR_RETURN(Checked checked, CheckConfig(c));
  worker::PausePoints pause_points(std::move(checked.pause_at));
  RETORT_ASSIGN_OR_RETURN(
      std::unique_ptr<worker::WorkerMetricsEndpoint> metrics,
      worker::WorkerMetricsEndpoint::StartIfListening(c.metrics_listen, "worker"));
  std::unique_ptr<rpc::HealthServer> health;
  if (!c.health_listen.empty()) {
    RETORT_ASSIGN_OR_RETURN(health, rpc::HealthServer::Start(c.health_listen));
  }

  worker::WorkerOptions opts;
  opts.identity.set_node(c.node);
  opts.identity.set_local_rank(c.local_rank);
  opts.identity.set_data_address(c.data_address);
  for (const auto& d : checked.devices) *opts.identity.add_devices() = d;
  opts.parameter_count = c.parameter_count;
  opts.join_timeout_ms = c.join_timeout_ms;
  opts.rejoin_timeout_ms = c.rejoin_timeout_ms;
  worker::CoordinatorClient client(c.coordinator, c.rpc_timeout_ms, c.security);
  LoggingHandler logging_handler;
  worker::GenerationHandler* handler = &logging_handler;
#if RETORT_WORKER_WITH_TRAINER
  std::unique_ptr<worker::TrainingSession> session;
  if (c.train) {
    auto policy = collectives::ucx::ParseCmaPolicy(c.cma_policy);
    if (!policy.ok()) return tools::UsageError(policy.status(), "--cma-policy");
    worker::TrainingOptions topts;
    topts.device = checked.train_device;
    topts.cma_policy = *policy;
    topts.threads = c.threads;
    topts.comm_timeout_ms = c.comm_timeout_ms;
    topts.default_output_dir = c.output_dir;
    // A user's UCX_NET_DEVICES (e.g. the RDMA devices of an HCA: mlx5_0:1) wins over the
    // interface of --data-address: UCX reads it from the environment itself.
    const char* user_devices = std::getenv("UCX_NET_DEVICES");
    if (user_devices != nullptr && *user_devices != '\0') {
      LOG_INFO("worker") << "data plane devices from UCX_NET_DEVICES=" << user_devices
                         << " (not the interface of --data-address, " << checked.data_interface
                         << ")";
    } else {
      topts.data_plane_devices = checked.data_interface;
    }
    topts.emulate_device_data_plane = c.emulate_device_data_plane;
    topts.pause_points = &pause_points;
    topts.node = c.node;
    topts.local_rank = c.local_rank;
    topts.step_observer = metrics ? metrics->metrics() : nullptr;
    topts.trace_first_step = checked.trace_first;
    topts.trace_last_step = checked.trace_last;
    session = std::make_unique<worker::TrainingSession>(topts, &client);
    handler = session.get();
  }
#else
  if (c.train)
    return InvalidArgumentError(
        "this build has no trainer (LibTorch or UCX missing); use --no-train");
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
  if (health) health->Shutdown(500);
  // Stopped by a signal before it joined: a requested stop like any other, not an error.
  *interrupted = signalled.load() && agent.ended_state() != v1::JOB_STATE_COMPLETED;
  if (!s.ok() && s.code() == StatusCode::kCancelled && signalled.load()) {
    LOG_INFO("worker") << "stopped before joining the job";
    return Status::Ok();
  }
  // The job completed or was stopped before this worker could join (or re-join): nothing to
  // do, like a worker that was there when it ended. (A failed job stays an error.)
  const v1::JobState ended = agent.ended_state();
  if (!s.ok() && (ended == v1::JOB_STATE_COMPLETED || ended == v1::JOB_STATE_STOPPED ||
                  ended == v1::JOB_STATE_STOPPING)) {
    LOG_INFO("worker") << "the job is already " << rpc::JobStateName(ended) << "; nothing to do";
    return Status::Ok();
  }
  return tools::RunError(s);
}

}  // namespace

int main(int argc, char** argv) {
#if RETORT_WORKER_WITH_TRAINER
  // Before any thread allocates (see the function's contract).
  trainer::KeepTensorMemoryInProcess();
#endif
  tools::BlockTerminationSignals();
  Config config;
  ArgParser args(
      "retort-worker --coordinator=HOST:PORT [flags]",
      "Runs one worker of a retort job: joins the coordinator, follows membership generations,\n"
      "trains its share of every global batch, and leaves at a step boundary on SIGTERM.");
  RegisterFlags(args, &config);
  if (auto code = args.ParseOrExitCode(argc, argv, kProgram)) return *code;
  if (config.print_device || config.print_device_table != 0) return PrintDevice(config);
  bool interrupted = false;
  const int code = tools::ExitCode(kProgram, Run(config, &interrupted));
  return code == tools::kExitOk && interrupted ? config.signal_exit_code : code;
}

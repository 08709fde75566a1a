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
#include <sstream>

#include "common/args.h"
#include "common/logging.h"
#include "tools/signals.h"
#include "worker/coordinator_client.h"
#include "worker/worker_agent.h"
#if RETORT_WORKER_WITH_TRAINER
#include "trainer/cpu_runtime.h"
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
  std::string health_listen, log_level = "info";
  int local_rank = 0, threads = 0;
  int64_t parameter_count = 0, rpc_timeout_ms = 5000, join_timeout_ms = 0, comm_timeout_ms = 60000;
  bool train = RETORT_WORKER_WITH_TRAINER;
  std::string output_dir = "retort-out";
  ArgParser args(
      "retort-worker --coordinator=HOST:PORT [flags]",
      "Runs one worker of a retort job: joins the coordinator, follows membership generations,\n"
      "trains its share of every global batch, and leaves at a step boundary on SIGTERM.");
  args.AddString("coordinator", &coordinator, "coordinator address host:port");
  args.AddString("node", &node, "node name; workers on one node get consecutive ranks");
  args.AddInt("local-rank", &local_rank, "index of this worker on its node");
  args.AddString("data-address", &data_address, "address peers reach this worker's data plane at");
  args.AddString("devices", &devices, "devices this worker uses: cpu or cuda:N[,cuda:M]");
  args.AddInt("threads", &threads, "compute threads (0 = the job spec's threads_per_worker)");
  args.AddString("health-listen", &health_listen,
                 "serve grpc.health.v1 on host:port (empty = off)");
  args.AddInt("parameter-count", &parameter_count,
              "flat parameter buffer size to announce (0 = from the model)");
  args.AddInt("rpc-timeout-ms", &rpc_timeout_ms, "deadline of every coordinator RPC");
  args.AddInt("join-timeout-ms", &join_timeout_ms,
              "give up when joining takes longer (0 = keep trying)");
  args.AddBool("train", &train,
               "train the job (--no-train: control plane only, for tests and load generators)");
  args.AddString("output-dir", &output_dir,
                 "where outputs go when the job spec names no output_dir");
  args.AddInt("comm-timeout-ms", &comm_timeout_ms,
              "deadline of every collective and of communicator bootstrap");
  args.AddString("log-level", &log_level, "debug, info, warning or error");
  auto parsed = args.Parse(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "retort-worker: %s\n", parsed.status().message().c_str());
    return 2;
  }
  if (!*parsed) return 0;
  LogLevel level;
  if (!ParseLogLevel(log_level, &level)) {
    std::fprintf(stderr, "retort-worker: --log-level: '%s' is not debug, info, warning or error\n",
                 log_level.c_str());
    return 2;
  }
  SetLogLevel(level);
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
  worker::CoordinatorClient client(coordinator, rpc_timeout_ms);
  LoggingHandler logging_handler;
  worker::GenerationHandler* handler = &logging_handler;
#if RETORT_WORKER_WITH_TRAINER
  std::unique_ptr<worker::TrainingSession> session;
  if (train) {
    worker::TrainingOptions topts;
    topts.threads = threads;
    topts.comm_timeout_ms = comm_timeout_ms;
    topts.default_output_dir = output_dir;
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
  // The job completed before this worker could join (the coordinator refuses members of a
  // completed job with "job is completed; ..."): nothing to do, like a worker that finished it.
  if (!s.ok() && s.code() == StatusCode::kFailedPrecondition &&
      s.message().rfind("job is completed", 0) == 0) {
    LOG_INFO("worker") << "the job is already completed; nothing to do";
    return 0;
  }
  if (!s.ok()) {
    std::fprintf(stderr, "retort-worker: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

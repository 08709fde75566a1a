// Bandwidth benchmark of retort's collectives: forks --ranks processes on this host that
// bootstrap through a FileStore and time each operation over a range of sizes. Rank 0 prints
// one JSON line per (op, size) with algbw and busbw as nccl-tests define them:
//   algbw = S / t; busbw = algbw * 2(n-1)/n (all-reduce), * (n-1)/n (reduce-scatter,
//   all-gather), * 1 (send/recv); S = total array size in bytes (the all-reduce buffer, the
//   reduce-scatter input, the all-gather output, the message).
// t is the mean over ranks of the mean time per iteration.
// With --rank=R it runs that one rank only (no fork), bootstrapping through --store-dir: the way
// bench/multihost runs the ranks on different test hosts.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>
#include <vector>

#include "collectives/ucx/ucx_hierarchical.h"
#include "common/args.h"
#include "common/logging.h"
#include "common/process.h"

namespace retort::collectives {
namespace {

struct BenchOptions {
  int ranks = 2;
  int64_t min_bytes = 1024;
  int64_t max_bytes = int64_t{256} << 20;
  std::string ops = "all_reduce,all_gather,reduce_scatter,send_recv";
  int64_t iters = 0;  // 0: chosen per size
  int64_t chunk_bytes = int64_t{1} << 20;
  std::string backend = "ucx";
  int local_size = 1;
  std::string transports = ucx::UcxContextOptions{}.transports;
  int64_t spin_us = 20;
  int64_t sleep_after_us = -2;  // -2: the library default
  int64_t cma_min_bytes = -1;   // -1: the library default
  std::string cma_policy = "adaptive";
  ucx::CmaPolicy parsed_cma_policy = ucx::CmaPolicy::kAdaptive;  // cma_policy, parsed in main
  bool print_transports = false;
  bool bind = false;
  bool adaptive_yield = true;
  std::string progress = "thread";
  std::string store_dir;
  std::string label = "retort-ucx";
  int64_t rank = -1;  // >= 0: run only this rank (store_dir must be given)
};

double NowSeconds() {
  return std::chrono::duration<double>(SteadyClock::now().time_since_epoch()).count();
}

constexpr int kWarmupIterations = 2 * ucx::CmaChooser::kWarmup + 2;

int ItersFor(const BenchOptions& o, size_t bytes) {
  if (o.iters > 0) return static_cast<int>(o.iters);
  if (bytes <= (size_t{64} << 10)) return 2000;
  if (bytes <= (size_t{1} << 20)) return 200;
  if (bytes <= (size_t{16} << 20)) return 30;
  return 8;
}

Status Check(const WorkPtr& w) { return w->Wait(); }

// Runs one operation `iters` times; returns seconds per iteration on this rank.
// `memory`: the kind the buffers are labelled (kCudaDevice for the emulated device hierarchy).
StatusOr<double> TimeOp(Communicator& comm, const std::string& op, size_t bytes, int iters,
                        std::vector<float>& a, std::vector<float>& b, MemoryKind memory) {
  const int n = comm.size();
  const size_t count = bytes / sizeof(float);
  const DataType f32 = DataType::kFloat32;
  auto run_once = [&]() -> Status {
    if (op == "all_reduce")
      return Check(comm.AllReduce({a.data(), count, f32, memory}, ReduceOp::kSum));
    if (op == "all_gather") {
      const size_t per = count / n;
      return Check(comm.AllGather({a.data(), per, f32, memory}, {b.data(), per * n, f32, memory}));
    }
    if (op == "reduce_scatter") {
      const size_t per = count / n;
      return Check(comm.ReduceScatter({a.data(), per * n, f32, memory},
                                      {b.data(), per, f32, memory}, ReduceOp::kSum));
    }
    if (op == "send_recv") {
      if (comm.rank() == 0) return Check(comm.Send({a.data(), count, f32, memory}, 1, 1));
      if (comm.rank() == 1) return Check(comm.Recv({b.data(), count, f32, memory}, 0, 1));
      return Status::Ok();
    }
    return InvalidArgumentError("unknown op '" + op + "'");
  };
  // Warm-up: also lets the transport's adaptive CMA-or-FIFO choice (cma_chooser.h) take its
  // first samples of both protocols at this size, as a job's first steps would.
  for (int i = 0; i < kWarmupIterations; ++i) RETORT_RETURN_IF_ERROR(run_once());
  RETORT_RETURN_IF_ERROR(Check(comm.Barrier()));
  const double start = NowSeconds();
  for (int i = 0; i < iters; ++i) RETORT_RETURN_IF_ERROR(run_once());
  if (op == "send_recv") {
    // Rank 0's sends complete locally; the receiver's last completion ends the transfer.
    RETORT_RETURN_IF_ERROR(Check(comm.Barrier()));
  }
  return (NowSeconds() - start) / iters;
}

int RunRank(const BenchOptions& o, int rank) {
  if (o.bind) {  // like mpirun's default binding: rank r on CPU r mod #CPUs
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(rank % std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))), &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) std::perror("sched_setaffinity");
  }
  FileStore store(o.store_dir);
  ucx::UcxCommunicatorOptions options;
  options.chunk_bytes = static_cast<size_t>(o.chunk_bytes);
  options.default_timeout = std::chrono::milliseconds(120000);
  options.ucx.transports = o.transports;
  options.ucx.spin_before_yield = std::chrono::microseconds(o.spin_us);
  options.ucx.yield_early_when_cpu_shared = o.adaptive_yield;
  if (o.sleep_after_us >= -1) {
    options.ucx.spin_before_sleep = std::chrono::microseconds(o.sleep_after_us);
  }
  if (o.cma_min_bytes >= 0) options.ucx.cma_min_bytes = static_cast<size_t>(o.cma_min_bytes);
  options.ucx.cma_policy = o.parsed_cma_policy;
  options.progress =
      o.progress == "caller" ? ProgressMode::kCallerThread : ProgressMode::kBackgroundThread;
  const bool device = o.backend == "hierarchical-device";
  const MemoryKind memory = device ? MemoryKind::kCudaDevice : MemoryKind::kHost;
  const ucx::HierarchicalDeviceLevels device_levels = ucx::HostMemoryDeviceLevels(options);
  StatusOr<std::unique_ptr<Communicator>> comm_or =
      o.backend == "hierarchical" || device
          ? [&] {
              NodeLayout layout;
              for (int r = 0; r < o.ranks; ++r) layout.node_of_rank.push_back(r / o.local_size);
              return ucx::CreateHierarchicalUcxCommunicator(&store, rank, o.ranks, 1, layout,
                                                            options,
                                                            device ? &device_levels : nullptr);
            }()
          : [&]() -> StatusOr<std::unique_ptr<Communicator>> {
              RETORT_ASSIGN_OR_RETURN(auto ucx_comm,
                                      ucx::UcxCommunicator::Create(&store, rank, o.ranks, 1, options));
              if (o.print_transports) std::cerr << ucx_comm->transport_description();
              return std::unique_ptr<Communicator>(std::move(ucx_comm));
            }();
  if (!comm_or.ok()) {
    std::cerr << "rank " << rank << ": " << comm_or.status() << "\n";
    return 1;
  }
  Communicator& comm = **comm_or;
  const size_t max_bytes = static_cast<size_t>(o.max_bytes);
  std::vector<float> a(max_bytes / sizeof(float) + 1, 1.0f);
  std::vector<float> b(max_bytes / sizeof(float) + 1, 0.0f);
  std::vector<std::string> ops;
  std::stringstream list(o.ops);
  for (std::string op; std::getline(list, op, ',');) ops.push_back(op);
  const int n = comm.size();
  for (const std::string& op : ops) {
    if (op == "send_recv" && n < 2) continue;
    for (size_t bytes = static_cast<size_t>(o.min_bytes); bytes <= max_bytes; bytes *= 4) {
      const size_t unit =
          (op == "all_gather" || op == "reduce_scatter") ? n * sizeof(float) : sizeof(float);
      const size_t s = bytes / unit * unit;
      auto seconds = TimeOp(comm, op, s, ItersFor(o, s), a, b, memory);
      if (!seconds.ok()) {
        std::cerr << "rank " << rank << ": " << op << " " << s << " bytes: " << seconds.status()
                  << "\n";
        return 1;
      }
      float t = static_cast<float>(*seconds);
      Status s_avg = Check(comm.AllReduce({&t, 1, DataType::kFloat32}, ReduceOp::kAverage));
      if (!s_avg.ok()) return 1;
      if (rank == 0) {
        const double algbw = static_cast<double>(s) / t / 1e9;
        const double factor = op == "all_reduce"  ? 2.0 * (n - 1) / n
                              : op == "send_recv" ? 1.0
                                                  : static_cast<double>(n - 1) / n;
        std::printf(
            "{\"impl\":\"%s\",\"op\":\"%s\",\"ranks\":%d,\"bytes\":%zu,\"time_us\":%.1f,"
            "\"algbw_GBps\":%.3f,\"busbw_GBps\":%.3f}\n",
            o.label.c_str(), op.c_str(), n, s, t * 1e6, algbw, algbw * factor);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace retort::collectives

int main(int argc, char** argv) {
  using retort::collectives::BenchOptions;
  BenchOptions o;
  retort::ArgParser parser("collectives_bench [--ranks=N] [--ops=...] [...]",
                           "Times retort's collectives with N processes on this host; prints "
                           "JSON lines (algbw/busbw as nccl-tests define them).");
  parser.AddInt("ranks", &o.ranks, "number of processes");
  parser.AddInt("min-bytes", &o.min_bytes, "smallest size (bytes; sizes grow x4)");
  parser.AddInt("max-bytes", &o.max_bytes, "largest size (bytes)");
  parser.AddString("ops", &o.ops, "comma list: all_reduce,all_gather,reduce_scatter,send_recv");
  parser.AddInt("iters", &o.iters, "timed iterations per size (0: by size)");
  parser.AddInt("chunk-bytes", &o.chunk_bytes, "ring pipelining chunk");
  parser.AddString("backend", &o.backend,
                   "ucx | hierarchical | hierarchical-device (the GPU workers' composition with "
                   "host memory standing in for the device: staged levels, memcpy copies)");
  parser.AddInt("local-size", &o.local_size, "ranks per node for --backend=hierarchical");
  parser.AddString("transports", &o.transports,
                   "UCX transports (UCX_TLS syntax); empty: UCX's choice");
  parser.AddInt("sleep-after-us", &o.sleep_after_us,
                "sleep 50 us between polls after this long without progress (-1: never, -2: "
                "library default)");
  parser.AddInt("spin-us", &o.spin_us,
                "spin this long without progress before yielding (-1: never)");
  parser.AddBool("adaptive-yield", &o.adaptive_yield,
                 "skip the spin while yields show other waiters sharing the CPU");
  parser.AddString("cma-policy", &o.cma_policy,
                   "adaptive (measure per operation) | always | never: which messages from the "
                   "CMA threshold up go through single-copy reads");
  parser.AddInt("cma-min-bytes", &o.cma_min_bytes,
                "messages from this size are read straight from the peer's memory (0: never, "
                "-1: library default)");
  parser.AddBool("print-transports", &o.print_transports,
                 "print each rank's UCX lanes and CMA threshold to stderr");
  parser.AddBool("bind", &o.bind, "pin rank r to CPU r mod #CPUs (what mpirun does by default)");
  parser.AddString("progress", &o.progress,
                   "thread (background executor) | caller (operations run inside Wait)");
  parser.AddString("label", &o.label, "the impl field of the JSON lines");
  parser.AddInt("rank", &o.rank,
                "run only this rank, bootstrapping through --store-dir (-1: fork every rank)");
  parser.AddString("store-dir", &o.store_dir,
                   "bootstrap directory shared by the ranks (with --rank; default: a new one)");
  parser.AddLogLevel("warning");
  if (auto code = parser.ParseOrExitCode(argc, argv, "collectives_bench")) return *code;
  if (auto policy = retort::collectives::ucx::ParseCmaPolicy(o.cma_policy); policy.ok()) {
    o.parsed_cma_policy = *policy;
  } else {
    std::cerr << "collectives_bench: --cma-policy: " << policy.status().message() << "\n";
    return 2;
  }
  if (o.rank >= 0) {
    if (o.rank >= o.ranks || o.store_dir.empty()) {
      std::cerr << "collectives_bench: --rank=" << o.rank << " needs --store-dir and a rank below "
                << "--ranks=" << o.ranks << "\n";
      return 2;
    }
    return retort::collectives::RunRank(o, static_cast<int>(o.rank));
  }
  char dir[] = "/tmp/retort_bench_XXXXXX";
  if (mkdtemp(dir) == nullptr) return 1;
  o.store_dir = std::string(dir) + "/store";
  std::vector<pid_t> pids;
  int failures = 0;
  for (int r = 0; r < o.ranks; ++r) {
    auto pid = retort::ForkAndRun([&o, r] { return retort::collectives::RunRank(o, r); });
    if (!pid.ok()) {
      std::cerr << "rank " << r << ": " << pid.status() << "\n";
      ++failures;
      continue;
    }
    pids.push_back(*pid);
  }
  for (pid_t pid : pids) {
    if (retort::WaitExit(pid, retort::Deadline::Never()) != 0) ++failures;
  }
  return failures == 0 ? 0 : 1;
}

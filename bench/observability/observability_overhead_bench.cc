// What observability costs a training step, measured in one run: two ranks (threads) of the
// real KD step (fm-teacher-p7 -> fm-student-p7) reduce-scatter over UCX exactly as workers do,
// and after every step hand it to the worker's observers in one of three modes:
//   off     no observer (how a step ran before metrics existed);
//   metrics Prometheus metrics (WorkerMetrics, exported over HTTP and scraped every
//           --scrape-ms by a client thread) and the per-rank step log (StepLog);
//   trace   metrics + a trace window recording every step (TraceRecorder as the step observer
//           and as the collective listener of the data-plane adapter).
// Modes alternate in blocks of --block steps, in a rotating order, for --rounds rounds, on the
// same KdStep (switched between the plain and the listening data-plane adapter with
// Reconfigure), so that load changes on a shared machine hit every mode alike. Reported per mode:
// the per-step wall times (the step, its record and its observers, as the training session
// measures them) as median and mean, and the time spent in the observers alone (building the
// record and calling them: the work observability adds to the training thread); then one line
// with the overheads vs off, both as the step-time difference and as observer time / off step.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <prometheus/registry.h>
#include <sys/socket.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>

#include "collectives/bootstrap_store.h"
#include "collectives/ucx/ucx_communicator.h"
#include "common/args.h"
#include "common/deadline.h"
#include "metrics/exporter.h"
#include "trainer/cpu_runtime.h"
#include "trainer/data/batch.h"
#include "trainer/kd_step.h"
#include "trainer/models/model.h"
#include "worker/communicator_shard_comm.h"
#include "worker/step_log.h"
#include "worker/trace_recorder.h"
#include "worker/worker_metrics.h"

using namespace retort;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kModes = 3;
const char* kModeNames[kModes] = {"off", "metrics", "trace"};

// GET /metrics from 127.0.0.1:port, discarding the body (what a Prometheus scrape costs the
// exporter); false when it fails.
bool Scrape(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
    if (::send(fd, req, sizeof(req) - 1, 0) > 0) {
      char buf[16384];
      while (::recv(fd, buf, sizeof(buf), 0) > 0) ok = true;
    }
  }
  ::close(fd);
  return ok;
}

struct Summary {
  double median = 0, mean = 0;
  size_t n = 0;
};

Summary Summarize(std::vector<double> v) {
  Summary s;
  s.n = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.median = v[v.size() / 2];
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t batch = 64, rounds = 6, block = 20, warmup = 5, scrape_ms = 1000;
  std::string out_dir = "/tmp/retort-observability-bench";
  ArgParser args("observability_overhead_bench [flags]",
                 "KD step time with observability off, metrics on, and a trace window on "
                 "(JSON lines).");
  args.AddInt("batch", &batch, "global batch (split over the two ranks)");
  args.AddInt("rounds", &rounds, "rounds; each runs every mode once");
  args.AddInt("block", &block, "steps per mode per round");
  args.AddInt("warmup", &warmup, "untimed steps first, in every mode");
  args.AddInt("scrape-ms", &scrape_ms, "interval of the metrics scrapes");
  args.AddString("out-dir", &out_dir, "where step logs and traces go (emptied first)");
  auto parsed = args.Parse(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "observability_overhead_bench: %s\n", parsed.status().message().c_str());
    return 2;
  }
  if (!*parsed) return 0;
  if (batch < 2 || rounds < 1 || block < 1 || scrape_ms < 1) {
    std::fprintf(stderr,
                 "observability_overhead_bench: --batch >= 2, --rounds, --block, "
                 "--scrape-ms >= 1\n");
    return 2;
  }
  std::filesystem::remove_all(out_dir);
  trainer::ConfigureCpuRuntime(1);
  auto exporter = metrics::MetricsExporter::Start("127.0.0.1:0");
  if (!exporter.ok()) {
    std::fprintf(stderr, "%s\n", exporter.status().ToString().c_str());
    return 1;
  }
  // Both ranks' metrics in one registry would clash; one WorkerMetrics per rank, each in its
  // own registry, rank 0's exported (what a scrape of one worker costs).
  prometheus::Registry rank1_registry;
  std::atomic<bool> done{false};
  std::atomic<int64_t> scrapes{0};
  std::thread scraper([&] {
    while (!done) {
      if (Scrape((*exporter)->port())) ++scrapes;
      for (int64_t waited = 0; waited < scrape_ms && !done; waited += 10)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });

  collectives::InMemoryStore store;
  std::vector<std::vector<double>> times(kModes);      // rank 0's
  std::vector<std::vector<double>> observing(kModes);  // rank 0's time in the observers
  std::vector<Status> results(2);
  std::barrier sync(2);
  auto rank_main = [&](int rank) -> Status {
    collectives::ucx::UcxCommunicatorOptions uo;
    RETORT_ASSIGN_OR_RETURN(auto comm,
                            collectives::ucx::UcxCommunicator::Create(&store, rank, 2, 1, uo));
    worker::WorkerMetrics metrics(rank == 0 ? (*exporter)->registry() : rank1_registry);
    worker::StepLog step_log(out_dir, "bench", rank);
    worker::TraceRecorder tracer(out_dir + "/traces", "bench", rank);
    worker::CommunicatorShardComm plain(comm.get()), traced(comm.get(), &tracer);
    RETORT_ASSIGN_OR_RETURN(auto teacher, trainer::BuildModel({.preset = "fm-teacher-p7"}, 1));
    RETORT_ASSIGN_OR_RETURN(auto student, trainer::BuildModel({.preset = "fm-student-p7"}, 2));
    const trainer::ShardPlan plan =
        trainer::MakeEvenShardPlan(trainer::FlatParameterCount(*student), 2);
    RETORT_ASSIGN_OR_RETURN(
        auto step,
        trainer::KdStep::Create(std::move(teacher), std::move(student), &plain, plan, {}));
    bool on_traced = false;
    trainer::Batch b;
    const int64_t local = batch / 2;
    b.images = torch::randn({local, 1, 28, 28});
    b.labels = torch::randint(10, {local}, torch::kLong);
    for (int64_t i = 0; i < local; ++i) {
      b.sample_indices.push_back(rank * local + i);
      b.augmentation_seeds.push_back(0);
    }
    int64_t global_step = 0;
    for (int64_t round = 0; round < rounds; ++round) {
      for (int k = 0; k < kModes; ++k) {
        const int m = static_cast<int>((round + k) % kModes);
        sync.arrive_and_wait();
        if ((m == 2) != on_traced) {  // the same step, another adapter (optimizer state reset)
          on_traced = m == 2;
          RETORT_RETURN_IF_ERROR(step->Reconfigure(on_traced ? &traced : &plain, plan));
          RETORT_RETURN_IF_ERROR(step->AllGatherParameters(Deadline::AfterMs(60000)));
        }
        if (m == 2) tracer.SetWindow(global_step + 1, global_step + warmup + block);
        for (int64_t s = 0; s < warmup + block; ++s) {
          ++global_step;
          if (m == 2) tracer.BeginStep(global_step);
          const auto start = Clock::now();
          const int64_t start_us = worker::UnixMicros();
          RETORT_ASSIGN_OR_RETURN(trainer::StepResult r, step->Step(b, 0.0));
          const auto observe_start = Clock::now();
          if (m > 0) {
            worker::StepRecord rec;
            rec.step = global_step;
            rec.generation = 1;
            rec.rank = rank;
            rec.world_size = 2;
            rec.loss = r.loss;
            rec.learning_rate = r.lr;
            rec.grad_norm = r.grad_norm;
            rec.skipped = r.skipped;
            rec.global_batch = batch;
            rec.step_seconds = std::chrono::duration<double>(Clock::now() - start).count();
            rec.samples_per_second = static_cast<double>(batch) / rec.step_seconds;
            rec.timing = r.timing;
            rec.data_start_unix_us = start_us;
            rec.end_unix_us = worker::UnixMicros();
            metrics.OnStep(rec);
            step_log.OnStep(rec);
            if (m == 2) tracer.OnStep(rec);
          }
          const auto end = Clock::now();
          if (rank == 0 && s >= warmup) {
            times[m].push_back(std::chrono::duration<double>(end - start).count());
            observing[m].push_back(std::chrono::duration<double>(end - observe_start).count());
          }
        }
      }
    }
    tracer.Flush();
    return Status::Ok();
  };
  std::thread r1([&] { results[1] = rank_main(1); });
  results[0] = rank_main(0);
  r1.join();
  done = true;
  scraper.join();
  for (const Status& s : results)
    if (!s.ok()) {
      std::fprintf(stderr, "observability_overhead_bench: %s\n", s.ToString().c_str());
      return 1;
    }
  Summary sum[kModes], obs[kModes];
  for (int m = 0; m < kModes; ++m) {
    sum[m] = Summarize(times[m]);
    obs[m] = Summarize(observing[m]);
    std::printf(
        "{\"mode\":\"%s\",\"steps\":%zu,\"median_step_s\":%.6f,\"mean_step_s\":%.6f,"
        "\"mean_observer_us\":%.1f,\"median_observer_us\":%.1f}\n",
        kModeNames[m], sum[m].n, sum[m].median, sum[m].mean, 1e6 * obs[m].mean,
        1e6 * obs[m].median);
  }
  auto pct = [&](int m, double Summary::*f) { return 100.0 * (sum[m].*f / sum[0].*f - 1.0); };
  std::printf(
      "{\"summary\":true,\"batch\":%lld,\"rounds\":%lld,\"block\":%lld,\"scrapes\":%lld,"
      "\"metrics_overhead_median_pct\":%.2f,\"metrics_overhead_mean_pct\":%.2f,"
      "\"trace_overhead_median_pct\":%.2f,\"trace_overhead_mean_pct\":%.2f,"
      "\"metrics_observer_pct_of_step\":%.3f,\"trace_observer_pct_of_step\":%.3f}\n",
      static_cast<long long>(batch), static_cast<long long>(rounds), static_cast<long long>(block),
      static_cast<long long>(scrapes.load()), pct(1, &Summary::median), pct(1, &Summary::mean),
      pct(2, &Summary::median), pct(2, &Summary::mean), 100.0 * obs[1].mean / sum[0].median,
      100.0 * obs[2].mean / sum[0].median);
  // Round by round (each mode's median in that round vs off's): how far the step-time
  // difference moves with the machine's load.
  std::string per_round[2];
  for (int64_t r = 0; r < rounds; ++r) {
    const auto block_of = [&](int m) {
      return std::vector<double>(times[m].begin() + r * block, times[m].begin() + (r + 1) * block);
    };
    const double off = Summarize(block_of(0)).median;
    for (int m = 1; m < kModes; ++m) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%s%.2f", r ? "," : "",
                    100.0 * (Summarize(block_of(m)).median / off - 1.0));
      per_round[m - 1] += buf;
    }
  }
  std::printf("{\"per_round_metrics_overhead_pct\":[%s],\"per_round_trace_overhead_pct\":[%s]}\n",
              per_round[0].c_str(), per_round[1].c_str());
  return 0;
}

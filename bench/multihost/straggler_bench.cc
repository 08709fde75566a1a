// Straggler rebalancing on test hosts (network namespaces, one worker per host; root only):
// one host's CPU limited (TestHosts::LimitCpu) so that its worker runs at about half the speed
// of the others, and the same job run side by side in one invocation:
//   even        elastic.straggler.rebalance off: every rank an even share;
//   rebalanced  rebalance on (window 5 steps);
//   lifted      rebalance on, the limit lifted at --lift-step (throttle on, then off).
// Per run, one JSON line: job samples/s over the measured steps (from --from-step to the end,
// by the metrics' time stamps; for "lifted" also before and after the lift), and the ideal:
// the sum of the workers' own compute throughputs (each worker's median compute_samples_per_
// second over the same steps, from its step log: samples per second of its forward and
// backward, its waits excluded) and samples/s as a fraction of it. A step also has the
// optimizer, the collectives and the control all-reduce, so even a balanced job stays below
// that ideal. Exits 77 (skipped) when test hosts or the CPU controller are not available.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/args.h"
#include "elastic/elastic_cluster.h"
#include "testing/subprocess.h"
#include "testing/test_hosts.h"

namespace retort::multihost {
namespace {

using elastic_testing::ClusterOptions;
using elastic_testing::ElasticCluster;
using elastic_testing::JobOptions;
using std::chrono::milliseconds;

struct Settings {
  int64_t workers = 4;
  double slow_cpus = 0.25;  // the throttled host's CPUs
  int64_t steps = 120;
  int64_t global_batch = 96;
  int64_t from_step = 40;  // steps before this one are warm-up (and the rebalancer's window)
  int64_t lift_step = 70;
};

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Each step's compute_samples_per_second and local_batch in a worker's step log (the last
// line of a step wins).
struct WorkerSteps {
  std::map<int64_t, double> compute_sps;
  std::map<int64_t, int64_t> local_batch;
};
WorkerSteps ReadWorkerSteps(const std::string& path) {
  WorkerSteps w;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    try {
      const auto j = nlohmann::json::parse(line);
      const int64_t step = j.at("step").get<int64_t>();
      w.compute_sps[step] = j.at("compute_samples_per_second").get<double>();
      w.local_batch[step] = j.at("local_batch").get<int64_t>();
    } catch (const std::exception&) {
    }
  }
  return w;
}

// Job samples/s over steps (first, last], from metrics.jsonl's time stamps; 0 when missing.
double JobSamplesPerSecond(const elastic_testing::MetricsFile& m, int64_t first, int64_t last,
                           int64_t global_batch) {
  int64_t t_first = -1, t_last = -1;
  for (const auto& l : m.lines) {
    if (l.step == first) t_first = l.time_unix_ms;
    if (l.step == last) t_last = l.time_unix_ms;
  }
  if (t_first < 0 || t_last <= t_first) return 0;
  return static_cast<double>(global_batch * (last - first)) / ((t_last - t_first) / 1000.0);
}

// The sum over workers of their median compute throughput over steps (first, last].
double IdealSamplesPerSecond(const std::vector<WorkerSteps>& workers, int64_t first, int64_t last) {
  double sum = 0;
  for (const auto& w : workers) {
    std::vector<double> v;
    for (const auto& [step, sps] : w.compute_sps)
      if (step > first && step <= last && sps > 0) v.push_back(sps);
    sum += Median(v);
  }
  return sum;
}

// One run; prints its JSON line. `mode`: even, rebalanced or lifted.
bool Run(testing::TestHosts& hosts, const Settings& s, const std::string& mode) {
  const int slow_host = static_cast<int>(s.workers);  // hosts 1..workers; the last is slow
  std::string why;
  if (!hosts.LimitCpu(slow_host, s.slow_cpus, &why)) {
    std::fprintf(stderr, "straggler_bench: %s\n", why.c_str());
    return false;
  }
  JobOptions job;
  job.steps = static_cast<int>(s.steps);
  job.global_batch = static_cast<int>(s.global_batch);
  job.min_workers = job.max_workers = static_cast<int>(s.workers);
  if (mode != "even") job.elastic_extra = "straggler: {rebalance: true, window_steps: 5}";
  ClusterOptions options;
  options.hosts = &hosts;
  options.coordinator_host = 0;
  options.port = 7070;
  options.comm_timeout_ms = 60000;
  options.eviction_timeout_ms = 10000;
  ElasticCluster c(job, options);
  if (!c.StartCoordinator(milliseconds(30000), &why)) {
    std::fprintf(stderr, "straggler_bench: coordinator: %s\n", why.c_str());
    return false;
  }
  for (int h = 1; h <= s.workers; ++h) c.StartWorkerOnHost(h, 0);
  bool lifted = false;
  if (mode == "lifted") {
    lifted = c.WaitForStep(s.lift_step, milliseconds(600000)) && hosts.LimitCpu(slow_host, 0, &why);
    if (!lifted) std::fprintf(stderr, "straggler_bench: lifting the limit: %s\n", why.c_str());
  }
  if (!c.WaitAllExited(milliseconds(900000), milliseconds(120000), &why)) {
    std::fprintf(stderr, "straggler_bench: %s run: %s\n%s\n", mode.c_str(), why.c_str(),
                 c.Logs().c_str());
    return false;
  }
  hosts.LimitCpu(slow_host, 0, &why);
  const auto metrics = c.Metrics();
  std::vector<WorkerSteps> workers;
  for (int h = 1; h <= s.workers; ++h)
    workers.push_back(ReadWorkerSteps(c.dir() + "/out/steps/" + hosts.name(h) + "-0.jsonl"));
  nlohmann::json j{{"bench", "straggler"},
                   {"impl", mode == "even" ? "retort_even_split" : "retort_rebalanced"},
                   {"mode", mode},
                   {"workers", s.workers},
                   {"slow_host_cpus", s.slow_cpus},
                   {"global_batch", s.global_batch},
                   {"steps", s.steps}};
  const int64_t end = s.steps;
  const int64_t until = mode == "lifted" ? s.lift_step : end;
  const double sps = JobSamplesPerSecond(metrics, s.from_step, until, s.global_batch);
  const double ideal = IdealSamplesPerSecond(workers, s.from_step, until);
  j["measured_steps"] = {s.from_step, until};
  j["samples_per_second"] = sps;
  j["ideal_samples_per_second"] = ideal;
  j["of_ideal"] = ideal > 0 ? sps / ideal : 0;
  std::vector<int64_t> last_shares;
  for (const auto& w : workers)
    last_shares.push_back(w.local_batch.count(until) ? w.local_batch.at(until) : 0);
  j["shares_at_last_measured_step"] = last_shares;
  if (mode == "lifted") {
    // After the lift: the rebalancer's next window sees even speeds and evens the shares out.
    const int64_t after = std::min(end, s.lift_step + 20);
    const double sps_after = JobSamplesPerSecond(metrics, after, end, s.global_batch);
    const double ideal_after = IdealSamplesPerSecond(workers, after, end);
    std::vector<int64_t> final_shares;
    for (const auto& w : workers)
      final_shares.push_back(w.local_batch.count(end) ? w.local_batch.at(end) : 0);
    j["lifted"] = lifted;
    j["after_lift"] = {{"measured_steps", {after, end}},
                       {"samples_per_second", sps_after},
                       {"ideal_samples_per_second", ideal_after},
                       {"of_ideal", ideal_after > 0 ? sps_after / ideal_after : 0},
                       {"shares_at_end", final_shares}};
  }
  std::cout << j.dump() << std::endl;
  std::error_code ec;
  std::filesystem::remove_all(c.dir(), ec);
  return true;
}

}  // namespace
}  // namespace retort::multihost

int main(int argc, char** argv) {
  using namespace retort::multihost;
  Settings s;
  std::string modes = "even,rebalanced,lifted";
  retort::ArgParser parser(
      "straggler_bench [--workers=N] [--slow-cpus=X] [--steps=N] [--global-batch=N] "
      "[--from-step=N] [--lift-step=N] [--modes=even,rebalanced,lifted]",
      "Straggler rebalancing on test hosts, one host CPU-limited: job samples/s without and "
      "with rebalancing against the ideal (JSON lines). Root only.");
  parser.AddInt("workers", &s.workers, "workers, one per test host");
  parser.AddDouble("slow-cpus", &s.slow_cpus, "CPUs of the throttled host");
  parser.AddInt("steps", &s.steps, "steps per run");
  parser.AddInt("global-batch", &s.global_batch, "global batch");
  parser.AddInt("from-step", &s.from_step, "first measured step (earlier ones warm up)");
  parser.AddInt("lift-step", &s.lift_step, "the 'lifted' run lifts the limit at this step");
  parser.AddString("modes", &modes, "runs, in order");
  if (auto code = parser.ParseOrExitCode(argc, argv, "straggler_bench")) return *code;
  if (s.workers < 2 || s.from_step < 1 || s.from_step >= s.steps || s.lift_step <= s.from_step ||
      s.lift_step >= s.steps) {
    std::fprintf(stderr,
                 "straggler_bench: need workers >= 2 and 1 <= from-step < lift-step < steps\n");
    return 2;
  }
  if (!retort::elastic_testing::FashionMnistAvailable()) {
    std::fprintf(stderr, "straggler_bench: no Fashion-MNIST (scripts/setup)\n");
    return 77;
  }
  std::string why;
  const std::string work = retort::testing::MakeTempDir("retort_straggler_bench");
  auto hosts =
      retort::testing::TestHosts::Create(static_cast<int>(s.workers) + 1, work + "/hosts", &why);
  if (!hosts) {
    std::fprintf(stderr, "straggler_bench: cannot make test hosts here: %s\n", why.c_str());
    return 77;
  }
  if (!hosts->LimitCpu(static_cast<int>(s.workers), 0, &why)) {
    std::fprintf(stderr, "straggler_bench: no CPU limit possible here: %s\n", why.c_str());
    return 77;
  }
  std::string rest = modes;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string mode = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    if (mode != "even" && mode != "rebalanced" && mode != "lifted") {
      std::fprintf(stderr, "straggler_bench: unknown mode %s\n", mode.c_str());
      return 2;
    }
    if (!Run(*hosts, s, mode)) return 1;
  }
  return 0;
}

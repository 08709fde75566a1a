// Observability end to end on 127.0.0.1: one coordinator and two training workers of a small
// synthetic distillation job, with Prometheus metrics on. While the job runs: both /metrics
// endpoints are scraped over HTTP and their families checked against golden_metrics.txt (names
// and types, nothing unlisted), `retortctl top --once --json` shows both workers, and
// `retortctl trace --steps A:B` makes each worker write a trace that `retortctl trace merge`
// turns into one valid trace-event file with one track per rank. After the job:
// `retortctl report RUN_DIR --json` reads every rank's step log and writes the HTML.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "elastic/elastic_cluster.h"
#include "testing/subprocess.h"
#include "tests/observability/golden_metrics.h"

namespace retort {
namespace {

using std::chrono::milliseconds;
using testing::BinaryPath;
using testing::Subprocess;

// GET http://127.0.0.1:PORT/metrics; "" when it cannot connect (every call is bounded by a 5 s
// socket timeout).
std::string Scrape(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string req = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::send(fd, req.data(), req.size(), 0) == static_cast<ssize_t>(req.size())) {
      char buf[65536];
      ssize_t n;
      while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  const auto body = out.find("\r\n\r\n");
  return body == std::string::npos ? "" : out.substr(body + 4);
}

// "# TYPE name type" lines of a scrape.
std::map<std::string, std::string> Families(const std::string& text, const std::string& prefix) {
  std::map<std::string, std::string> f;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    std::string hash, type_kw, name, type;
    if (l >> hash >> type_kw >> name >> type && hash == "#" && type_kw == "TYPE" &&
        name.rfind(prefix, 0) == 0)
      f[name] = type;
  }
  return f;
}

// The value of the first sample line starting with `series` (name and labels), or -1.
double Sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(series, 0) == 0 && line.size() > series.size() &&
        (line[series.size()] == ' ' || line[series.size()] == '{'))
      return std::stod(line.substr(line.rfind(' ') + 1));
  return -1;
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ObservabilityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("retort-observability");
    out_ = dir_ + "/out";
    std::ofstream(dir_ + "/job.yaml")
        << "name: observability\n"
           "teacher: {preset: fm-teacher-p7}\n"
           "student: {preset: fm-student-p7}\n"
           "dataset: {kind: synthetic, image_size: 28, num_classes: 10, synthetic_samples: 2048}\n"
           "global_batch: 32\nsteps: 200\n"
           "optimizer: {lr: 0.002, warmup_steps: 5}\n"
           "distillation: {temperature: 2.0, alpha: 0.5}\n"
           "threads_per_worker: 1\nevaluate: false\n"
           "checkpoint: {every_steps: 50, keep: 2}\n"
           "elastic: {min_workers: 2, max_workers: 2}\n"
           "output_dir: "
        << out_ << "\n";
    coordinator_ = std::make_unique<Subprocess>(
        std::vector<std::string>{
            BinaryPath("tools/retort-coordinator"), "--listen=127.0.0.1:0",
            "--state-dir=" + dir_ + "/state", "--job=" + dir_ + "/job.yaml",
            "--port-file=" + dir_ + "/port", "--heartbeat-interval-ms=200",
            "--metrics-listen=127.0.0.1:" + std::to_string(coordinator_metrics_)},
        dir_ + "/coordinator.log");
    ASSERT_TRUE(
        testing::WaitFor([&] { return !Read(dir_ + "/port").empty(); }, milliseconds(30000)))
        << coordinator_->Log();
    address_ = "127.0.0.1:" + std::to_string(std::stoi(Read(dir_ + "/port")));
    coordinator_metrics_ = MetricsPort(*coordinator_);
    ASSERT_GT(coordinator_metrics_, 0) << coordinator_->Log();
    for (int r = 0; r < 2; ++r) {
      std::vector<std::string> argv = {
          BinaryPath("tools/retort-worker"),   "--coordinator=" + address_, "--node=node0",
          "--local-rank=" + std::to_string(r), "--join-timeout-ms=60000",   "--output-dir=" + out_};
      if (r == 0) argv.push_back("--metrics-listen=127.0.0.1:0");
      workers_.push_back(
          std::make_unique<Subprocess>(argv, dir_ + "/worker" + std::to_string(r) + ".log"));
    }
  }

  // The port a process logged "metrics on port N" for (it listens on port 0); 0 when absent.
  static int MetricsPort(Subprocess& p) {
    std::smatch m;
    static const std::regex re("metrics on port ([0-9]+)");
    const std::string log = p.Log();
    return std::regex_search(log, m, re) ? std::stoi(m[1].str()) : 0;
  }

  bool AllRunning() {
    for (auto& w : workers_)
      if (!w->Running()) return false;
    return coordinator_->Running();
  }

  int Ctl(const std::vector<std::string>& args, std::string* out) {
    std::vector<std::string> argv = {BinaryPath("tools/retortctl"), "--coordinator=" + address_,
                                     "--timeout-ms=3000"};
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::RunCommand(argv, out, milliseconds(15000));
  }

  int64_t JobStep() {
    std::string out;
    if (Ctl({"status", "--json"}, &out) != 0) return -1;
    auto j = nlohmann::json::parse(out.substr(out.find('{')), nullptr, false);
    return j.is_object() ? j.value("step", int64_t{-1}) : -1;
  }

  std::string Logs() {
    std::string s = "--- coordinator\n" + coordinator_->Log();
    for (auto& w : workers_) s += "--- worker\n" + w->Log().substr(0, 20000);
    return s;
  }

  std::string dir_, out_, address_;
  int coordinator_metrics_ = 0, worker_metrics_ = 0;
  std::unique_ptr<Subprocess> coordinator_;
  std::vector<std::unique_ptr<Subprocess>> workers_;
};

TEST_F(ObservabilityTest, MetricsTopTraceAndReport) {
  ASSERT_TRUE(
      testing::WaitFor([&] { return !AllRunning() || JobStep() >= 3; }, milliseconds(120000)));
  ASSERT_TRUE(AllRunning()) << Logs();
  ASSERT_GE(JobStep(), 3) << Logs();
  worker_metrics_ = MetricsPort(*workers_[0]);
  ASSERT_GT(worker_metrics_, 0) << Logs();

  // --- a step trace a little ahead of the job (heartbeats carry the window every 200 ms).
  const int64_t first = JobStep() + 25, last = first + 5;
  std::string out;
  ASSERT_EQ(Ctl({"trace", "--steps", std::to_string(first) + ":" + std::to_string(last)}, &out), 0)
      << out;
  // A window already begun is refused, naming it.
  EXPECT_NE(Ctl({"trace", "--steps", "1:2"}, &out), 0);
  EXPECT_NE(out.find("1:2"), std::string::npos) << out;

  // --- Prometheus: names and types against the golden list, and a few values.
  const std::string coord = Scrape(coordinator_metrics_);
  const std::string worker = Scrape(worker_metrics_);
  ASSERT_FALSE(coord.empty()) << Logs();
  ASSERT_FALSE(worker.empty()) << Logs();
  EXPECT_EQ(Families(coord, "retort_"), observability_testing::GoldenMetrics("retort_coordinator_"))
      << coord;
  EXPECT_EQ(Families(worker, "retort_"), observability_testing::GoldenMetrics("retort_worker_"))
      << worker;
  EXPECT_EQ(Sample(coord, "retort_coordinator_members"), 2);
  EXPECT_GE(Sample(coord, "retort_coordinator_generation"), 1);
  EXPECT_GT(Sample(coord,
                   "retort_coordinator_rpcs_total{code=\"OK\",method=\"WorkerService/Heartbeat\"}"),
            0)
      << coord;
  EXPECT_GT(Sample(coord, "retort_coordinator_heartbeat_latency_seconds_count"), 0);
  EXPECT_EQ(Sample(coord, "retort_coordinator_evictions_total{cause=\"heartbeat_timeout\"}"), 0);
  EXPECT_GT(Sample(worker, "retort_worker_steps_total"), 0) << worker;
  EXPECT_GT(Sample(worker, "retort_worker_step_phase_seconds_count{phase=\"backward\"}"), 0);
  EXPECT_GT(Sample(worker, "retort_worker_loss"), 0);
  EXPECT_EQ(Sample(worker, "retort_worker_world_size"), 2);

  // --- top: one line per worker, from the coordinator.
  ASSERT_EQ(Ctl({"top", "--once", "--json"}, &out), 0) << out;
  auto top = nlohmann::json::parse(out.substr(out.find('{')), nullptr, false);
  ASSERT_TRUE(top.is_object()) << out;
  ASSERT_EQ(top["workers"].size(), 2u) << out;
  for (const auto& w : top["workers"]) {
    EXPECT_GE(w["generation"].get<int>(), 1) << out;
    EXPECT_GT(w["samples_per_second"].get<double>(), 0) << out;
    double share = 0;
    for (const auto& [k, v] : w["phase_share"].items()) share += v.get<double>();
    EXPECT_NEAR(share, 1.0, 1e-6) << out;
    EXPECT_GE(w["lag_steps"].get<int>(), 0);
  }
  ASSERT_EQ(Ctl({"top", "--once"}, &out), 0);
  EXPECT_NE(out.find("node0/1"), std::string::npos) << out;

  // --- the traces: one file per rank, merged into one track per rank.
  const std::string traces = out_ + "/traces";
  auto count_traces = [&] {
    int n = 0;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(traces, ec))
      n += e.path().filename().string().rfind("trace-" + std::to_string(first), 0) == 0;
    return n;
  };
  ASSERT_TRUE(testing::WaitFor([&] { return count_traces() == 2; }, milliseconds(120000)))
      << Logs();
  const std::string merged = dir_ + "/merged.json";
  ASSERT_EQ(testing::RunCommand(
                {BinaryPath("tools/retortctl"), "trace", "merge", traces, "--out=" + merged}, &out,
                milliseconds(15000)),
            0)
      << out;
  auto trace = nlohmann::json::parse(Read(merged), nullptr, false);
  ASSERT_TRUE(trace.is_object() && trace["traceEvents"].is_array());
  std::set<int64_t> tracks, with_phases;
  std::set<std::string> phase_names;
  int collectives = 0;
  for (const auto& e : trace["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("name")) << e.dump();
    const std::string ph = e["ph"];
    ASSERT_TRUE(ph == "X" || ph == "i" || ph == "M") << e.dump();
    if (ph == "M") {
      if (e["name"] == "process_name") tracks.insert(e["pid"].get<int64_t>());
      continue;
    }
    ASSERT_TRUE(e["ts"].is_number() && e.contains("tid")) << e.dump();
    if (ph == "X") {
      ASSERT_GE(e["dur"].get<int64_t>(), 0) << e.dump();
      const int64_t step = e["args"]["step"];
      EXPECT_GE(step, first);
      EXPECT_LE(step, last);
    }
    if (e.value("cat", "") == "phase") {
      with_phases.insert(e["pid"].get<int64_t>());
      phase_names.insert(e["name"].get<std::string>());
    }
    collectives += e.value("cat", "") == "collective";
  }
  EXPECT_EQ(tracks, (std::set<int64_t>{0, 1}));
  EXPECT_EQ(with_phases, tracks);
  for (const char* p : {"data_wait", "teacher_forward", "student_forward", "backward", "optimizer"})
    EXPECT_TRUE(phase_names.count(p)) << p;
  EXPECT_GT(collectives, 0);

  // --- the job ends; the report reads every rank's step log.
  for (auto& w : workers_) ASSERT_EQ(w->Wait(milliseconds(240000)), 0) << Logs();
  ASSERT_EQ(coordinator_->Wait(milliseconds(30000)), 0) << Logs();
  ASSERT_EQ(testing::RunCommand({BinaryPath("tools/retortctl"), "report", out_, "--json"}, &out,
                                milliseconds(30000)),
            0)
      << out;
  auto report = nlohmann::json::parse(out.substr(out.find('{')), nullptr, false);
  ASSERT_TRUE(report.is_object()) << out;
  EXPECT_EQ(report["steps"], 200);
  EXPECT_EQ(report["workers"].size(), 2u);
  EXPECT_TRUE(report["findings"].is_array());
  EXPECT_FALSE(report["bottleneck"].get<std::string>().empty());
  const std::string html = Read(report["html"].get<std::string>());
  for (const char* id : {"summary", "findings", "loss", "throughput", "phases", "membership"})
    EXPECT_NE(html.find(std::string("<section id=\"") + id + "\""), std::string::npos) << id;
}

}  // namespace
}  // namespace retort

#include "elastic/elastic_cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "testing/coordinator_process.h"

namespace retort::elastic_testing {
namespace {

using std::chrono::milliseconds;
using testing::BinaryPath;
using testing::Subprocess;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Protobuf's JSON writes 64-bit integers as strings.
int64_t JsonInt(const nlohmann::json& j, const char* key) {
  if (!j.contains(key)) return 0;
  const auto& v = j[key];
  if (v.is_string()) return std::stoll(v.get<std::string>());
  if (v.is_number()) return v.get<int64_t>();
  return 0;
}

uint64_t Fnv1a(const std::string& text, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string BinaryIdentity(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return path + ":missing";
  return path + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

// What a Fashion-MNIST trajectory depends on in the data: the sizes of the training files
// (the full set and scripts/gpu-check's carried subset differ; the subset's bytes differ only
// in gzip's time stamp from one --prepare to the next, its sizes do not).
std::string FashionMnistIdentity() {
  std::string id;
  for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"}) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(std::string(kFashionMnistDir) + "/" + name, ec);
    id += std::string(name) + ":" + (ec ? std::string("missing") : std::to_string(size)) + ";";
  }
  return id;
}

// Reads `steps` losses from `path`, one per line; empty when it has not exactly that many.
std::vector<double> ReadLosses(const std::string& path, int64_t steps) {
  std::vector<double> losses;
  std::ifstream in(path);
  double v;
  while (in >> v) losses.push_back(v);
  if (losses.size() != static_cast<size_t>(steps)) losses.clear();
  return losses;
}

// Writes `losses` to `path` whole or not at all (a temporary file, then a rename).
void WriteLosses(const std::string& path, const std::vector<double>& losses) {
  {
    std::ofstream out(path + ".tmp");
    out.precision(17);
    for (double v : losses) out << v << "\n";
  }
  std::filesystem::rename(path + ".tmp", path);
}

std::string Tail(const std::string& text, size_t max_chars) {
  return text.size() <= max_chars ? text : "..." + text.substr(text.size() - max_chars);
}

}  // namespace

std::string TrajectoryYaml(const JobOptions& job) {
  std::ostringstream y;
  y << "name: elastic\n"
       "teacher: {preset: fm-teacher-p7}\n"
    << (job.student_torchscript.empty()
            ? std::string("student: {preset: fm-student-p7}\n")
            : "student: {torchscript_path: " + job.student_torchscript + "}\n")
    << (job.trajectory_extra.find("dataset:") == std::string::npos
            ? "dataset: {kind: fashion-mnist, augment: true}\n"
            : "")
    << "global_batch: " << job.global_batch << "\nsteps: " << job.steps
    << "\n"
       "optimizer: {lr: 0.002, warmup_steps: 5, clip_grad_norm: 1.0}\n"
       "distillation: {temperature: 2.0, alpha: 0.5}\n"
       "threads_per_worker: 1\n"
       "evaluate: false\n"
    << job.trajectory_extra;
  return y.str();
}

std::string ScenarioJobYaml(const JobOptions& job, const std::string& output_dir) {
  std::ostringstream y;
  y << TrajectoryYaml(job) << "elastic: {min_workers: " << job.min_workers
    << ", max_workers: " << job.max_workers
    << (job.elastic_extra.empty() ? "" : ", " + job.elastic_extra) << "}\n"
    << "output_dir: " << output_dir << "\n";
  if (job.checkpoint_every_steps > 0) {
    y << "checkpoint: {every_steps: " << job.checkpoint_every_steps
      << ", keep: " << job.checkpoint_keep;
    if (job.checkpoint_max_consecutive_failures >= 0)
      y << ", max_consecutive_failures: " << job.checkpoint_max_consecutive_failures;
    y << "}\n";
  }
  return y.str();
}

bool FashionMnistAvailable() {
  return std::filesystem::exists(std::string(kFashionMnistDir) + "/train-images-idx3-ubyte.gz");
}

MetricsFile ReadMetrics(const std::string& path) {
  MetricsFile m;
  std::string text = ReadAll(path);
  size_t start = 0;
  while (true) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) break;  // an unterminated last line is still being written
    std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    try {
      auto j = nlohmann::json::parse(line);
      MetricLine l;
      l.step = j.at("step").get<int64_t>();
      l.time_unix_ms = j.at("time_unix_ms").get<int64_t>();
      l.epoch = j.at("epoch").get<int64_t>();
      l.generation = j.at("generation").get<uint64_t>();
      l.world_size = j.at("world_size").get<int>();
      l.loss = j.at("loss").get<double>();
      m.lines.push_back(l);
    } catch (const std::exception&) {
      m.malformed.push_back(line.substr(0, 200));
    }
  }
  return m;
}

std::string ReferenceBuildDir() {
  const char* other = std::getenv("RETORT_REFERENCE_BUILD_DIR");
  if (other != nullptr && *other != '\0' &&
      ::access((std::string(other) + "/tools/retort-run").c_str(), X_OK) == 0)
    return other;
  std::string own = BinaryPath("");  // "<this build>/"
  own.pop_back();
  return own;
}

std::vector<double> ReferenceLosses(const JobOptions& job, std::string* error) {
  // The reference trains in a world of exactly two from its first step: the first generation
  // waits for both workers, however loaded the machine is when the second one starts.
  const std::string trajectory =
      TrajectoryYaml(job) + "elastic: {min_workers: 2, max_workers: 2}\n";
  // A reference carried from another machine (RETORT_REFERENCE_LOSSES_DIR; scripts/gpu-check
  // --prepare writes one on the CPU machine) is keyed by the trajectory and the data alone: the
  // binaries there differ, the CPU run's numbers do not beyond the scenarios' tolerance.
  const uint64_t trajectory_key = Fnv1a(FashionMnistIdentity(), Fnv1a(trajectory));
  auto key_name = [](uint64_t key) {
    char name[32];
    std::snprintf(name, sizeof(name), "%016llx", static_cast<unsigned long long>(key));
    return std::string(name) + ".losses";
  };
  const char* carried_env = std::getenv("RETORT_REFERENCE_LOSSES_DIR");
  const std::string carried_dir = carried_env != nullptr ? carried_env : "";
  const std::string carried =
      carried_dir.empty() ? "" : carried_dir + "/" + key_name(trajectory_key);
  if (!carried.empty()) {
    std::vector<double> losses = ReadLosses(carried, job.steps);
    if (!losses.empty()) return losses;
  }
  auto carry = [&](const std::vector<double>& losses) {
    if (carried.empty()) return;
    std::error_code ec;
    std::filesystem::create_directories(carried_dir, ec);
    WriteLosses(carried, losses);
  };

  const std::string build_dir = ReferenceBuildDir();
  uint64_t key = trajectory_key;
  for (const char* bin : {"tools/retort-worker", "tools/retort-coordinator", "tools/retort-run"})
    key = Fnv1a(BinaryIdentity(build_dir + "/" + bin), key);
  const std::string cache_dir = build_dir + "/tests/elastic/reference";
  std::filesystem::create_directories(cache_dir);
  const std::string cached = cache_dir + "/" + key_name(key);

  // One reference run per build even when ctest runs the scenarios in parallel.
  int lock_fd = ::open((cache_dir + "/lock").c_str(), O_CREAT | O_RDWR, 0644);
  if (lock_fd < 0 || ::flock(lock_fd, LOCK_EX) != 0) {
    *error = "cannot lock " + cache_dir + "/lock";
    if (lock_fd >= 0) ::close(lock_fd);
    return {};
  }
  std::vector<double> losses = ReadLosses(cached, job.steps);
  if (!losses.empty()) {
    ::close(lock_fd);
    carry(losses);
    return losses;
  }
  std::string run_dir = testing::MakeTempDir("retort_elastic_reference");
  std::ofstream(run_dir + "/job.yaml") << trajectory;
  std::string log;
  int rc = testing::RunCommand({build_dir + "/tools/retort-run", "--job=" + run_dir + "/job.yaml",
                                "--workers=2", "--output-dir=" + run_dir + "/out",
                                // The CPU run, also on a GPU machine (scenarios on GPUs compare
                                // against it).
                                "--worker-arg=--device=cpu"},
                               &log, milliseconds(240000));
  if (rc != 0) {
    *error = "reference run (retort-run --workers=2) exited with " + std::to_string(rc) + ":\n" +
             Tail(log, 4000);
    ::close(lock_fd);
    return {};
  }
  MetricsFile m = ReadMetrics(run_dir + "/out/metrics.jsonl");
  for (size_t i = 0; i < m.lines.size(); ++i) {
    if (m.lines[i].step != static_cast<int64_t>(i + 1) || m.lines[i].world_size != 2) {
      *error = "reference run's metrics line " + std::to_string(i) + " is step " +
               std::to_string(m.lines[i].step) + " of world " +
               std::to_string(m.lines[i].world_size) + " (expected step " + std::to_string(i + 1) +
               " of world 2)";
      ::close(lock_fd);
      return {};
    }
    losses.push_back(m.lines[i].loss);
  }
  if (losses.size() != static_cast<size_t>(job.steps) || !m.malformed.empty()) {
    *error = "reference run wrote " + std::to_string(losses.size()) + " metrics lines and " +
             std::to_string(m.malformed.size()) + " malformed ones; expected " +
             std::to_string(job.steps);
    ::close(lock_fd);
    return {};
  }
  WriteLosses(cached, losses);
  std::filesystem::remove_all(run_dir);
  ::close(lock_fd);
  carry(losses);
  return losses;
}

bool StatusView::AllRanked() const {
  for (size_t i = 0; i < members.size(); ++i)
    if (members[i].rank != static_cast<int>(i)) return false;
  return true;
}

StatusPredicate FormedAfter(size_t members, uint64_t after) {
  return [members, after](const StatusView& s) {
    return s.members.size() == members && s.AllRanked() && s.generation > after;
  };
}

StatusPredicate FormedAfterWithout(size_t members, uint64_t after, const std::string& gone) {
  return [formed = FormedAfter(members, after), gone](const StatusView& s) {
    return formed(s) && s.ById(gone) == nullptr;
  };
}

const MemberView* StatusView::ByRank(int rank) const {
  for (const auto& m : members)
    if (m.rank == rank) return &m;
  return nullptr;
}

const MemberView* StatusView::ById(const std::string& id) const {
  for (const auto& m : members)
    if (m.id == id) return &m;
  return nullptr;
}

ElasticCluster::ElasticCluster(JobOptions job, ClusterOptions options)
    : job_(job), options_(options), port_(options.port) {
  dir_ = testing::MakeTempDir("retort_elastic");
  std::filesystem::create_directories(dir_ + "/out");
  std::filesystem::create_directories(dir_ + "/ctl");
  std::ofstream(dir_ + "/job.yaml") << ScenarioJobYaml(job_, dir_ + "/out");
}

ElasticCluster::~ElasticCluster() {
  // Workers first (SIGKILL via Subprocess), then the coordinator.
  workers_.clear();
  coordinator_.reset();
  old_coordinators_.clear();
}

bool ElasticCluster::StartCoordinator(milliseconds timeout, std::string* error) {
  if (coordinator_) old_coordinators_.push_back(std::move(coordinator_));
  const std::string ip =
      options_.hosts ? options_.hosts->address(options_.coordinator_host) : "127.0.0.1";
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<std::string> flags = {
      "--state-dir=" + state_dir(), "--job=" + dir_ + "/job.yaml",
      "--eviction-timeout-ms=" + std::to_string(options_.eviction_timeout_ms),
      "--heartbeat-interval-ms=" + std::to_string(options_.heartbeat_interval_ms),
      "--settle-ms=" + std::to_string(options_.settle_ms)};
  if (options_.rejoin_grace_ms > 0)
    flags.push_back("--rejoin-grace-ms=" + std::to_string(options_.rejoin_grace_ms));
  // Test hosts are network namespaces of this machine: plain TCP on their addresses is meant.
  if (options_.hosts) flags.push_back("--insecure-listen");
  testing::LaunchedCoordinator launched = testing::LaunchCoordinator(
      {.flags = flags,
       .port_file = dir_ + "/port",
       .log_path = dir_ + "/coordinator-" + std::to_string(++coordinator_starts_) + ".log",
       .port = port_,
       .timeout = timeout,
       .ip = ip,
       .spawn = [this](const std::vector<std::string>& argv, const std::string& log) {
         return options_.hosts ? options_.hosts->Spawn(options_.coordinator_host, argv, log)
                               : std::make_unique<Subprocess>(argv, log);
       }});
  coordinator_ = std::move(launched.process);
  if (!launched.ok()) {
    *error = launched.error;
    return false;
  }
  port_ = launched.port;
  address_ = launched.address();
  while (std::chrono::steady_clock::now() < deadline) {
    if (!coordinator_->Running()) break;
    if (Status()) return true;
    std::this_thread::sleep_for(milliseconds(100));
  }
  *error = "coordinator does not answer status on " + address_ + ":\n" + coordinator_->Log();
  return false;
}

int ElasticCluster::StartWorker(int local_rank) { return StartWorkerOnNode("node0", local_rank); }

int ElasticCluster::StartWorkerOnNode(const std::string& node, int local_rank) {
  return StartWorkerAt(-1, node, local_rank);
}

int ElasticCluster::StartWorkerOnHost(int host, int local_rank) {
  return StartWorkerAt(host, host >= 0 && options_.hosts ? options_.hosts->name(host) : "node0",
                       local_rank);
}

int ElasticCluster::StartWorkerAt(int host, const std::string& node, int local_rank) {
  const int index = static_cast<int>(workers_.size());
  const bool on_host = host >= 0 && options_.hosts;
  std::vector<std::string> argv = {
      BinaryPath("tools/retort-worker"),
      "--coordinator=" + address_,
      "--node=" + node,
      "--local-rank=" + std::to_string(local_rank),
      "--rpc-timeout-ms=" + std::to_string(options_.rpc_timeout_ms),
      "--comm-timeout-ms=" + std::to_string(options_.comm_timeout_ms),
      "--join-timeout-ms=" + std::to_string(options_.join_timeout_ms),
      "--rejoin-timeout-ms=" + std::to_string(options_.rejoin_timeout_ms),
      "--output-dir=" + dir_ + "/out"};
  if (on_host) argv.push_back("--data-address=" + options_.hosts->address(host));
  argv.insert(argv.end(), options_.worker_args.begin(), options_.worker_args.end());
  const std::string log = dir_ + "/worker" + std::to_string(index) + "-" + node + "-local" +
                          std::to_string(local_rank) + ".log";
  workers_.push_back(on_host ? options_.hosts->Spawn(host, argv, log)
                             : std::make_unique<Subprocess>(argv, log));
  local_ranks_.push_back(local_rank);
  hosts_of_.push_back(on_host ? host : -1);
  return index;
}

int ElasticCluster::WorkerIndexForLocalRank(int local_rank) const {
  for (int i = static_cast<int>(local_ranks_.size()) - 1; i >= 0; --i)
    if (local_ranks_[i] == local_rank) return i;
  return -1;
}

int ElasticCluster::Ctl(const std::vector<std::string>& args, std::string* out,
                        milliseconds timeout) {
  std::vector<std::string> argv = {BinaryPath("tools/retortctl"), "--coordinator=" + address_,
                                   "--timeout-ms=2000"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string path = dir_ + "/ctl/" + std::to_string(ctl_calls_++) + ".out";
  int code;
  {
    Subprocess p(argv, path);
    auto rc = p.Wait(timeout);
    code = rc ? *rc : -1;
    if (out) *out = p.Log();
  }
  std::filesystem::remove(path);
  return code;
}

std::optional<StatusView> ParseStatusJson(const std::string& out) {
  size_t brace = out.find('{');
  if (brace == std::string::npos) return std::nullopt;
  try {
    auto j = nlohmann::json::parse(out.substr(brace));
    StatusView s;
    s.raw = out.substr(brace);
    s.state = j.at("state").get<std::string>();
    s.generation = j.at("generation").get<uint64_t>();
    s.step = j.at("step").get<int64_t>();
    s.min_workers = j.at("min_workers").get<int>();
    s.max_workers = j.at("max_workers").get<int>();
    s.last_checkpoint_id = j.at("last_checkpoint_id").get<uint64_t>();
    s.last_checkpoint_step = j.at("last_checkpoint_step").get<int64_t>();
    for (const auto& m : j.at("members")) {
      MemberView v;
      v.id = m.at("id").get<std::string>();
      v.rank = m.at("rank").get<int>();
      v.node = m.at("node").get<std::string>();
      v.local_rank = m.at("local_rank").get<int>();
      v.step = m.at("step").get<int64_t>();
      s.members.push_back(v);
    }
    return s;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<StatusView> ElasticCluster::Status() {
  std::string out;
  if (Ctl({"status", "--json"}, &out, milliseconds(5000)) != 0) return std::nullopt;
  auto s = ParseStatusJson(out);
  if (s && s->last_checkpoint_id > 0)
    committed_seen_.insert({s->last_checkpoint_id, s->last_checkpoint_step});
  return s;
}

bool ElasticCluster::WaitForStatus(const StatusPredicate& pred, milliseconds timeout,
                                   StatusView* last) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto s = Status();
    if (s && last) *last = *s;
    if (s && pred(*s)) return true;
    // A coordinator that exited (the job ended, or it crashed) will not answer again.
    if (std::chrono::steady_clock::now() >= deadline || !coordinator_->Running()) return false;
    std::this_thread::sleep_for(milliseconds(200));
  }
}

MetricsFile ElasticCluster::Metrics() const { return ReadMetrics(metrics_path()); }

int64_t ElasticCluster::LastStep() const {
  int64_t best = 0;
  for (const auto& l : Metrics().lines) best = std::max(best, l.step);
  return best;
}

MetricsMark ElasticCluster::Mark() const {
  MetricsFile m = Metrics();
  MetricsMark mark{m.lines.size(), 0};
  for (const auto& l : m.lines) mark.step = std::max(mark.step, l.step);
  return mark;
}

bool ElasticCluster::WaitForStep(int64_t step, milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (LastStep() >= step) return true;
    bool any_running = false;
    for (auto& w : workers_) any_running = any_running || w->Running();
    if (!any_running || std::chrono::steady_clock::now() >= deadline) return LastStep() >= step;
    std::this_thread::sleep_for(milliseconds(100));
  }
}

bool ElasticCluster::WaitForWorld(int world, int64_t step, milliseconds timeout) {
  auto reached = [&] {
    auto lines = Metrics().lines;
    return !lines.empty() && lines.back().world_size == world && lines.back().step >= step;
  };
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (reached()) return true;
    bool any_running = false;
    for (auto& w : workers_) any_running = any_running || w->Running();
    if (!any_running || std::chrono::steady_clock::now() >= deadline) return reached();
    std::this_thread::sleep_for(milliseconds(100));
  }
}

bool ElasticCluster::WaitAllExited(milliseconds timeout, milliseconds stall, std::string* why) {
  auto now = [] { return std::chrono::steady_clock::now(); };
  const auto deadline = now() + timeout;
  size_t lines = Metrics().lines.size();
  auto last_progress = now();
  while (true) {
    bool all = coordinator_ == nullptr || !coordinator_->Running();
    for (auto& w : workers_) all = !w->Running() && all;
    if (all) return true;
    size_t n = Metrics().lines.size();
    if (n != lines) {
      lines = n;
      last_progress = now();
    }
    if (now() >= deadline) {
      *why = "the job did not finish within " + std::to_string(timeout.count()) + " ms";
      return false;
    }
    if (now() - last_progress >= stall) {
      *why = "the job is stuck: no step completed for " + std::to_string(stall.count()) +
             " ms (last step " + std::to_string(LastStep()) + ")";
      return false;
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
}

std::string ElasticCluster::Logs(size_t max_chars) const {
  std::string all;
  auto add = [&](const Subprocess& p) {
    all += "----- " + p.log_path() + "\n" + Tail(p.Log(), max_chars);
  };
  for (const auto& c : old_coordinators_) add(*c);
  if (coordinator_) add(*coordinator_);
  for (const auto& w : workers_) add(*w);
  return all;
}

int PickFreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

std::vector<CommittedCheckpoint> ListCommittedCheckpoints(const std::string& checkpoint_dir) {
  std::vector<CommittedCheckpoint> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(checkpoint_dir, ec)) {
    std::string manifest_path = entry.path().string() + "/MANIFEST.json";
    std::string text = ReadAll(manifest_path);
    if (text.empty()) continue;
    try {
      auto j = nlohmann::json::parse(text);
      CommittedCheckpoint c;
      c.id = static_cast<uint64_t>(JsonInt(j, "checkpoint_id"));
      c.step = JsonInt(j, "step");
      c.dir = entry.path().string();
      if (j.contains("files"))
        for (const auto& f : j["files"]) c.files.push_back(f.value("path", ""));
      out.push_back(c);
    } catch (const std::exception&) {
      continue;  // being replaced: manifests are written atomically, so this is a stale read
    }
  }
  std::sort(out.begin(), out.end(),
            [](const CommittedCheckpoint& a, const CommittedCheckpoint& b) { return a.id < b.id; });
  return out;
}

}  // namespace retort::elastic_testing

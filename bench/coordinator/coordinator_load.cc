// coordinator_load: simulates many workers against the real retort-coordinator process over
// loopback and prints JSON lines.
//   heartbeat phase: N members join, then each heartbeats once per interval for D seconds;
//                    reports heartbeat latency percentiles and the coordinator's CPU and memory.
//   formation phase: M members join (each with an open generation stream); reports the time
//                    from the last join's reply until every stream has received the generation
//                    that contains all M members.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/args.h"
#include "common/file_util.h"
#include "common/port_file.h"
#include "retort/v1/retort.grpc.pb.h"
#include "tools/process_group.h"

using namespace retort;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

struct ProcSample {
  double cpu_seconds = 0;
  double rss_mb = 0;
};

ProcSample SampleProcess(pid_t pid) {
  ProcSample s;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string content((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto close = content.rfind(')');
  if (close != std::string::npos) {
    std::istringstream rest(content.substr(close + 2));
    std::string field;
    long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
      if (i == 14) utime = std::stol(field);
      if (i == 15) stime = std::stol(field);
    }
    s.cpu_seconds = static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK);
  }
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) s.rss_mb = std::stod(line.substr(6)) / 1024.0;
  return s;
}

double SelfCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t k = static_cast<size_t>(p * (v.size() - 1));
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

// A pool of channels (separate HTTP/2 connections) and stubs.
struct Stubs {
  explicit Stubs(const std::string& address, int channels) {
    for (int i = 0; i < channels; ++i) {
      grpc::ChannelArguments args;
      args.SetInt("grpc.channel_id", i);  // distinct args => distinct connections
      stubs.push_back(v1::WorkerService::NewStub(
          grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args)));
    }
  }
  v1::WorkerService::Stub* operator[](size_t i) { return stubs[i % stubs.size()].get(); }
  std::vector<std::unique_ptr<v1::WorkerService::Stub>> stubs;
};

// Joins `n` members with at most `window` calls in flight; returns their ids ("" on failure)
// and, when `secrets` is given, their member secrets (every later call for a member carries it).
std::vector<std::string> JoinMembers(Stubs& stubs, int n, int window, const std::string& prefix,
                                     std::vector<std::string>* secrets = nullptr) {
  std::vector<std::string> ids(n);
  if (secrets) secrets->assign(static_cast<size_t>(n), "");
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0, done = 0;
  for (int i = 0; i < n; ++i) {
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return in_flight < window; });
      ++in_flight;
    }
    struct Call {
      grpc::ClientContext ctx;
      v1::JoinRequest req;
      v1::JoinResponse resp;
    };
    auto* call = new Call;
    call->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    call->req.mutable_identity()->set_node(prefix + std::to_string(i / 8));
    call->req.mutable_identity()->set_local_rank(i % 8);
    call->req.mutable_identity()->set_incarnation("load");
    call->req.mutable_identity()->set_data_address("127.0.0.1:" +
                                                   std::to_string(20000 + i % 40000));
    call->req.set_parameter_count(5'000'000);
    stubs[i]->async()->Join(&call->ctx, &call->req, &call->resp, [&, call, i](grpc::Status s) {
      std::lock_guard<std::mutex> lock(mu);
      if (s.ok()) {
        ids[i] = call->resp.member_id();
        if (secrets) (*secrets)[static_cast<size_t>(i)] = call->resp.member_secret();
      } else
        std::fprintf(stderr, "join %d failed: %s\n", i, s.error_message().c_str());
      --in_flight;
      ++done;
      delete call;
      cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done == n; });
  return ids;
}

struct Coordinator {
  tools::ProcessGroup group;
  int index = -1;
  std::string address;
  pid_t pid = 0;
};

bool StartCoordinator(Coordinator* c, const std::string& bin, const std::string& dir,
                      int max_workers) {
  std::string job = dir + "/job.yaml", port = dir + "/port";
  std::ofstream(job)
      << "name: load\nteacher: {preset: fm-teacher}\nstudent: {preset: fm-student}\nsteps: 1000\n"
      << "elastic: {min_workers: 1, max_workers: " << max_workers << "}\n";
  c->index = c->group.Spawn(
      "coordinator", {bin, "--state-dir=" + dir + "/state", "--job=" + job, "--listen=127.0.0.1:0",
                      "--port-file=" + port, "--log-level=warning",
                      // The simulated members never train: the dataset need not exist.
                      "--no-check-paths"});
  auto bound = WaitForPortFile(port, Deadline::AfterMs(20000),
                               [c] { return c->group.Poll(c->index).has_value(); });
  if (!bound.ok()) {
    std::fprintf(stderr, "coordinator: %s\n", bound.status().ToString().c_str());
    return false;
  }
  c->address = "127.0.0.1:" + std::to_string(*bound);
  std::ifstream f("/proc/self/task/" + std::to_string(getpid()) + "/children");
  f >> c->pid;
  return c->pid > 0;
}

void HeartbeatPhase(const std::string& bin, const std::string& dir, int members, int seconds,
                    int interval_ms, int channels) {
  Coordinator c;
  if (!StartCoordinator(&c, bin, dir, members + 16)) {
    std::fprintf(stderr, "coordinator did not start\n");
    std::exit(1);
  }
  Stubs stubs(c.address, channels);
  auto join_start = Clock::now();
  std::vector<std::string> secrets;
  auto ids = JoinMembers(stubs, members, 256, "hb-node-", &secrets);
  double join_seconds = std::chrono::duration<double>(Clock::now() - join_start).count();
  int joined =
      static_cast<int>(std::count_if(ids.begin(), ids.end(), [](auto& s) { return !s.empty(); }));

  std::mutex mu;
  std::vector<double> latencies;
  latencies.reserve(static_cast<size_t>(members) * seconds * 1000 / interval_ms + 16);
  std::atomic<int64_t> in_flight{0}, errors{0}, sent{0};
  ProcSample before = SampleProcess(c.pid);
  double self_before = SelfCpuSeconds();
  double peak_rss = before.rss_mb;
  auto phase_start = Clock::now();
  const auto total = milliseconds(static_cast<int64_t>(seconds) * 1000);
  // Member i heartbeats at offsets (i * interval / members) + k * interval.
  int64_t next_member_tick = 0;
  const double per_ms = static_cast<double>(members) / interval_ms;
  while (Clock::now() - phase_start < total) {
    auto elapsed_ms = std::chrono::duration<double, std::milli>(Clock::now() - phase_start).count();
    int64_t due = static_cast<int64_t>(elapsed_ms * per_ms);
    for (; next_member_tick < due; ++next_member_tick) {
      int i = static_cast<int>(next_member_tick % members);
      if (ids[i].empty()) continue;
      struct Call {
        grpc::ClientContext ctx;
        v1::HeartbeatRequest req;
        v1::HeartbeatResponse resp;
        Clock::time_point start;
      };
      auto* call = new Call;
      call->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      call->req.set_member_id(ids[i]);
      call->ctx.AddMetadata("retort-member-secret", secrets[static_cast<size_t>(i)]);
      call->req.set_step(next_member_tick / members);
      call->req.mutable_metrics()->set_loss(1.0);
      call->start = Clock::now();
      in_flight++;
      sent++;
      stubs[i]->async()->Heartbeat(&call->ctx, &call->req, &call->resp, [&, call](grpc::Status s) {
        double ms = std::chrono::duration<double, std::milli>(Clock::now() - call->start).count();
        if (s.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          latencies.push_back(ms);
        } else {
          errors++;
        }
        in_flight--;
        delete call;
      });
    }
    if ((next_member_tick % 2000) == 0) peak_rss = std::max(peak_rss, SampleProcess(c.pid).rss_mb);
    std::this_thread::sleep_for(milliseconds(1));
  }
  double phase_seconds = std::chrono::duration<double>(Clock::now() - phase_start).count();
  ProcSample after = SampleProcess(c.pid);
  double self_after = SelfCpuSeconds();
  auto drain_start = Clock::now();
  while (in_flight > 0 && Clock::now() - drain_start < std::chrono::seconds(10))
    std::this_thread::sleep_for(milliseconds(5));
  std::vector<double> lat;
  {
    std::lock_guard<std::mutex> lock(mu);
    lat = latencies;
  }
  nlohmann::json j{
      {"bench", "coordinator_heartbeat"},
      {"members", members},
      {"joined", joined},
      {"join_seconds", join_seconds},
      {"interval_ms", interval_ms},
      {"seconds", phase_seconds},
      {"heartbeats_sent", sent.load()},
      {"heartbeats_ok", lat.size()},
      {"errors", errors.load()},
      {"rate_per_s", lat.size() / phase_seconds},
      {"p50_ms", Percentile(lat, 0.50)},
      {"p99_ms", Percentile(lat, 0.99)},
      {"p999_ms", Percentile(lat, 0.999)},
      {"max_ms", lat.empty() ? 0 : *std::max_element(lat.begin(), lat.end())},
      {"coordinator_cpu_percent", 100.0 * (after.cpu_seconds - before.cpu_seconds) / phase_seconds},
      {"coordinator_rss_mb", std::max(peak_rss, after.rss_mb)},
      {"loadgen_cpu_percent", 100.0 * (self_after - self_before) / phase_seconds},
      {"cores", std::thread::hardware_concurrency()}};
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
  c.group.SignalAll(SIGKILL);
}

void FormationPhase(const std::string& bin, const std::string& dir, int members, int channels) {
  Coordinator c;
  if (!StartCoordinator(&c, bin, dir, members + 16)) {
    std::fprintf(stderr, "coordinator did not start\n");
    std::exit(1);
  }
  Stubs stubs(c.address, channels);
  // Generation streams: one reactor per member, counting arrivals of a full generation.
  std::mutex mu;
  std::condition_variable cv;
  int complete = 0;
  Clock::time_point last_complete;
  class Stream : public grpc::ClientReadReactor<v1::Generation> {
   public:
    Stream(int want, std::mutex* mu, std::condition_variable* cv, int* complete,
           Clock::time_point* last)
        : want_(want), mu_(mu), cv_(cv), complete_(complete), last_(last) {}
    void Begin() {
      StartRead(&gen_);
      StartCall();
    }
    void OnReadDone(bool ok) override {
      if (!ok) return;
      if (gen_.members_size() == want_ && !counted_) {
        counted_ = true;
        std::lock_guard<std::mutex> lock(*mu_);
        ++*complete_;
        *last_ = Clock::now();
        cv_->notify_all();
      }
      StartRead(&gen_);
    }
    void OnDone(const grpc::Status&) override {}
    grpc::ClientContext ctx;
    v1::WatchGenerationsRequest req;

   private:
    int want_;
    std::mutex* mu_;
    std::condition_variable* cv_;
    int* complete_;
    Clock::time_point* last_;
    v1::Generation gen_;
    bool counted_ = false;
  };
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < members; ++i) {
    auto s = std::make_unique<Stream>(members, &mu, &cv, &complete, &last_complete);
    stubs[i]->async()->WatchGenerations(&s->ctx, &s->req, s.get());
    s->Begin();
    streams.push_back(std::move(s));
  }
  auto join_start = Clock::now();
  auto ids = JoinMembers(stubs, members, 256, "gen-node-");
  auto last_join = Clock::now();
  bool ok;
  {
    std::unique_lock<std::mutex> lock(mu);
    ok = cv.wait_for(lock, std::chrono::seconds(30), [&] { return complete == members; });
  }
  double formed_ms =
      ok ? std::chrono::duration<double, std::milli>(last_complete - last_join).count() : -1;
  ProcSample sample = SampleProcess(c.pid);
  nlohmann::json j{
      {"bench", "coordinator_generation_formation"},
      {"members", members},
      {"joined", std::count_if(ids.begin(), ids.end(), [](auto& s) { return !s.empty(); })},
      {"join_seconds", std::chrono::duration<double>(last_join - join_start).count()},
      {"streams_with_full_generation", complete},
      {"last_join_to_all_delivered_ms", formed_ms},
      {"coordinator_rss_mb", sample.rss_mb},
      {"coordinator_cpu_seconds_total", sample.cpu_seconds}};
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
  for (auto& s : streams) s->ctx.TryCancel();
  c.group.SignalAll(SIGKILL);
  std::this_thread::sleep_for(milliseconds(200));
}

}  // namespace

int main(int argc, char** argv) {
  std::string bin = std::string(RETORT_BINARY_DIR) + "/tools/retort-coordinator", dir,
              phase = "all";
  int members = 10000, seconds = 20, interval_ms = 1000, formation_members = 1000, channels = 8;
  ArgParser args(
      "coordinator_load [flags]",
      "Simulates many workers against a real retort-coordinator on loopback; prints JSON lines.");
  args.AddString("coordinator-bin", &bin, "path of retort-coordinator");
  args.AddString("dir", &dir, "scratch directory (default: a new one under /tmp)");
  args.AddString("phase", &phase, "heartbeat, formation or all");
  args.AddInt("members", &members, "simulated members in the heartbeat phase");
  args.AddInt("seconds", &seconds, "length of the heartbeat phase");
  args.AddInt("interval-ms", &interval_ms, "heartbeat interval of each member");
  args.AddInt("formation-members", &formation_members, "members in the formation phase");
  args.AddInt("channels", &channels, "client connections");
  if (auto code = args.ParseOrExitCode(argc, argv, "coordinator_load")) return *code;
  if (dir.empty()) {
    char tmpl[] = "/tmp/retort_load_XXXXXX";
    dir = mkdtemp(tmpl);
  }
  if (phase == "heartbeat" || phase == "all") {
    MakeDirectories(dir + "/hb").ok();
    HeartbeatPhase(bin, dir + "/hb", members, seconds, interval_ms, channels);
  }
  if (phase == "formation" || phase == "all") {
    MakeDirectories(dir + "/gen").ok();
    FormationPhase(bin, dir + "/gen", formation_members, channels);
  }
  return 0;
}

// heartbeat_tls_bench: heartbeat latency and connection handshake time of the coordinator with
// mutual TLS against the same coordinator without TLS, in one run (issue 17's figures).
//
// For each member count (--members, repeatable) and each transport (insecure, then mutual TLS
// with certificates made as `retortctl certs` makes them), it starts a coordinator and its gRPC
// server inside this process on 127.0.0.1, then
//  - handshakes: opens --handshakes fresh connections one after another and times each from
//    channel creation to READY (TCP connect, TLS handshake with client certificate, HTTP/2
//    settings);
//  - joins N members through the real Join RPC (worker certificate under mutual TLS), keeping
//    each member's secret;
//  - heartbeats: every member heartbeats once per job heartbeat interval (--interval-ms, also the
//    coordinator's), its secret attached, for --seconds; calls are issued open-loop on a fixed
//    schedule over --channels connections (gRPC's callback threads), so a slow reply does not
//    delay the next call's start.
// Prints one JSON object per configuration, then one side-by-side summary object with the
// targets (mTLS p99 <= 2x insecure, mTLS p99 < 50 ms at the largest member count).
//
// The simulated members share --channels connections: the heartbeat figures are the per-RPC
// cost of TLS (record encryption, authorization by certificate), the handshake figures are the
// per-connection cost a real worker pays once (and on every reconnect). Load generator and
// coordinator share this process and the machine's cores. Every wait is bounded.
#include <grpcpp/grpcpp.h>
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
#include <string>
#include <thread>
#include <vector>

#include "common/args.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "coordinator/coordinator.h"
#include "coordinator/server.h"
#include "retort/v1/retort.grpc.pb.h"
#include "rpc/client_channel.h"
#include "rpc/metadata.h"
#include "tools/cert_generator.h"

using namespace retort;
using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

struct Settings {
  int seconds = 10;
  int interval_ms = 1000;
  int channels = 8;
  int handshakes = 50;
  int join_window = 256;
  std::string dir;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  const size_t k = static_cast<size_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

double Max(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

double ProcessCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

std::string LoadAverage() {
  std::ifstream f("/proc/loadavg");
  std::string one, five, fifteen;
  f >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

double Ms(SteadyClock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// A channel of its own (a separate connection): distinct arguments keep gRPC from sharing one
// subchannel between channels.
std::shared_ptr<grpc::Channel> NewChannel(const std::string& address,
                                          const std::shared_ptr<grpc::ChannelCredentials>& creds,
                                          int id) {
  grpc::ChannelArguments args;
  args.SetInt("retort.bench_channel_id", id);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, creds, args);
}

// Opens `n` connections one after another; the time of each from creation to READY (ms), or
// nothing for one that did not connect within 10 s (counted in *failed).
std::vector<double> TimeHandshakes(const std::string& address,
                                   const std::shared_ptr<grpc::ChannelCredentials>& creds, int n,
                                   int first_id, int* failed) {
  std::vector<double> out;
  for (int i = 0; i < n; ++i) {
    const auto start = SteadyClock::now();
    auto channel = NewChannel(address, creds, first_id + i);
    if (channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10)))
      out.push_back(Ms(SteadyClock::now() - start));
    else
      ++*failed;
  }
  return out;
}

struct Members {
  std::vector<std::string> ids, secrets;
  int joined = 0;
};

// Joins `n` members with at most `window` calls in flight, each call bounded by 30 s.
Members JoinMembers(std::vector<std::unique_ptr<v1::WorkerService::Stub>>& stubs, int n,
                    int window) {
  Members m;
  m.ids.assign(static_cast<size_t>(n), "");
  m.secrets.assign(static_cast<size_t>(n), "");
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0, done = 0, failures = 0;
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
    call->req.mutable_identity()->set_node("bench-node-" + std::to_string(i / 8));
    call->req.mutable_identity()->set_local_rank(i % 8);
    call->req.mutable_identity()->set_incarnation("bench");
    call->req.mutable_identity()->set_data_address("127.0.0.1:" +
                                                   std::to_string(20000 + i % 40000));
    call->req.set_parameter_count(5'000'000);
    auto& stub = *stubs[static_cast<size_t>(i) % stubs.size()];
    stub.async()->Join(&call->ctx, &call->req, &call->resp, [&, call, i](grpc::Status s) {
      std::lock_guard<std::mutex> lock(mu);
      if (s.ok()) {
        m.ids[static_cast<size_t>(i)] = call->resp.member_id();
        m.secrets[static_cast<size_t>(i)] = call->resp.member_secret();
        ++m.joined;
      } else if (failures++ < 5) {  // the first few only
        std::fprintf(stderr, "join %d failed: %s\n", i, s.error_message().c_str());
      }
      --in_flight;
      ++done;
      delete call;
      cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done == n; });
  return m;
}

struct HeartbeatResult {
  std::vector<double> latencies_ms;
  int64_t sent = 0, errors = 0, unfinished = 0;
  double seconds = 0, cpu_percent = 0;
  std::string first_error;
};

// Every joined member heartbeats once per `interval_ms` (member i at offset i*interval/N) for
// `seconds`; waits at most 10 s for the last replies.
HeartbeatResult Heartbeats(std::vector<std::unique_ptr<v1::WorkerService::Stub>>& stubs,
                           const Members& m, const Settings& s) {
  HeartbeatResult r;
  std::mutex mu;
  std::atomic<int64_t> in_flight{0}, errors{0};
  const int n = static_cast<int>(m.ids.size());
  r.latencies_ms.reserve(static_cast<size_t>(n) * static_cast<size_t>(s.seconds) * 1000 /
                             static_cast<size_t>(s.interval_ms) +
                         16);
  const double per_ms = static_cast<double>(n) / s.interval_ms;
  const double cpu_before = ProcessCpuSeconds();
  const auto start = SteadyClock::now();
  const auto end = start + milliseconds(static_cast<int64_t>(s.seconds) * 1000);
  int64_t next = 0;
  while (SteadyClock::now() < end) {
    const int64_t due = static_cast<int64_t>(Ms(SteadyClock::now() - start) * per_ms);
    for (; next < due; ++next) {
      const size_t i = static_cast<size_t>(next % n);
      if (m.ids[i].empty()) continue;
      struct Call {
        grpc::ClientContext ctx;
        v1::HeartbeatRequest req;
        v1::HeartbeatResponse resp;
        SteadyClock::time_point start;
      };
      auto* call = new Call;
      call->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      call->ctx.AddMetadata(rpc::kMemberSecretMetadata, m.secrets[i]);
      call->req.set_member_id(m.ids[i]);
      call->req.set_step(next / n);
      call->req.mutable_metrics()->set_loss(1.0);
      call->start = SteadyClock::now();
      ++in_flight;
      ++r.sent;
      stubs[i % stubs.size()]->async()->Heartbeat(
          &call->ctx, &call->req, &call->resp, [&, call](grpc::Status st) {
            const double ms = Ms(SteadyClock::now() - call->start);
            {
              std::lock_guard<std::mutex> lock(mu);
              if (st.ok())
                r.latencies_ms.push_back(ms);
              else if (errors++ == 0)
                r.first_error = std::to_string(st.error_code()) + ": " + st.error_message();
            }
            --in_flight;
            delete call;
          });
    }
    std::this_thread::sleep_for(milliseconds(1));
  }
  r.seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  r.cpu_percent = 100.0 * (ProcessCpuSeconds() - cpu_before) / r.seconds;
  const auto drain = SteadyClock::now() + std::chrono::seconds(10);
  while (in_flight > 0 && SteadyClock::now() < drain) std::this_thread::sleep_for(milliseconds(5));
  r.unfinished = in_flight.load();
  if (r.unfinished > 0) {
    // Callbacks still pending reference this frame's locals: wait them out (each call's own
    // deadline is 5 s, so this ends).
    while (in_flight > 0) std::this_thread::sleep_for(milliseconds(5));
  }
  std::lock_guard<std::mutex> lock(mu);
  r.errors = errors.load();
  return r;
}

nlohmann::json RunConfiguration(const std::string& transport, int members, const Settings& s,
                                const std::string& certs, int* channel_ids) {
  const bool tls = transport == "mtls";
  const std::string dir = s.dir + "/" + transport + "-" + std::to_string(members);
  RealClock clock;
  coordinator::CoordinatorOptions opts;
  opts.state_dir = dir + "/state";
  opts.heartbeat_interval_ms = s.interval_ms;
  v1::JobSpec job;
  job.set_name("heartbeat-tls-bench");
  job.mutable_teacher()->set_preset("fm-teacher");
  job.mutable_student()->set_preset("fm-student");
  job.set_steps(1000);
  // The coordinator admits at most max_workers members (a join flood beyond gets
  // RESOURCE_EXHAUSTED): room for every simulated member.
  job.mutable_elastic()->set_min_workers(1);
  job.mutable_elastic()->set_max_workers(members);
  auto c = coordinator::Coordinator::Create(opts, job, &clock);
  if (!c.ok()) {
    std::fprintf(stderr, "coordinator: %s\n", c.status().ToString().c_str());
    std::exit(1);
  }
  (*c)->Start();
  coordinator::ServerSecurity server_security;
  rpc::ClientSecurity client_security;
  if (tls) {
    server_security.tls_cert = certs + "/coordinator.crt";
    server_security.tls_key = certs + "/coordinator.key";
    server_security.tls_ca = certs + "/ca.crt";
    client_security.tls_cert = certs + "/worker.crt";
    client_security.tls_key = certs + "/worker.key";
    client_security.tls_ca = certs + "/ca.crt";
  }
  auto server = coordinator::CoordinatorServer::Start(c->get(), "127.0.0.1:0", server_security);
  if (!server.ok()) {
    std::fprintf(stderr, "server: %s\n", server.status().ToString().c_str());
    std::exit(1);
  }
  const std::string address = "127.0.0.1:" + std::to_string((*server)->port());
  auto creds = rpc::MakeChannelCredentials(client_security);

  int handshake_failures = 0;
  const std::vector<double> handshakes =
      TimeHandshakes(address, creds, s.handshakes, *channel_ids, &handshake_failures);
  *channel_ids += s.handshakes;

  std::vector<std::unique_ptr<v1::WorkerService::Stub>> stubs;
  for (int i = 0; i < s.channels; ++i)
    stubs.push_back(v1::WorkerService::NewStub(NewChannel(address, creds, (*channel_ids)++)));
  const auto join_start = SteadyClock::now();
  const Members m = JoinMembers(stubs, members, s.join_window);
  const double join_seconds =
      std::chrono::duration<double>(SteadyClock::now() - join_start).count();
  const std::string load_before = LoadAverage();
  HeartbeatResult hb = Heartbeats(stubs, m, s);
  const std::string load_after = LoadAverage();

  nlohmann::json j{{"bench", "heartbeat_tls"},
                   {"transport", transport},
                   {"members", members},
                   {"joined", m.joined},
                   {"join_seconds", join_seconds},
                   {"channels", s.channels},
                   {"interval_ms", s.interval_ms},
                   {"seconds", hb.seconds},
                   {"heartbeats_sent", hb.sent},
                   {"heartbeats_ok", hb.latencies_ms.size()},
                   {"errors", hb.errors},
                   {"unfinished", hb.unfinished},
                   {"p50_ms", Percentile(hb.latencies_ms, 0.50)},
                   {"p99_ms", Percentile(hb.latencies_ms, 0.99)},
                   {"max_ms", Max(hb.latencies_ms)},
                   {"handshakes", handshakes.size()},
                   {"handshake_failures", handshake_failures},
                   {"handshake_p50_ms", Percentile(handshakes, 0.50)},
                   {"handshake_p99_ms", Percentile(handshakes, 0.99)},
                   {"handshake_max_ms", Max(handshakes)},
                   {"process_cpu_percent", hb.cpu_percent},
                   {"loadavg_before", load_before},
                   {"loadavg_after", load_after},
                   {"cores", std::thread::hardware_concurrency()}};
  if (!hb.first_error.empty()) j["first_error"] = hb.first_error;
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
  stubs.clear();
  (*server)->Shutdown(500);
  (*c)->Shutdown();
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  std::vector<std::string> member_counts;
  ArgParser args("heartbeat_tls_bench [flags]",
                 "Heartbeat latency and handshake time of an in-process coordinator, insecure "
                 "and with mutual TLS in the same run; prints one JSON object per "
                 "configuration and a side-by-side summary.");
  args.AddStringList("members", &member_counts,
                     "simulated members (repeatable; default 1000 and 10000)");
  args.AddInt("seconds", &s.seconds, "length of each heartbeat phase");
  args.AddInt("interval-ms", &s.interval_ms, "the job's heartbeat interval (each member's)");
  args.AddInt("channels", &s.channels, "client connections the members share");
  args.AddInt("handshakes", &s.handshakes, "fresh connections timed per configuration");
  args.AddInt("join-window", &s.join_window, "Join calls in flight at once");
  args.AddString("dir", &s.dir, "scratch directory (default: a new one under /tmp)");
  args.AddLogLevel("warning");
  if (auto code = args.ParseOrExitCode(argc, argv, "heartbeat_tls_bench")) return *code;
  if (member_counts.empty()) member_counts = {"1000", "10000"};
  if (s.seconds <= 0 || s.interval_ms <= 0 || s.channels <= 0 || s.handshakes < 0 ||
      s.join_window <= 0) {
    std::fprintf(stderr,
                 "heartbeat_tls_bench: --seconds, --interval-ms, --channels and "
                 "--join-window must be > 0, --handshakes >= 0\n");
    return 2;
  }
  if (s.dir.empty()) {
    char tmpl[] = "/tmp/retort_tls_bench_XXXXXX";
    s.dir = mkdtemp(tmpl);
  }
  tools::CertOptions certs;
  certs.out_dir = s.dir + "/certs";
  if (auto written = tools::GenerateClusterCertificates(certs); !written.ok()) {
    std::fprintf(stderr, "certificates: %s\n", written.status().ToString().c_str());
    return 1;
  }
  int channel_ids = 0;
  nlohmann::json summary{{"bench", "heartbeat_tls_summary"}, {"configurations", {}}};
  bool all_met = true;
  for (const std::string& count : member_counts) {
    int members = 0;
    try {
      members = std::stoi(count);
    } catch (const std::exception&) {
    }
    if (members <= 0) {
      std::fprintf(stderr, "heartbeat_tls_bench: --members=%s is not a positive number\n",
                   count.c_str());
      return 2;
    }
    const nlohmann::json plain =
        RunConfiguration("insecure", members, s, certs.out_dir, &channel_ids);
    const nlohmann::json mtls = RunConfiguration("mtls", members, s, certs.out_dir, &channel_ids);
    const double ratio = plain["p99_ms"].get<double>() > 0
                             ? mtls["p99_ms"].get<double>() / plain["p99_ms"].get<double>()
                             : 0;
    const bool within_2x = ratio > 0 && ratio <= 2.0;
    const bool under_50ms = mtls["p99_ms"].get<double>() < 50.0;
    const bool clean = plain["errors"] == 0 && mtls["errors"] == 0 && plain["joined"] == members &&
                       mtls["joined"] == members;
    all_met = all_met && within_2x && under_50ms && clean;
    summary["configurations"].push_back({{"members", members},
                                         {"insecure_p50_ms", plain["p50_ms"]},
                                         {"mtls_p50_ms", mtls["p50_ms"]},
                                         {"insecure_p99_ms", plain["p99_ms"]},
                                         {"mtls_p99_ms", mtls["p99_ms"]},
                                         {"insecure_max_ms", plain["max_ms"]},
                                         {"mtls_max_ms", mtls["max_ms"]},
                                         {"insecure_handshake_p50_ms", plain["handshake_p50_ms"]},
                                         {"mtls_handshake_p50_ms", mtls["handshake_p50_ms"]},
                                         {"insecure_handshake_p99_ms", plain["handshake_p99_ms"]},
                                         {"mtls_handshake_p99_ms", mtls["handshake_p99_ms"]},
                                         {"p99_ratio", ratio},
                                         {"p99_within_2x", within_2x},
                                         {"mtls_p99_under_50ms", under_50ms},
                                         {"no_errors", clean}});
  }
  summary["targets_met"] = all_met;
  std::printf("%s\n", summary.dump().c_str());
  // Side by side, for people.
  std::fprintf(stderr, "\n%8s  %-9s %9s %9s %9s %13s %13s\n", "members", "transport", "p50 ms",
               "p99 ms", "max ms", "handshake p50", "handshake p99");
  for (const auto& row : summary["configurations"]) {
    for (const char* t : {"insecure", "mtls"}) {
      const std::string p = t;
      std::fprintf(stderr, "%8d  %-9s %9.3f %9.3f %9.3f %13.3f %13.3f\n", row["members"].get<int>(),
                   t, row[p + "_p50_ms"].get<double>(), row[p + "_p99_ms"].get<double>(),
                   row[p + "_max_ms"].get<double>(), row[p + "_handshake_p50_ms"].get<double>(),
                   row[p + "_handshake_p99_ms"].get<double>());
    }
    std::fprintf(stderr, "%8s  mTLS/insecure p99 = %.2fx (target <= 2x), mTLS p99 %s 50 ms\n", "",
                 row["p99_ratio"].get<double>(),
                 row["mtls_p99_under_50ms"].get<bool>() ? "<" : ">=");
  }
  return 0;
}

// Coordinator + workers as real processes on 127.0.0.1: forming generations, kill -9 of a worker
// and of the coordinator, graceful leave, and the retortctl CLI.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <regex>
#include <thread>

#include "common/file_util.h"
#include "retort/v1/retort.grpc.pb.h"
#include "testing/coordinator_process.h"
#include "testing/subprocess.h"

namespace retort {
namespace {

using std::chrono::milliseconds;
using testing::BinaryPath;
using testing::Subprocess;
using testing::WaitFor;

constexpr int64_t kEvictionMs = 2000;
constexpr int64_t kSettleMs = 200;

class MultiProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("retort_mp");
    std::ofstream(dir_ + "/job.yaml")
        << "name: mp\nteacher: {preset: fm-teacher}\nstudent: {preset: fm-student}\n"
           "steps: 100\nelastic: {min_workers: 1, max_workers: 8}\n";
    const std::string error = StartCoordinator(0);
    ASSERT_TRUE(error.empty()) << error;
    address_ = "127.0.0.1:" + std::to_string(port_);
    control_ = v1::ControlService::NewStub(
        grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  }

  // Starts the coordinator on `port` (0: any, learned from its port file and kept in port_),
  // with `extra_flags` after the usual ones; returns why it failed, or "".
  std::string StartCoordinator(int port, const std::vector<std::string>& extra_flags = {}) {
    std::vector<std::string> flags = {
        "--state-dir=" + dir_ + "/state", "--job=" + dir_ + "/job.yaml",
        "--eviction-timeout-ms=" + std::to_string(kEvictionMs), "--heartbeat-interval-ms=250",
        "--settle-ms=" + std::to_string(kSettleMs),
        // The workers here never train: the dataset need not exist.
        "--no-check-paths"};
    flags.insert(flags.end(), extra_flags.begin(), extra_flags.end());
    testing::LaunchedCoordinator c =
        testing::LaunchCoordinator({.flags = flags,
                                    .port_file = dir_ + "/port",
                                    .log_path = dir_ + "/coordinator.log",
                                    .port = port,
                                    .timeout = milliseconds(10000)});
    coordinator_ = std::move(c.process);
    port_ = c.port;
    return c.error;
  }

  void StartWorkers(int n, const std::vector<std::string>& extra_args = {}) {
    for (int i = 0; i < n; ++i) {
      std::vector<std::string> argv{BinaryPath("tools/retort-worker"),
                                    "--coordinator=" + address_,
                                    "--node=node" + std::to_string(i / 2),
                                    "--local-rank=" + std::to_string(i % 2),
                                    "--parameter-count=1000",
                                    "--rpc-timeout-ms=1000",
                                    "--no-train"};
      argv.insert(argv.end(), extra_args.begin(), extra_args.end());
      workers_.push_back(std::make_unique<Subprocess>(
          argv, dir_ + "/worker" + std::to_string(workers_.size()) + ".log"));
    }
  }

  std::optional<v1::StatusResponse> Status() {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(1000));
    v1::StatusResponse r;
    if (!control_->Status(&ctx, v1::StatusRequest(), &r).ok()) return std::nullopt;
    return r;
  }

  // Highest generation number a worker log reports having seen.
  static uint64_t LoggedGeneration(const Subprocess& w) {
    static const std::regex re("GENERATION number=(\\d+)");
    uint64_t best = 0;
    std::string log = w.Log();
    for (std::sregex_iterator it(log.begin(), log.end(), re), end; it != end; ++it)
      best = std::max<uint64_t>(best, std::stoull((*it)[1]));
    return best;
  }

  bool FormedWith(int members, uint64_t* generation) {
    auto s = Status();
    if (!s || s->members_size() != members || s->state() != v1::JOB_STATE_RUNNING) return false;
    for (int i = 0; i < members; ++i)
      if (s->members(i).rank() != i) return false;
    *generation = s->generation();
    return true;
  }

  std::string Logs() {
    std::string all = "--- coordinator\n" + coordinator_->Log();
    for (auto& w : workers_) all += "--- " + w->log_path() + "\n" + w->Log();
    return all;
  }

  std::string dir_;
  int port_ = 0;
  std::string address_;
  std::unique_ptr<Subprocess> coordinator_;
  std::vector<std::unique_ptr<Subprocess>> workers_;
  std::unique_ptr<v1::ControlService::Stub> control_;
};

TEST_F(MultiProcessTest, ThreeWorkersFormAGeneration) {
  StartWorkers(3);
  uint64_t gen = 0;
  ASSERT_TRUE(WaitFor([&] { return FormedWith(3, &gen); }, milliseconds(10000))) << Logs();
  for (auto& w : workers_)
    EXPECT_TRUE(WaitFor([&] { return LoggedGeneration(*w) == gen; }, milliseconds(3000)))
        << w->Log();
  auto s = Status();
  EXPECT_EQ(s->members(0).node(), "node0");
  EXPECT_EQ(s->members(1).node(), "node0");
  EXPECT_EQ(s->members(2).node(), "node1");
}

TEST_F(MultiProcessTest, KillNineWorkerSurvivorsSeeNewGenerationWithinEvictionDeadline) {
  StartWorkers(3);
  uint64_t gen = 0;
  ASSERT_TRUE(WaitFor([&] { return FormedWith(3, &gen); }, milliseconds(10000))) << Logs();
  auto killed_at = std::chrono::steady_clock::now();
  workers_[1]->Signal(SIGKILL);
  // Deadline: eviction timeout + settle + one tick, with 1 s of slack for a loaded machine.
  auto deadline = milliseconds(kEvictionMs + kSettleMs + 1000);
  uint64_t next = 0;
  ASSERT_TRUE(WaitFor([&] { return FormedWith(2, &next) && next > gen; }, deadline)) << Logs();
  for (int i : {0, 2})
    EXPECT_TRUE(WaitFor([&] { return LoggedGeneration(*workers_[i]) >= next; }, milliseconds(500)))
        << Logs();
  auto took = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - killed_at)
                  .count();
  EXPECT_LE(took, deadline.count());
  std::cout << "[ measured ] kill -9 to survivors' new generation: " << took << " ms\n";
}

TEST_F(MultiProcessTest, KillNineCoordinatorRestartWorkersRejoinUnderLargerGeneration) {
  StartWorkers(3);
  uint64_t gen = 0;
  ASSERT_TRUE(WaitFor([&] { return FormedWith(3, &gen); }, milliseconds(10000))) << Logs();
  coordinator_->Signal(SIGKILL);
  ASSERT_TRUE(coordinator_->Wait(milliseconds(5000)).has_value());
  std::this_thread::sleep_for(milliseconds(500));  // workers notice the coordinator is away
  for (auto& w : workers_)
    EXPECT_TRUE(w->Running()) << "workers keep running while the coordinator is away";
  ASSERT_EQ(StartCoordinator(port_), "");
  uint64_t next = 0;
  ASSERT_TRUE(WaitFor([&] { return FormedWith(3, &next); }, milliseconds(15000))) << Logs();
  EXPECT_GT(next, gen);
  for (auto& w : workers_)
    EXPECT_TRUE(WaitFor([&] { return LoggedGeneration(*w) == next; }, milliseconds(3000)))
        << Logs();
}

// A coordinator that never comes back: workers give up after --rejoin-timeout-ms with a
// message that says so, instead of retrying forever.
TEST_F(MultiProcessTest, WorkersGiveUpACoordinatorThatStaysAwayAfterTheRejoinTimeout) {
  constexpr int64_t kRejoinMs = 1500;
  StartWorkers(2, {"--rejoin-timeout-ms=" + std::to_string(kRejoinMs)});
  uint64_t gen = 0;
  ASSERT_TRUE(WaitFor([&] { return FormedWith(2, &gen); }, milliseconds(10000))) << Logs();
  coordinator_->Signal(SIGKILL);
  ASSERT_TRUE(coordinator_->Wait(milliseconds(5000)).has_value());
  const auto killed_at = std::chrono::steady_clock::now();
  for (auto& w : workers_) {
    // The timeout, plus a heartbeat interval and an RPC deadline to notice, plus slack.
    auto rc = w->Wait(milliseconds(kRejoinMs + 250 + 1000 + 3000));
    ASSERT_TRUE(rc.has_value()) << "a worker kept trying to reach a dead coordinator\n" << Logs();
    EXPECT_NE(*rc, 0) << Logs();
    EXPECT_NE(w->Log().find("stayed unreachable for 1500 ms (--rejoin-timeout-ms)"),
              std::string::npos)
        << Logs();
  }
  const auto took =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - killed_at);
  EXPECT_GE(took.count(), kRejoinMs - 500) << "gave up before the timeout";
  std::cout << "[ measured ] coordinator killed to both workers giving up: " << took.count()
            << " ms (rejoin timeout " << kRejoinMs << " ms)\n";
}

TEST_F(MultiProcessTest, SigtermWorkerLeavesCleanly) {
  StartWorkers(2);
  uint64_t gen = 0;
  ASSERT_TRUE(WaitFor([&] { return FormedWith(2, &gen); }, milliseconds(10000))) << Logs();
  workers_[0]->Signal(SIGTERM);
  auto rc = workers_[0]->Wait(milliseconds(5000));
  ASSERT_TRUE(rc.has_value()) << Logs();
  EXPECT_EQ(*rc, 0);
  EXPECT_NE(workers_[0]->Log().find("left the job (SIGTERM)"), std::string::npos) << Logs();
  uint64_t next = 0;
  // Leaving is immediate (no eviction wait): only the settle time.
  EXPECT_TRUE(WaitFor([&] { return FormedWith(1, &next); }, milliseconds(kSettleMs + 1000)))
      << Logs();
}

// --signal-exit-code (what Kubernetes Jobs need to retry an evicted pod rather than count it
// done): a signal mid-job exits with it; a drain still exits 0; the coordinator's default stays 0.
TEST_F(MultiProcessTest, SignalExitCodeMarksProcessesStoppedBeforeTheirJobEnded) {
  StartWorkers(3, {"--signal-exit-code=143"});
  uint64_t gen = 0;
  ASSERT_TRUE(WaitFor([&] { return FormedWith(3, &gen); }, milliseconds(10000))) << Logs();
  workers_[0]->Signal(SIGTERM);
  auto rc = workers_[0]->Wait(milliseconds(5000));
  ASSERT_TRUE(rc.has_value()) << Logs();
  EXPECT_EQ(*rc, 143) << Logs();
  EXPECT_NE(workers_[0]->Log().find("left the job (SIGTERM)"), std::string::npos) << Logs();

  ASSERT_TRUE(WaitFor([&] { return FormedWith(2, &gen); }, milliseconds(kSettleMs + 5000)))
      << Logs();
  auto s = Status();
  ASSERT_TRUE(s.has_value());
  const std::string ctl = BinaryPath("tools/retortctl"), coord = "--coordinator=" + address_;
  std::string out;
  ASSERT_EQ(testing::RunCommand({ctl, coord, "drain", s->members(1).member_id()}, &out,
                                milliseconds(10000)),
            0)
      << out;
  int drained = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (int i : {1, 2})
          if (!workers_[i]->Running()) drained = i;
        return drained != 0;
      },
      milliseconds(5000)))
      << Logs();
  auto drc = workers_[drained]->Wait(milliseconds(1000));
  ASSERT_TRUE(drc.has_value());
  EXPECT_EQ(*drc, 0) << "a drained worker is done, whatever --signal-exit-code says\n" << Logs();

  coordinator_->Signal(SIGTERM);  // started without the flag: a requested stop
  auto crc = coordinator_->Wait(milliseconds(5000));
  ASSERT_TRUE(crc.has_value()) << Logs();
  EXPECT_EQ(*crc, 0) << Logs();
  ASSERT_TRUE(StartCoordinator(port_, {"--signal-exit-code=143"}).empty()) << Logs();
  ASSERT_TRUE(WaitFor([&] { return Status().has_value(); }, milliseconds(10000))) << Logs();
  coordinator_->Signal(SIGTERM);  // the job is still running: not done
  crc = coordinator_->Wait(milliseconds(5000));
  ASSERT_TRUE(crc.has_value()) << Logs();
  EXPECT_EQ(*crc, 143) << Logs();
}

// --linger-after-end-ms: after the job ended, a worker that turns up late (a restarted pod, one
// that waited for a place) learns it ended and exits 0 instead of waiting for a coordinator that
// is gone; a signal during the linger is not an interruption (the job has ended).
TEST_F(MultiProcessTest, LingeringCoordinatorSendsLateWorkersHomeAndExitsZeroOnASignal) {
  coordinator_->Signal(SIGKILL);
  ASSERT_TRUE(coordinator_->Wait(milliseconds(5000)).has_value());
  ASSERT_TRUE(
      StartCoordinator(port_, {"--linger-after-end-ms=20000", "--signal-exit-code=143"}).empty())
      << Logs();
  StartWorkers(1);
  uint64_t gen = 0;
  ASSERT_TRUE(WaitFor([&] { return FormedWith(1, &gen); }, milliseconds(10000))) << Logs();
  std::string out;
  ASSERT_EQ(
      testing::RunCommand({BinaryPath("tools/retortctl"), "--coordinator=" + address_, "stop"},
                          &out, milliseconds(10000)),
      0)
      << out;
  auto rc = workers_[0]->Wait(milliseconds(5000));
  ASSERT_TRUE(rc.has_value()) << Logs();
  EXPECT_EQ(*rc, 0) << Logs();
  ASSERT_TRUE(WaitFor(
      [&] { return coordinator_->Log().find("answering late workers") != std::string::npos; },
      milliseconds(5000)))
      << Logs();

  StartWorkers(1);  // late
  rc = workers_[1]->Wait(milliseconds(10000));
  ASSERT_TRUE(rc.has_value()) << "a late worker kept waiting\n" << Logs();
  EXPECT_EQ(*rc, 0) << Logs();
  EXPECT_NE(workers_[1]->Log().find("the job is already stopped; nothing to do"), std::string::npos)
      << Logs();
  EXPECT_TRUE(coordinator_->Running()) << "the coordinator left before its linger\n" << Logs();

  coordinator_->Signal(SIGTERM);
  auto crc = coordinator_->Wait(milliseconds(5000));
  ASSERT_TRUE(crc.has_value()) << Logs();
  EXPECT_EQ(*crc, 0) << "the job had ended: a signal then is no interruption\n" << Logs();
}

TEST_F(MultiProcessTest, RetortctlStatusJsonDrainStopAndErrors) {
  StartWorkers(2);
  uint64_t gen = 0;
  ASSERT_TRUE(WaitFor([&] { return FormedWith(2, &gen); }, milliseconds(10000))) << Logs();
  const std::string ctl = BinaryPath("tools/retortctl"), coord = "--coordinator=" + address_;
  std::string out;
  ASSERT_EQ(testing::RunCommand({ctl, coord, "status", "--json"}, &out, milliseconds(10000)), 0)
      << out;
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["generation"].get<uint64_t>(), gen);
  EXPECT_EQ(j["state"], "running");
  ASSERT_EQ(j["members"].size(), 2u);
  EXPECT_EQ(j["members"][0]["rank"], 0);
  EXPECT_EQ(j["members"][0]["node"], "node0");
  std::string victim = j["members"][1]["id"];

  ASSERT_EQ(testing::RunCommand({ctl, coord, "status"}, &out, milliseconds(10000)), 0) << out;
  EXPECT_NE(out.find("RANK"), std::string::npos);
  EXPECT_NE(out.find(victim), std::string::npos);

  EXPECT_EQ(
      testing::RunCommand({ctl, coord, "scale", "--min=3", "--max=2"}, &out, milliseconds(10000)),
      1);
  EXPECT_NE(out.find("INVALID_ARGUMENT"), std::string::npos) << out;
  EXPECT_EQ(testing::RunCommand({ctl, coord, "drain", "w0-0"}, &out, milliseconds(10000)), 1);
  EXPECT_NE(out.find("NOT_FOUND"), std::string::npos) << out;
  EXPECT_EQ(testing::RunCommand({ctl, coord, "frobnicate"}, &out, milliseconds(10000)), 2);
  EXPECT_EQ(testing::RunCommand({ctl, "--coordinator=127.0.0.1:1", "--timeout-ms=500", "status"},
                                &out, milliseconds(5000)),
            1);
  EXPECT_NE(out.find("UNAVAILABLE"), std::string::npos) << out;

  ASSERT_EQ(testing::RunCommand({ctl, coord, "drain", victim}, &out, milliseconds(10000)), 0)
      << out;
  auto rc = workers_[1]->Wait(milliseconds(5000));
  ASSERT_TRUE(rc.has_value()) << Logs();
  EXPECT_EQ(*rc, 0);

  ASSERT_EQ(testing::RunCommand({ctl, coord, "stop"}, &out, milliseconds(10000)), 0) << out;
  rc = workers_[0]->Wait(milliseconds(5000));
  ASSERT_TRUE(rc.has_value()) << Logs();
  EXPECT_EQ(*rc, 0);
  auto crc = coordinator_->Wait(milliseconds(5000));
  ASSERT_TRUE(crc.has_value()) << Logs();
  EXPECT_EQ(*crc, 0);
}

TEST_F(MultiProcessTest, BinariesRejectBadFlagsAndPrintHelp) {
  std::string out;
  for (const char* bin : {"tools/retort-coordinator", "tools/retort-worker", "tools/retortctl"}) {
    EXPECT_EQ(testing::RunCommand({BinaryPath(bin), "--help"}, &out, milliseconds(5000)), 0) << bin;
    EXPECT_NE(out.find("Usage:"), std::string::npos) << bin;
    EXPECT_EQ(testing::RunCommand({BinaryPath(bin), "--no-such-flag=1"}, &out, milliseconds(5000)),
              2)
        << bin;
    EXPECT_NE(out.find("unknown flag --no-such-flag"), std::string::npos) << out;
  }
  std::ofstream(dir_ + "/bad.yaml")
      << "teacher: {preset: fm-teacher}\nstudent: {preset: fm-student}\nstpes: 3\n";
  EXPECT_EQ(testing::RunCommand({BinaryPath("tools/retort-coordinator"),
                                 "--state-dir=" + dir_ + "/s2", "--job=" + dir_ + "/bad.yaml"},
                                &out, milliseconds(5000)),
            2);
  EXPECT_NE(out.find("stpes"), std::string::npos) << out;
  EXPECT_FALSE(PathExists(dir_ + "/s2/state.json")) << "a bad spec must not create state";
  // Without TLS the coordinator serves loopback only, unless told --insecure-listen.
  EXPECT_EQ(
      testing::RunCommand({BinaryPath("tools/retort-coordinator"), "--state-dir=" + dir_ + "/s3",
                           "--job=" + dir_ + "/job.yaml", "--listen=0.0.0.0:0", "--no-check-paths"},
                          &out, milliseconds(5000)),
      2);
  EXPECT_NE(out.find("--insecure-listen"), std::string::npos) << out;
  EXPECT_FALSE(PathExists(dir_ + "/s3/state.json"));
  // A worker's data plane binds the interface of its --data-address: one this host lacks is a
  // usage error naming it.
  EXPECT_EQ(testing::RunCommand({BinaryPath("tools/retort-worker"), "--coordinator=" + address_,
                                 "--data-address=203.0.113.77", "--join-timeout-ms=1000"},
                                &out, milliseconds(5000)),
            2);
  EXPECT_NE(out.find("203.0.113.77"), std::string::npos) << out;
#if RETORT_WORKER_WITH_TRAINER
  // An unknown same-host protocol policy is a usage error naming the choices.
  EXPECT_EQ(testing::RunCommand({BinaryPath("tools/retort-worker"), "--coordinator=" + address_,
                                 "--cma-policy=sometimes", "--join-timeout-ms=1000"},
                                &out, milliseconds(5000)),
            2);
  EXPECT_NE(out.find("--cma-policy"), std::string::npos) << out;
  EXPECT_NE(out.find("adaptive, always, never"), std::string::npos) << out;
#endif
}

}  // namespace
}  // namespace retort

// Multi-process tests: ranks are separate processes (fork/exec of collectives_rank_main)
// bootstrapped through a FileStore, on loopback. Includes the fault test: kill -9 one rank in
// the middle of a collective and check the survivors fail within 2x the operation timeout.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/deadline.h"
#include "common/file_util.h"
#include "common/process.h"
#include "testing/subprocess.h"

namespace retort::collectives::testing {
namespace {

const std::string kRankBinary =
    std::string(RETORT_BINARY_DIR) + "/tests/collectives/collectives_rank_main";

pid_t Spawn(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kRankBinary};
  argv.insert(argv.end(), args.begin(), args.end());
  StatusOr<SpawnedProcess> spawned = SpawnProcess(argv);
  EXPECT_TRUE(spawned.ok()) << spawned.status();
  return spawned.ok() ? spawned->pid : -1;
}

// Waits for `pid` until `deadline`; returns its exit code, 128+signal, or -1 on timeout (the
// process is then killed).
int WaitExitOrKill(pid_t pid, Deadline deadline) {
  if (pid <= 0) return -1;
  if (auto code = WaitExit(pid, deadline)) return *code;
  KillAndWait(pid, Deadline::AfterMs(5000));
  return -1;
}

std::vector<pid_t> SpawnWorld(int world, const std::string& store_dir,
                              const std::vector<std::string>& extra) {
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> args = {"--rank=" + std::to_string(r),
                                     "--world=" + std::to_string(world),
                                     "--store-dir=" + store_dir};
    args.insert(args.end(), extra.begin(), extra.end());
    pids.push_back(Spawn(args));
  }
  return pids;
}

void ExpectAllSucceed(int world, const std::vector<std::string>& extra) {
  const std::string dir = retort::testing::MakeTempDir("retort_collectives");
  auto pids = SpawnWorld(world, dir + "/store", extra);
  const Deadline deadline = Deadline::AfterMs(120000);
  for (int r = 0; r < world; ++r) EXPECT_EQ(WaitExitOrKill(pids[r], deadline), 0) << "rank " << r;
}

TEST(UcxMultiProcessTest, TwoRanksIncluding64MiB) { ExpectAllSucceed(2, {"--big"}); }

TEST(UcxMultiProcessTest, ThreeRanks) { ExpectAllSucceed(3, {}); }

TEST(UcxMultiProcessTest, FourRanksHierarchicalTwoNodesOfTwo) {
  ExpectAllSucceed(4, {"--backend=hierarchical", "--local-size=2"});
}

void KillOneRankMidCollective(int world, int victim, const std::vector<std::string>& extra) {
  const int timeout_ms = 3000;
  const std::string dir = retort::testing::MakeTempDir("retort_collectives");
  std::vector<std::string> args = {"--mode=loop", "--status-dir=" + dir,
                                   "--timeout-ms=" + std::to_string(timeout_ms),
                                   "--count=" + std::to_string(4 << 20), "--loop-seconds=60"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto pids = SpawnWorld(world, dir + "/store", args);
  // Wait until every rank has completed an all-reduce, so the kill lands mid-loop.
  const Deadline started = Deadline::AfterMs(60000);
  for (int r = 0; r < world; ++r) {
    const std::string progress = dir + "/rank" + std::to_string(r) + ".progress";
    while (!PathExists(progress) && !started.Expired()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_TRUE(PathExists(progress)) << "rank " << r << " never completed an all-reduce";
  }
  ASSERT_EQ(kill(pids[victim], SIGKILL), 0);
  const auto killed_at = SteadyClock::now();
  EXPECT_EQ(WaitExitOrKill(pids[victim], Deadline::AfterMs(5000)), 128 + SIGKILL);
  for (int r = 0; r < world; ++r) {
    if (r == victim) continue;
    const int code =
        WaitExitOrKill(pids[r], Deadline::After(std::chrono::milliseconds(4 * timeout_ms)));
    const auto elapsed = SteadyClock::now() - killed_at;
    EXPECT_EQ(code, 3) << "rank " << r << " did not report a failed collective";
    EXPECT_LT(elapsed, std::chrono::milliseconds(2 * timeout_ms)) << "rank " << r;
    auto error = ReadFileToString(dir + "/rank" + std::to_string(r) + ".error");
    ASSERT_TRUE(error.ok()) << "rank " << r;
    const bool names_failure = error->find("UNAVAILABLE") != std::string::npos ||
                               error->find("DEADLINE_EXCEEDED") != std::string::npos;
    EXPECT_TRUE(names_failure) << "rank " << r << ": " << *error;
    // A rank that saw the connection reset names the victim (and nobody else) as failed.
    auto failed = ReadFileToString(dir + "/rank" + std::to_string(r) + ".failed_peers");
    ASSERT_TRUE(failed.ok()) << "rank " << r;
    if (error->find("UNAVAILABLE") != std::string::npos &&
        error->find("rank " + std::to_string(victim) + " failed") != std::string::npos)
      EXPECT_EQ(*failed, std::to_string(victim) + "\n") << "rank " << r;
    else
      EXPECT_TRUE(failed->empty() || *failed == std::to_string(victim) + "\n")
          << "rank " << r << ": " << *failed;
    std::cerr << "rank " << r << " failed after "
              << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()
              << " ms: " << *error << "\n";
  }
}

TEST(UcxMultiProcessFaultTest, KillOneOfThreeRanksMidAllReduce) {
  KillOneRankMidCollective(3, 1, {});
}

TEST(UcxMultiProcessFaultTest, KillOneOfFourRanksMidHierarchicalAllReduce) {
  KillOneRankMidCollective(4, 2, {"--backend=hierarchical", "--local-size=2"});
}

}  // namespace
}  // namespace retort::collectives::testing

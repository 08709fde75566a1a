// The test-hosts harness itself (testing/test_hosts.h): hosts are separate machines as far as
// names, process tables and the network go; a link cut really cuts; a host kill takes every
// process of the host; what a crashed run left behind is removed. Uses retort-coordinator and
// retortctl as the server and client of the connectivity checks (no training).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "multihost/multihost_fixture.h"

namespace retort::multihost {
namespace {

using std::chrono::milliseconds;

class TestHostsTest : public MultiHostTest {};

TEST_F(TestHostsTest, HostsHaveTheirOwnNameProcessTableAndAddress) {
  auto hosts = MakeHosts(2);
  if (!hosts) GTEST_SKIP() << skip_reason();
  std::string pid_namespaces;
  for (int h = 0; h < 2; ++h) {
    const std::string log = dir() + "/probe" + std::to_string(h) + ".log";
    auto p = hosts->Spawn(h,
                          {"/bin/sh", "-c",
                           "echo name=$(hostname); echo init=$(cat /proc/1/comm); "
                           "echo pidns=$(readlink /proc/self/ns/pid); echo addr=$(hostname -I)"},
                          log);
    ASSERT_EQ(p->Wait(milliseconds(20000)).value_or(-1), 0) << p->Log();
    const std::string out = p->Log();
    EXPECT_NE(out.find("name=" + hosts->name(h) + "\n"), std::string::npos) << out;
    // PID 1 of the host is its own init, not the machine's.
    EXPECT_NE(out.find("init=sleep\n"), std::string::npos) << out;
    EXPECT_NE(out.find("addr=" + hosts->address(h) + "\n"), std::string::npos) << out;
    const size_t at = out.find("pidns=");
    ASSERT_NE(at, std::string::npos) << out;
    const std::string ns = out.substr(at, out.find('\n', at) - at);
    EXPECT_EQ(pid_namespaces.find(ns), std::string::npos) << "hosts share " << ns;
    pid_namespaces += ns + ";";
  }
  EXPECT_NE(hosts->address(0), hosts->address(1));
}

TEST_F(TestHostsTest, LinkDownCutsAHostOffAndLinkUpHealsIt) {
  auto hosts = MakeHosts(2);
  if (!hosts) GTEST_SKIP() << skip_reason();
  // A coordinator on host 0 (no workers); retortctl from host 1 and from the test namespace.
  std::ofstream(dir() + "/job.yaml") << elastic_testing::ScenarioJobYaml({}, dir() + "/out");
  const std::string address = hosts->address(0) + ":7070";
  int ctl_calls = 0;
  auto coordinator =
      hosts->Spawn(0,
                   {testing::BinaryPath("tools/retort-coordinator"),
                    "--state-dir=" + dir() + "/state", "--job=" + dir() + "/job.yaml",
                    "--listen=" + address, "--insecure-listen", "--no-check-paths"},
                   dir() + "/coordinator.log");
  auto status_from = [&](int host) {
    std::vector<std::string> argv = {testing::BinaryPath("tools/retortctl"),
                                     "--coordinator=" + address, "--timeout-ms=1500", "status"};
    const std::string log = dir() + "/ctl-" + std::to_string(ctl_calls++) + ".log";
    auto p =
        host < 0 ? std::make_unique<testing::Subprocess>(argv, log) : hosts->Spawn(host, argv, log);
    return p->Wait(milliseconds(15000)).value_or(-1);
  };
  ASSERT_TRUE(testing::WaitFor([&] { return status_from(-1) == 0; }, milliseconds(30000)))
      << coordinator->Log();
  EXPECT_EQ(status_from(1), 0) << "host 1 does not reach host 0";

  std::string why;
  ASSERT_TRUE(hosts->SetLinkUp(1, false, &why)) << why;
  EXPECT_NE(status_from(1), 0) << "host 1 still reaches host 0 with its link down";
  EXPECT_EQ(status_from(-1), 0) << "cutting host 1 off must not cut host 0 off";
  ASSERT_TRUE(hosts->SetLinkUp(1, true, &why)) << why;
  EXPECT_TRUE(testing::WaitFor([&] { return status_from(1) == 0; }, milliseconds(30000)))
      << "host 1 does not reach host 0 after its link came back";
}

TEST_F(TestHostsTest, BlockedPathDropsTheTrafficOfTwoHostsOnly) {
  auto hosts = MakeHosts(3);
  if (!hosts) GTEST_SKIP() << skip_reason();
  std::ofstream(dir() + "/job.yaml") << elastic_testing::ScenarioJobYaml({}, dir() + "/out");
  const std::string address = hosts->address(0) + ":7070";
  auto coordinator =
      hosts->Spawn(0,
                   {testing::BinaryPath("tools/retort-coordinator"),
                    "--state-dir=" + dir() + "/state", "--job=" + dir() + "/job.yaml",
                    "--listen=" + address, "--insecure-listen", "--no-check-paths"},
                   dir() + "/coordinator.log");
  int ctl_calls = 0;
  auto status_from = [&](int host) {
    const std::string log = dir() + "/ctl-" + std::to_string(ctl_calls++) + ".log";
    auto p = hosts->Spawn(host,
                          {testing::BinaryPath("tools/retortctl"), "--coordinator=" + address,
                           "--timeout-ms=1500", "status"},
                          log);
    return p->Wait(milliseconds(15000)).value_or(-1);
  };
  ASSERT_TRUE(testing::WaitFor([&] { return status_from(1) == 0; }, milliseconds(30000)))
      << coordinator->Log();
  std::string why;
  ASSERT_TRUE(hosts->SetPathBlocked(0, 2, true, &why)) << why;
  EXPECT_NE(status_from(2), 0) << "host 2 still reaches host 0 with the path blocked";
  EXPECT_EQ(status_from(1), 0) << "blocking 0-2 must not cut host 1 off";
  ASSERT_TRUE(hosts->SetPathBlocked(0, 2, false, &why)) << why;
  EXPECT_TRUE(testing::WaitFor([&] { return status_from(2) == 0; }, milliseconds(30000)))
      << "host 2 does not reach host 0 after the path was unblocked";
}

// UCX sees two hosts as two machines: TCP over the host's eth0 between them, no shared memory
// and no CMA; inside one host shared memory (and CMA for large messages) as before.
TEST_F(TestHostsTest, UcxTalksTcpBetweenHostsAndSharedMemoryInsideOne) {
  const std::string bench = testing::BinaryPath("bench/collectives/collectives_bench");
  if (!std::filesystem::exists(bench))
    GTEST_SKIP() << bench << " not built (RETORT_BUILD_BENCH=OFF)";
  auto hosts = MakeHosts(2);
  if (!hosts) GTEST_SKIP() << skip_reason();
  // Ranks 0 and 1 on host 0, rank 2 on host 1.
  const int host_of_rank[] = {0, 0, 1};
  std::vector<std::unique_ptr<testing::Subprocess>> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.push_back(hosts->Spawn(
        host_of_rank[r],
        {bench, "--rank=" + std::to_string(r), "--ranks=3", "--store-dir=" + dir() + "/store",
         "--ops=all_reduce", "--min-bytes=1024", "--max-bytes=1024", "--print-transports"},
        dir() + "/rank" + std::to_string(r) + ".log"));
  for (auto& p : ranks) ASSERT_EQ(p->Wait(milliseconds(60000)).value_or(-1), 0) << p->Log();
  // Rank 0's description: one endpoint block per peer, rank 1 (same host) first.
  const std::string out = ranks[0]->Log();
  const size_t to_remote = out.find("rank 0 -> rank 2");
  ASSERT_NE(to_remote, std::string::npos) << out;
  const std::string local = out.substr(0, to_remote), remote = out.substr(to_remote);
  EXPECT_NE(remote.find("tcp/eth0"), std::string::npos) << remote;
  EXPECT_EQ(remote.find("sysv"), std::string::npos) << remote;
  EXPECT_NE(remote.find("cma off"), std::string::npos) << remote;
  EXPECT_NE(local.find("sysv"), std::string::npos) << local;
}

TEST_F(TestHostsTest, KillHostKillsEveryProcessOfTheHostAndNoOther) {
  auto hosts = MakeHosts(2);
  if (!hosts) GTEST_SKIP() << skip_reason();
  // Each says "started" once it runs inside its host (before that, nsenter is still entering).
  auto a = hosts->Spawn(1, {"/bin/sh", "-c", "echo started; exec sleep 600"}, dir() + "/a.log");
  auto b = hosts->Spawn(1, {"/bin/sh", "-c", "sleep 600 & echo started; wait"}, dir() + "/b.log");
  auto other =
      hosts->Spawn(0, {"/bin/sh", "-c", "echo started; exec sleep 600"}, dir() + "/other.log");
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        for (auto* p : {a.get(), b.get(), other.get()})
          if (p->Log().find("started") == std::string::npos) return false;
        return true;
      },
      milliseconds(20000)))
      << a->Log() << b->Log() << other->Log();
  hosts->KillHost(1);
  EXPECT_EQ(a->Wait(milliseconds(10000)).value_or(-1), 128 + SIGKILL);
  EXPECT_EQ(b->Wait(milliseconds(10000)).value_or(-1), 128 + SIGKILL);
  EXPECT_FALSE(hosts->alive(1));
  EXPECT_TRUE(other->Running()) << "a process of another host died with host 1";
  std::string why;
  ASSERT_TRUE(hosts->RestartHost(1, &why)) << why;
  auto again = hosts->Spawn(1, {"/bin/true"}, dir() + "/again.log");
  EXPECT_EQ(again->Wait(milliseconds(10000)).value_or(-1), 0) << again->Log();
}

TEST_F(TestHostsTest, ACrashedRunsLeftoversAreRemovedByTheNextHolderOfItsSlot) {
  std::string why;
  if (!testing::TestHosts::Available(&why)) GTEST_SKIP() << why;
  // A child process makes hosts and dies without tearing them down (like a crashed test).
  const std::string prefix_file = dir() + "/crashed-prefix", why_file = dir() + "/crashed-why";
  pid_t child = fork();
  if (child == 0) {
    auto leaked = testing::TestHosts::Create(2, dir() + "/crashed", &why).release();
    if (leaked)
      std::ofstream(prefix_file) << leaked->name(0).substr(0, leaked->name(0).size() - 2);
    else
      std::ofstream(why_file) << why;
    _exit(leaked ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child did not exit";
  // As every test-host test: where hosts cannot be made (Available() cannot foresee every
  // reason, e.g. inside a chroot), skip saying why.
  if (WEXITSTATUS(status) != 0) {
    std::string reason;
    std::getline(std::ifstream(why_file), reason, '\0');
    GTEST_SKIP() << "test hosts cannot be made here: " << reason;
  }
  std::string prefix;
  std::ifstream(prefix_file) >> prefix;
  ASSERT_FALSE(prefix.empty());
  ASSERT_TRUE(std::filesystem::exists("/run/netns/" + prefix + "h1"))
      << "the crashed run left nothing to clean up";
  auto hosts = MakeHosts(1);
  if (!hosts) GTEST_SKIP() << skip_reason();
  if (hosts->name(0).rfind(prefix, 0) != 0)
    GTEST_SKIP() << "another test process took slot " << prefix << " in between";
  EXPECT_FALSE(std::filesystem::exists("/run/netns/" + prefix + "h1"))
      << "the crashed run's second host is still there";
  EXPECT_FALSE(std::filesystem::exists("/sys/class/net/" + prefix + "v1"));
}

}  // namespace
}  // namespace retort::multihost

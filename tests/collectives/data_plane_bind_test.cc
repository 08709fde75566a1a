// The data plane binds only the interface of the worker's --data-address: InterfaceForAddress
// and a UCX worker with net_devices set, checked against the sockets this process listens on.
#include <dirent.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <ucm/api/ucm.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "collectives/net_interface.h"
#include "collectives/ucx/ucx_handles.h"

namespace retort::collectives {
namespace {

// Inodes of the sockets this process holds open.
std::set<std::string> OwnSocketInodes() {
  std::set<std::string> inodes;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return inodes;
  while (dirent* e = readdir(dir)) {
    char target[256] = {0};
    const std::string path = std::string("/proc/self/fd/") + e->d_name;
    const ssize_t n = readlink(path.c_str(), target, sizeof(target) - 1);
    if (n <= 0) continue;
    const std::string t(target, static_cast<size_t>(n));
    if (t.rfind("socket:[", 0) == 0) inodes.insert(t.substr(8, t.size() - 9));
  }
  closedir(dir);
  return inodes;
}

// Local IPv4 addresses (hex, as /proc/net/tcp writes them) this process listens on over TCP.
std::vector<std::string> OwnListeningV4Addresses() {
  const std::set<std::string> own = OwnSocketInodes();
  std::vector<std::string> out;
  std::ifstream tcp("/proc/self/net/tcp");
  std::string line;
  std::getline(tcp, line);  // header
  while (std::getline(tcp, line)) {
    std::istringstream in(line);
    std::string slot, local, remote, state, queues, timer, retrans, uid, timeout, inode;
    in >> slot >> local >> remote >> state >> queues >> timer >> retrans >> uid >> timeout >> inode;
    if (state == "0A" && own.count(inode) > 0) out.push_back(local.substr(0, local.find(':')));
  }
  return out;
}

bool HostHasNonLoopbackV4() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next)
    if (it->ifa_addr != nullptr && it->ifa_addr->sa_family == AF_INET &&
        (ntohl(reinterpret_cast<sockaddr_in*>(it->ifa_addr)->sin_addr.s_addr) >> 24) != 127)
      found = true;
  freeifaddrs(list);
  return found;
}

constexpr const char* kLoopbackHex = "0100007F";  // 127.0.0.1 in /proc/net/tcp's byte order

TEST(InterfaceForAddressTest, FindsTheInterfaceHoldingAnAddressWithOrWithoutPort) {
  auto lo = InterfaceForAddress("127.0.0.1");
  ASSERT_TRUE(lo.ok()) << lo.status();
  EXPECT_EQ(*lo, "lo");
  EXPECT_EQ(*InterfaceForAddress("127.0.0.1:41000"), "lo");
  auto v6 = InterfaceForAddress("[::1]:41000");
  if (v6.ok()) EXPECT_EQ(*v6, "lo");
  auto name = InterfaceForAddress("worker-0.example");
  EXPECT_EQ(name.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(name.status().message().find("worker-0.example"), std::string::npos);
  auto absent = InterfaceForAddress("203.0.113.77");  // TEST-NET-3: on no interface here
  EXPECT_EQ(absent.status().code(), StatusCode::kNotFound);
  EXPECT_NE(absent.status().message().find("203.0.113.77"), std::string::npos);
}

// Listening sockets of a UCX worker made with `net_devices`.
std::vector<std::string> UcxListeners(const std::string& net_devices) {
  ucx::UcxContextOptions options;
  options.transports = "tcp,self";
  options.net_devices = net_devices;
  auto context = ucx::CreateUcpContext(options);
  EXPECT_TRUE(context.ok()) << context.status();
  if (!context.ok()) return {};
  auto worker = ucx::CreateUcpWorker(context->get());
  EXPECT_TRUE(worker.ok()) << worker.status();
  return OwnListeningV4Addresses();
}

TEST(UcxMemoryEventsTest, OnlyRegisteringTransportsNeedUcxsMemoryHooks) {
  using ucx::TransportsNeedMemoryEvents;
  EXPECT_FALSE(TransportsNeedMemoryEvents(ucx::UcxContextOptions{}.transports));  // the default
  EXPECT_FALSE(TransportsNeedMemoryEvents("tcp"));
  EXPECT_FALSE(TransportsNeedMemoryEvents("sysv,cma,tcp,self"));
  EXPECT_FALSE(TransportsNeedMemoryEvents("posix,self"));
  for (const char* registering : {"", "all", "sysv,cma,tcp,self,rc,ud", "dc_x", "rc_mlx5",
                                  "tcp,cuda_copy", "cuda_ipc", "gdr_copy", "ib", "^tcp"})
    EXPECT_TRUE(TransportsNeedMemoryEvents(registering)) << registering;
}

TEST(UcxMemoryEventsTest, AContextOnTheDefaultTransportsTurnsUcxsMemoryHooksOff) {
  if (std::getenv("UCX_MEM_EVENTS") != nullptr) GTEST_SKIP() << "UCX_MEM_EVENTS is set here";
  auto context = ucx::CreateUcpContext(ucx::UcxContextOptions{});
  ASSERT_TRUE(context.ok()) << context.status();
  EXPECT_EQ(ucm_global_opts.enable_events, 0);
}

TEST(DataPlaneBindTest, UcxWithTheDataAddressInterfaceListensOnLoopbackOnly) {
  const auto bound = UcxListeners("lo");
  ASSERT_FALSE(bound.empty()) << "the tcp transport listens for its peers";
  for (const auto& address : bound) EXPECT_EQ(address, kLoopbackHex);
  if (!HostHasNonLoopbackV4()) GTEST_SKIP() << "no non-loopback IPv4 interface to compare with";
  // Without the setting UCX listens on every interface: the check above can fail.
  const auto everywhere = UcxListeners("");
  EXPECT_TRUE(std::any_of(everywhere.begin(), everywhere.end(),
                          [](const std::string& a) { return a != kLoopbackHex; }));
}

}  // namespace
}  // namespace retort::collectives

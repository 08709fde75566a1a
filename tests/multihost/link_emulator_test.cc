// The userspace link emulator (testing/link_emulator.h) on a test host's link: latency is added
// in both directions, the rate limit bounds TCP throughput, loss drops segments that TCP then
// retransmits, a bad profile is refused and a cut link still cuts. The test process talks TCP to
// a socket opened inside the host's network namespace, over the bridge and the emulator.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "multihost/multihost_fixture.h"

namespace retort::multihost {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using testing::LinkProfile;

constexpr int kPort = 7411;
constexpr auto kIoDeadline = std::chrono::seconds(30);

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

void SetDeadline(int fd) {
  timeval tv{static_cast<time_t>(kIoDeadline.count()), 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

sockaddr_in Address(const std::string& ip) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(kPort);
  ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  return a;
}

// A TCP server whose listening socket lives in a test host's network namespace (opened by a
// thread that entered it; a socket stays in the namespace it was made in). It serves one
// connection at a time on its own thread: "echo" sends every byte back; "sink" counts bytes
// to EOF and answers with the count (8 bytes). Every blocking call has kIoDeadline.
class HostServer {
 public:
  enum class Mode { kEcho, kSink };

  HostServer(const std::string& netns, const std::string& ip, Mode mode) : mode_(mode) {
    std::thread opener([&] {
      const int ns = ::open(("/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC);
      if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) {
        error_ = "entering " + netns + ": " + std::strerror(errno);
        if (ns >= 0) ::close(ns);
        return;
      }
      ::close(ns);
      listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      const int one = 1;
      ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      sockaddr_in a = Address(ip);
      if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
          ::listen(listen_fd_, 4) != 0)
        error_ = std::string("listen: ") + std::strerror(errno);
    });
    opener.join();
    if (error_.empty()) thread_ = std::thread([this] { Serve(); });
  }
  ~HostServer() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }
  const std::string& error() const { return error_; }

 private:
  void Serve() {
    std::vector<char> buffer(1 << 16);
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      SetDeadline(fd);
      uint64_t total = 0;
      for (;;) {
        const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), 0);
        if (n <= 0) break;
        total += static_cast<uint64_t>(n);
        if (mode_ == Mode::kEcho && ::send(fd, buffer.data(), n, MSG_NOSIGNAL) != n) break;
      }
      if (mode_ == Mode::kSink) ::send(fd, &total, sizeof(total), MSG_NOSIGNAL);
      ::close(fd);
    }
  }

  const Mode mode_;
  int listen_fd_ = -1;
  std::string error_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A connection from the test namespace; -1 when it cannot be made within `timeout`.
int Connect(const std::string& ip, milliseconds timeout) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in a = Address(ip);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 && errno != EINPROGRESS) {
    ::close(fd);
    return -1;
  }
  pollfd p{fd, POLLOUT, 0};
  int error = 0;
  socklen_t length = sizeof(error);
  if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1 ||
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0) {
    ::close(fd);
    return -1;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  SetDeadline(fd);
  return fd;
}

bool RecvAll(int fd, char* data, size_t bytes) {
  while (bytes > 0) {
    const ssize_t n = ::recv(fd, data, bytes, 0);
    if (n <= 0) return false;
    data += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

// Median round trip of `rounds` 64-byte echoes on one connection, in ms; negative on failure.
double MedianRoundTripMs(const std::string& ip, int rounds) {
  const int fd = Connect(ip, milliseconds(10000));
  if (fd < 0) return -1;
  std::vector<double> times;
  char message[64] = {}, reply[64];
  for (int i = 0; i < rounds; ++i) {
    const auto start = Clock::now();
    if (::send(fd, message, sizeof(message), MSG_NOSIGNAL) != sizeof(message) ||
        !RecvAll(fd, reply, sizeof(reply)))
      break;
    times.push_back(Ms(Clock::now() - start));
  }
  ::close(fd);
  if (static_cast<int>(times.size()) != rounds) return -1;
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Sends `bytes` to a sink server; returns the count the server received (0 on failure) and the
// seconds the transfer took, to the server's answer.
uint64_t SendToSink(const std::string& ip, size_t bytes, double* seconds) {
  const int fd = Connect(ip, milliseconds(10000));
  if (fd < 0) return 0;
  std::vector<char> chunk(1 << 16, 'x');
  const auto start = Clock::now();
  size_t left = bytes;
  while (left > 0) {
    const ssize_t n = ::send(fd, chunk.data(), std::min(left, chunk.size()), MSG_NOSIGNAL);
    if (n <= 0) break;
    left -= static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  uint64_t received = 0;
  if (left != 0 || !RecvAll(fd, reinterpret_cast<char*>(&received), sizeof(received))) received = 0;
  *seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ::close(fd);
  return received;
}

class LinkEmulatorTest : public MultiHostTest {};

TEST_F(LinkEmulatorTest, LatencyIsAddedInBothDirections) {
  auto hosts = MakeHosts(1);
  if (!hosts) GTEST_SKIP() << skip_reason();
  HostServer server(hosts->name(0), hosts->address(0), HostServer::Mode::kEcho);
  ASSERT_EQ(server.error(), "");
  std::string why;
  ASSERT_TRUE(hosts->EmulateLink(0, LinkProfile{}, &why)) << why;
  const double plain = MedianRoundTripMs(hosts->address(0), 20);
  ASSERT_GE(plain, 0) << "no echo through the emulator without latency";

  LinkProfile slow;
  slow.latency = std::chrono::milliseconds(4);
  ASSERT_TRUE(hosts->EmulateLink(0, slow, &why)) << why;
  const double delayed = MedianRoundTripMs(hosts->address(0), 20);
  std::cout << "[ measured ] echo round trip " << plain << " ms plain, " << delayed
            << " ms with 4 ms each way; worst lateness " << hosts->link_counters(0).late_us_max
            << " us\n";
  // A round trip crosses the link twice: never faster than 2 x 4 ms.
  EXPECT_GE(delayed, 8.0);
  EXPECT_LT(delayed, 8.0 + plain + 40.0) << "latency far beyond the profile's";
  EXPECT_GT(hosts->link_counters(0).frames, 40u);
}

TEST_F(LinkEmulatorTest, RateLimitBoundsTcpThroughput) {
  auto hosts = MakeHosts(1);
  if (!hosts) GTEST_SKIP() << skip_reason();
  HostServer server(hosts->name(0), hosts->address(0), HostServer::Mode::kSink);
  ASSERT_EQ(server.error(), "");
  LinkProfile profile;
  profile.rate_mbit = 40;
  std::string why;
  ASSERT_TRUE(hosts->EmulateLink(0, profile, &why)) << why;
  constexpr size_t kBytes = 6 << 20;
  double seconds = 0;
  ASSERT_EQ(SendToSink(hosts->address(0), kBytes, &seconds), kBytes);
  const double mbit = kBytes * 8 / seconds / 1e6;
  std::cout << "[ measured ] " << kBytes << " bytes in " << seconds << " s: " << mbit
            << " Mbit/s through a 40 Mbit/s link\n";
  // The wire carries headers too, so goodput stays below the rate; it should not collapse.
  EXPECT_LE(mbit, 40.0 * 1.02);
  EXPECT_GE(mbit, 40.0 * 0.5);
}

TEST_F(LinkEmulatorTest, LostSegmentsAreRetransmittedAndEveryByteArrives) {
  auto hosts = MakeHosts(1);
  if (!hosts) GTEST_SKIP() << skip_reason();
  HostServer server(hosts->name(0), hosts->address(0), HostServer::Mode::kSink);
  ASSERT_EQ(server.error(), "");
  LinkProfile profile;
  profile.loss = 0.02;
  profile.latency = std::chrono::microseconds(500);
  std::string why;
  ASSERT_TRUE(hosts->EmulateLink(0, profile, &why)) << why;
  constexpr size_t kBytes = 4 << 20;
  double seconds = 0;
  EXPECT_EQ(SendToSink(hosts->address(0), kBytes, &seconds), kBytes);
  const auto counters = hosts->link_counters(0);
  std::cout << "[ measured ] 2% loss: " << counters.lost << " of "
            << counters.frames + counters.lost << " frames dropped, transfer took " << seconds
            << " s\n";
  EXPECT_GT(counters.lost, 0u);
}

TEST_F(LinkEmulatorTest, BadProfilesAreRefusedWithTheReason) {
  auto hosts = MakeHosts(1);
  if (!hosts) GTEST_SKIP() << skip_reason();
  std::string why;
  LinkProfile certain_loss;
  certain_loss.loss = 1.0;
  EXPECT_FALSE(hosts->EmulateLink(0, certain_loss, &why));
  EXPECT_NE(why.find("loss"), std::string::npos) << why;
  LinkProfile negative;
  negative.latency = std::chrono::microseconds(-1);
  EXPECT_FALSE(hosts->EmulateLink(0, negative, &why));
  EXPECT_NE(why.find("latency"), std::string::npos) << why;
  LinkProfile rate;
  rate.rate_mbit = -5;
  EXPECT_FALSE(hosts->EmulateLink(0, rate, &why));
  EXPECT_NE(why.find("rate_mbit"), std::string::npos) << why;
}

TEST_F(LinkEmulatorTest, LinkDownStillCutsAnEmulatedHostOff) {
  auto hosts = MakeHosts(1);
  if (!hosts) GTEST_SKIP() << skip_reason();
  HostServer server(hosts->name(0), hosts->address(0), HostServer::Mode::kEcho);
  ASSERT_EQ(server.error(), "");
  LinkProfile profile;
  profile.latency = std::chrono::milliseconds(1);
  std::string why;
  ASSERT_TRUE(hosts->EmulateLink(0, profile, &why)) << why;
  ASSERT_GE(MedianRoundTripMs(hosts->address(0), 3), 0);
  ASSERT_TRUE(hosts->SetLinkUp(0, false, &why)) << why;
  const int fd = Connect(hosts->address(0), milliseconds(1500));
  EXPECT_LT(fd, 0) << "connected to a host whose link is down";
  if (fd >= 0) ::close(fd);
  ASSERT_TRUE(hosts->SetLinkUp(0, true, &why)) << why;
  EXPECT_GE(MedianRoundTripMs(hosts->address(0), 3), 0) << "no echo after the link came back";
}

}  // namespace
}  // namespace retort::multihost

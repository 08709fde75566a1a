#include "testing/link_emulator.h"

#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <deque>
#include <random>
#include <vector>

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

namespace retort::testing {
namespace {

using Clock = std::chrono::steady_clock;

// The virtio-net header a PACKET_VNET_HDR socket puts before each frame (struct virtio_net_hdr
// of <linux/virtio_net.h>, which does not compile as C++), in this host's byte order (the
// kernel writes it little-endian, which is native on the hosts we run on).
struct VirtioNetHeader {
  uint8_t flags;
  uint8_t gso_type;
  uint16_t hdr_len;
  uint16_t gso_size;
  uint16_t csum_start;
  uint16_t csum_offset;
};
static_assert(sizeof(VirtioNetHeader) == 10);
constexpr uint8_t kGsoNone = 0;
constexpr uint8_t kGsoEcnBit = 0x80;

constexpr size_t kMaxFrame = sizeof(VirtioNetHeader) + 65536 + 64;
constexpr size_t kMaxQueuedFrames = 65536;  // per direction, whatever the profile
constexpr int kReadBurst = 256;             // frames read per socket per wake-up
constexpr auto kRetrySend = std::chrono::microseconds(50);

// An AF_PACKET socket on interface `name` that sees every frame arriving there (not its own
// transmissions) with a virtio-net header in front. -1 with *why on failure.
int OpenPacketSocket(const std::string& name, std::string* why) {
  const unsigned index = ::if_nametoindex(name.c_str());
  if (index == 0) {
    *why = "no interface '" + name + "': " + std::strerror(errno);
    return -1;
  }
  int fd = ::socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
  if (fd < 0) {
    *why = std::string("AF_PACKET socket (needs CAP_NET_RAW): ") + std::strerror(errno);
    return -1;
  }
  const int one = 1;
  const int buffer = 8 << 20;
  packet_mreq promiscuous{};
  promiscuous.mr_ifindex = static_cast<int>(index);
  promiscuous.mr_type = PACKET_MR_PROMISC;
  sockaddr_ll address{};
  address.sll_family = AF_PACKET;
  address.sll_protocol = htons(ETH_P_ALL);
  address.sll_ifindex = static_cast<int>(index);
  const char* step = nullptr;
  if (::setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)) != 0)
    step = "PACKET_VNET_HDR";
  else if (::setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one)) != 0)
    step = "PACKET_IGNORE_OUTGOING";
  else if (::setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &promiscuous, sizeof(promiscuous)) !=
           0)
    step = "promiscuous mode";
  else if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0)
    step = "bind";
  if (step) {
    *why = "packet socket on '" + name + "', " + step + ": " + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  // Room for a queue's worth of frames between wake-ups; best effort (FORCE needs root).
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buffer, sizeof(buffer)) != 0)
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
  if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buffer, sizeof(buffer)) != 0)
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
  return fd;
}

// MTU-sized segments a frame stands for, and the bytes they put on the wire (each segment
// repeats the headers). `frame` starts with its virtio-net header.
struct WireSize {
  int segments = 1;
  int64_t bytes = 0;
};

WireSize WireSizeOf(const std::string& frame) {
  VirtioNetHeader header{};
  std::memcpy(&header, frame.data(), sizeof(header));
  const int64_t length = static_cast<int64_t>(frame.size() - sizeof(header));
  WireSize size{1, length};
  if ((header.gso_type & ~kGsoEcnBit) != kGsoNone && header.gso_size > 0) {
    const int64_t headers = std::min<int64_t>(header.hdr_len, length);
    const int64_t payload = length - headers;
    size.segments =
        static_cast<int>(std::max<int64_t>(1, (payload + header.gso_size - 1) / header.gso_size));
    size.bytes = length + (size.segments - 1) * headers;
  }
  return size;
}

}  // namespace

// One direction of the link: frames waiting for delivery, oldest first (delivery times never
// decrease), and when the link finishes serialising what it has accepted.
struct LinkEmulator::Queues {
  struct Frame {
    Clock::time_point deliver_at;
    int segments;
    std::string bytes;
  };
  std::deque<Frame> frames[2];
  Clock::time_point link_free[2];
  Clock::time_point retry_at[2];  // after the kernel refused a send for lack of buffer space
};

std::string LinkEmulator::Invalid(const LinkProfile& p) {
  if (p.latency.count() < 0) return "latency is negative";
  if (!(p.loss >= 0 && p.loss < 1)) return "loss " + std::to_string(p.loss) + " is not in [0, 1)";
  if (p.rate_mbit < 0) return "rate_mbit " + std::to_string(p.rate_mbit) + " is negative";
  if (p.queue_limit.count() <= 0) return "queue_limit must be positive";
  return "";
}

std::unique_ptr<LinkEmulator> LinkEmulator::Start(const std::string& a, const std::string& b,
                                                  const LinkProfile& profile, std::string* why) {
  if (std::string invalid = Invalid(profile); !invalid.empty()) {
    *why = "link profile: " + invalid;
    return nullptr;
  }
  std::unique_ptr<LinkEmulator> e(new LinkEmulator());
  e->profile_ = profile;
  e->sockets_[0] = OpenPacketSocket(a, why);
  if (e->sockets_[0] < 0) return nullptr;
  e->sockets_[1] = OpenPacketSocket(b, why);
  if (e->sockets_[1] < 0) return nullptr;
  e->wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (e->wake_fd_ < 0) {
    *why = std::string("eventfd: ") + std::strerror(errno);
    return nullptr;
  }
  e->thread_ = std::thread([raw = e.get()] { raw->Run(); });
  return e;
}

LinkEmulator::~LinkEmulator() {
  stop_ = true;
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
  for (int fd : {sockets_[0], sockets_[1], wake_fd_})
    if (fd >= 0) ::close(fd);
}

void LinkEmulator::SetProfile(const LinkProfile& profile) {
  std::lock_guard<std::mutex> lock(mu_);
  profile_ = profile;
  ++profile_sets_;
}

LinkProfile LinkEmulator::profile() const {
  std::lock_guard<std::mutex> lock(mu_);
  return profile_;
}

LinkEmulator::Counters LinkEmulator::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

void LinkEmulator::Run() {
  ::prctl(PR_SET_TIMERSLACK, 1000UL);  // 1 us: the default 50 us would blur short latencies
  std::mt19937_64 random(std::random_device{}());
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  Queues q;
  q.link_free[0] = q.link_free[1] = q.retry_at[0] = q.retry_at[1] = Clock::now();
  std::string buffer(kMaxFrame, '\0');
  Counters local;  // published to counters_ once per loop
  uint64_t seen_profile_sets = 0;

  while (!stop_) {
    // Sleep until the next delivery is due, a frame arrives or the destructor wakes us.
    Clock::time_point next = Clock::now() + std::chrono::milliseconds(100);
    for (int d = 0; d < 2; ++d)
      if (!q.frames[d].empty())
        next = std::min(next, std::max(q.frames[d].front().deliver_at, q.retry_at[d]));
    const auto wait = std::max(Clock::duration::zero(), next - Clock::now());
    const auto wait_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
    timespec timeout{static_cast<time_t>(wait_ns / 1000000000),
                     static_cast<long>(wait_ns % 1000000000)};
    pollfd fds[3] = {{sockets_[0], POLLIN, 0}, {sockets_[1], POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::ppoll(fds, 3, &timeout, nullptr) < 0 && errno != EINTR) break;
    if (stop_) break;

    LinkProfile profile;
    {
      std::lock_guard<std::mutex> lock(mu_);
      profile = profile_;
      if (profile_sets_ != seen_profile_sets) {
        seen_profile_sets = profile_sets_;
        local.late_us_max = 0;  // lateness is reported per profile
      }
    }
    // Direction d carries frames read on socket d out of socket 1 - d.
    for (int d = 0; d < 2; ++d) {
      if (!(fds[d].revents & POLLIN)) continue;
      for (int n = 0; n < kReadBurst; ++n) {
        const ssize_t got = ::recv(sockets_[d], buffer.data(), buffer.size(), MSG_DONTWAIT);
        if (got < 0) break;  // EAGAIN, or ENETDOWN while an interface is down
        if (static_cast<size_t>(got) <= sizeof(VirtioNetHeader)) continue;
        std::string frame(buffer.data(), static_cast<size_t>(got));
        const WireSize size = WireSizeOf(frame);
        if (profile.loss > 0 && uniform(random) >= std::pow(1.0 - profile.loss, size.segments)) {
          ++local.lost;
          continue;
        }
        const Clock::time_point now = Clock::now();
        Clock::time_point leaves = now;
        if (profile.rate_mbit > 0) {
          const Clock::time_point start = std::max(now, q.link_free[d]);
          if (start - now > profile.queue_limit || q.frames[d].size() >= kMaxQueuedFrames) {
            ++local.queue_drops;
            continue;
          }
          // bits / (Mbit/s) = microseconds; kept in nanoseconds.
          const int64_t ns = size.bytes * 8 * 1000 / profile.rate_mbit;
          leaves = start + std::chrono::nanoseconds(ns);
          q.link_free[d] = leaves;
        } else if (q.frames[d].size() >= kMaxQueuedFrames) {
          ++local.queue_drops;
          continue;
        }
        Clock::time_point deliver = leaves + profile.latency;
        if (!q.frames[d].empty()) deliver = std::max(deliver, q.frames[d].back().deliver_at);
        q.frames[d].push_back({deliver, size.segments, std::move(frame)});
      }
    }

    // Transmit what is due, in order; a full socket buffer is retried shortly.
    for (int d = 0; d < 2; ++d) {
      auto& frames = q.frames[d];
      while (!frames.empty()) {
        const Clock::time_point now = Clock::now();
        auto& front = frames.front();
        if (front.deliver_at > now || q.retry_at[d] > now) break;
        const ssize_t sent =
            ::send(sockets_[1 - d], front.bytes.data(), front.bytes.size(), MSG_DONTWAIT);
        if (sent < 0 && (errno == EAGAIN || errno == ENOBUFS)) {
          q.retry_at[d] = now + kRetrySend;
          break;
        }
        if (sent < 0) {
          ++local.send_failures;
        } else {
          ++local.frames;
          local.segments += static_cast<uint64_t>(front.segments);
          local.late_us_max = std::max<int64_t>(
              local.late_us_max,
              std::chrono::duration_cast<std::chrono::microseconds>(now - front.deliver_at)
                  .count());
        }
        frames.pop_front();
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    counters_ = local;
  }
}

}  // namespace retort::testing

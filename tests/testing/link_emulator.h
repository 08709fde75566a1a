// LinkEmulator: a userspace wire between two network interfaces of this namespace that adds
// what the kernel's netem qdisc would, for kernels built without it: one-way latency, random
// loss and a rate limit (a serialising link with a bounded queue), each direction on its own.
//
// It reads every frame arriving on one interface (an AF_PACKET socket) and, after the link's
// delay, transmits it out of the other. Frames keep their virtio-net header (PACKET_VNET_HDR),
// so TCP segmentation and checksum offload pass through untouched: a frame may be a GSO
// super-frame of several MTU-sized segments. Loss and the rate limit count segments, not
// frames: a super-frame of k segments is dropped with probability 1 - (1 - loss)^k (so a lost
// frame takes its k segments with it: burstier loss than netem's per-packet draw) and occupies
// the link for its k segments' wire bytes.
//
// Timing: a frame arriving at t leaves the link at max(t, link free) + wire bytes / rate and is
// delivered `latency` later; a frame that would wait more than `queue_limit` for the link is
// dropped (tail drop, as a switch port's buffer). One thread (started by Start, joined by the
// destructor) does all of it with ppoll and a 1 us timer slack; on this loaded 2-core machine
// delivery is late by the scheduler's delay, which counters() does not hide: it reports
// `late_us_max`, the worst lateness since the profile was last set.
//
// Thread safety: SetProfile() and counters() may be called from any thread while it runs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace retort::testing {

struct LinkProfile {
  std::chrono::microseconds latency{0};       // one way, added in each direction
  double loss = 0;                            // per-segment drop probability in [0, 1)
  int64_t rate_mbit = 0;                      // link rate in Mbit/s each way; 0: unlimited
  std::chrono::milliseconds queue_limit{50};  // longest wait for the link before tail drop
};

class LinkEmulator {
 public:
  struct Counters {
    uint64_t frames = 0;         // frames delivered (both directions)
    uint64_t segments = 0;       // segments they carried
    uint64_t lost = 0;           // frames dropped by the loss draw
    uint64_t queue_drops = 0;    // frames dropped because the queue was full
    uint64_t send_failures = 0;  // frames the kernel refused to transmit (link down, ...)
    int64_t late_us_max = 0;     // worst delivery lateness since the profile was set
  };

  // Bridges interfaces `a` and `b` (both in this network namespace, up, without addresses of
  // their own being used). Null with *why when a socket cannot be opened (needs root /
  // CAP_NET_RAW) or an interface does not exist.
  static std::unique_ptr<LinkEmulator> Start(const std::string& a, const std::string& b,
                                             const LinkProfile& profile, std::string* why);
  ~LinkEmulator();
  LinkEmulator(const LinkEmulator&) = delete;
  LinkEmulator& operator=(const LinkEmulator&) = delete;

  // Takes effect for frames arriving from now on; frames already queued keep their times.
  void SetProfile(const LinkProfile& profile);
  LinkProfile profile() const;
  Counters counters() const;

  // The validation shared by Start and SetProfile's callers: empty when `profile` is usable,
  // else what is wrong with it.
  static std::string Invalid(const LinkProfile& profile);

 private:
  struct Queues;
  LinkEmulator() = default;
  void Run();

  int sockets_[2] = {-1, -1};
  int wake_fd_ = -1;  // eventfd: tells Run() to stop
  mutable std::mutex mu_;
  LinkProfile profile_;        // guarded by mu_
  uint64_t profile_sets_ = 0;  // guarded by mu_; SetProfile calls, so Run sees a new profile
  Counters counters_;          // guarded by mu_
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace retort::testing

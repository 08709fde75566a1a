// TestHosts: several "hosts" on one machine for multi-host tests. Each host is a network
// namespace with its own address on a private /24, joined to the others by a veth pair and a
// bridge in the test's namespace (which also gets an address on the bridge, so the test process
// reaches every host), and its own PID, IPC, mount and UTS namespaces (own hostname, own
// /dev/shm): UCX then sees the hosts as different machines and talks TCP between them, as it
// would between real nodes, and shared memory only inside one host.
//
// A host runs processes through Spawn() (nsenter into the host's namespaces). KillHost()
// kills every process of a host at once (its PID namespace's init dies); SetLinkUp() cuts a
// host off the bridge and heals it; SetPathBlocked() drops the traffic between two hosts only;
// ShapeLink() limits a host's link rate in both directions; EmulateLink() puts a userspace
// link emulator (latency, loss, rate: what netem would do) between the host and the bridge;
// LimitCpu() gives the processes a host spawns afterwards a CPU bandwidth limit (a slow host).
//
// Names and addresses come from a slot (0..kSlots-1) held with flock for the object's lifetime,
// so concurrent test processes never collide; claiming a slot first removes whatever a crashed
// earlier holder of the slot left (namespaces, their processes, links). The destructor kills
// every host's processes and removes the namespaces, veths and bridge.
//
// Needs root, iproute2 (`ip`, `tc`) and util-linux (`unshare`, `nsenter`); Create() says why
// when they are missing so tests can skip. Not thread-safe: one test thread drives it.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "testing/link_emulator.h"
#include "testing/subprocess.h"

namespace retort::testing {

class TestHosts {
 public:
  static constexpr int kSlots = 200;
  static constexpr int kMaxHosts = 16;

  // Whether this process could make hosts (root; ip, tc, unshare, nsenter found); *why if not.
  static bool Available(std::string* why);
  // Creates `hosts` hosts (h0, h1, ...) under `work_dir` (logs of the hosts' init processes).
  // Returns null with *why set when namespaces cannot be made here (not root, tools missing,
  // no namespace support) or setting them up failed.
  static std::unique_ptr<TestHosts> Create(int hosts, const std::string& work_dir,
                                           std::string* why);
  ~TestHosts();
  TestHosts(const TestHosts&) = delete;
  TestHosts& operator=(const TestHosts&) = delete;

  int size() const { return static_cast<int>(hosts_.size()); }
  // Host name (also its hostname inside its UTS namespace), e.g. "rmh7h1".
  const std::string& name(int host) const { return hosts_.at(host).name; }
  // The host's own IPv4 address, e.g. "10.213.7.11".
  const std::string& address(int host) const { return hosts_.at(host).address; }
  // The test namespace's address on the bridge.
  const std::string& bridge_address() const { return bridge_address_; }

  // Starts `argv` (argv[0] an absolute path) on `host`, output to `log_path`. The returned
  // process signals its whole process group, so Signal()/destruction reach the program itself.
  std::unique_ptr<Subprocess> Spawn(int host, const std::vector<std::string>& argv,
                                    const std::string& log_path) const;

  // SIGKILL to every process of `host` at once. Later Spawn() calls on it fail (the program
  // exits at once) until RestartHost().
  void KillHost(int host);
  // A fresh init (empty PID namespace) on a killed host, same network namespace and address.
  bool RestartHost(int host, std::string* why);
  bool alive(int host) const;

  // Brings the host's end of its veth down (the host is cut off from every other host and
  // from the test) or up again. Connections survive a short cut (TCP retransmits).
  bool SetLinkUp(int host, bool up, std::string* why);
  // Drops every packet between hosts `a` and `b` (blackhole routes on both sides) or stops
  // dropping them; their links to the other hosts stay up: a partition between two hosts only.
  bool SetPathBlocked(int a, int b, bool blocked, std::string* why);
  // Token-bucket rate limit on the host's link, both directions (tc tbf; 0 removes it).
  bool ShapeLink(int host, int64_t rate_mbit, std::string* why);
  // Routes the host's link through a LinkEmulator with `profile` (both directions): the host's
  // veth leaves the bridge and a second veth pair joins it, the emulator relaying frames
  // between the two. Later calls change the profile in place (queued frames keep their
  // times); connections survive. SetLinkUp() still cuts the host off. With loss, TCP sends one
  // segment per frame over the link (gso_max_segs 1 on the host and on the bridge), so a loss
  // takes one segment as on a real link. False with *why when
  // the profile is invalid or the devices or the emulator's sockets cannot be made.
  bool EmulateLink(int host, const LinkProfile& profile, std::string* why);
  // The host's emulator counters (zeros when EmulateLink() was never called for it).
  LinkEmulator::Counters link_counters(int host) const;

  // Processes Spawn()ed on `host` from now on share `cpus` CPUs' worth of time (a cgroup with a
  // CFS bandwidth limit: cgroup v2 cpu.max or v1 cpu.cfs_quota_us); <= 0 lifts the limit.
  // False with *why where this machine has no cgroup CPU controller to write to.
  bool LimitCpu(int host, double cpus, std::string* why);

 private:
  struct Host {
    std::string name, netns, veth, address;
    std::unique_ptr<Subprocess> init;        // `unshare` holding the host's PID namespace
    pid_t init_pid = -1;                     // its child: PID 1 of the host
    std::string cpu_cgroup;                  // LimitCpu's cgroup directory; empty: no limit
    std::unique_ptr<LinkEmulator> emulator;  // EmulateLink's; null: the veth is on the bridge
  };

  TestHosts() = default;
  bool Setup(int hosts, std::string* why);
  bool StartInit(int host, std::string* why);
  void RemoveSlotLeftovers();
  // Runs a setup command to completion (bounded); false with *why (command and output).
  bool Run(const std::vector<std::string>& argv, std::string* why, std::string* out = nullptr);

  int slot_ = -1;
  int lock_fd_ = -1;
  std::string work_dir_;
  std::string prefix_;  // "rmh<slot>"
  std::string bridge_, bridge_address_;
  std::string ip_, tc_, unshare_, nsenter_;
  int commands_ = 0;
  std::vector<Host> hosts_;
};

}  // namespace retort::testing

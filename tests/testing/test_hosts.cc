#include "testing/test_hosts.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

namespace retort::testing {
namespace {

using std::chrono::milliseconds;

constexpr const char* kSlotLockDir = "/run/retort-test-hosts";
constexpr milliseconds kCommandTimeout{20000};

std::string FindTool(const std::string& name) {
  for (const char* dir : {"/usr/sbin", "/sbin", "/usr/bin", "/bin"}) {
    std::string path = std::string(dir) + "/" + name;
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string Joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// The cgroup hierarchy that holds the CPU controller: v2 (cpu.max) at /sys/fs/cgroup or, on a
// hybrid system, /sys/fs/cgroup/unified; else v1's cpu hierarchy (cpu.cfs_quota_us). Empty
// when there is none.
struct CpuCgroupRoot {
  std::string dir;
  bool v2 = false;
};

CpuCgroupRoot FindCpuCgroupRoot() {
  for (const char* dir : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
    std::ifstream controllers(std::string(dir) + "/cgroup.controllers");
    std::string name;
    while (controllers >> name)
      if (name == "cpu") return {dir, true};
  }
  for (const char* dir : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"})
    if (std::filesystem::exists(std::string(dir) + "/cpu.cfs_quota_us")) return {dir, false};
  return {};
}

bool WriteCgroupFile(const std::string& path, const std::string& value, std::string* why) {
  std::ofstream out(path);
  out << value << std::flush;
  if (out) return true;
  *why = "writing '" + value + "' to " + path + " failed: " + std::strerror(errno);
  return false;
}

}  // namespace

bool TestHosts::Available(std::string* why) {
  if (::geteuid() != 0) {
    *why = "network namespaces need root (running as uid " + std::to_string(::geteuid()) + ")";
    return false;
  }
  for (const char* tool : {"ip", "tc", "unshare", "nsenter"}) {
    if (FindTool(tool).empty()) {
      *why = std::string("'") + tool + "' not found (iproute2 / util-linux; scripts/setup)";
      return false;
    }
  }
  return true;
}

std::unique_ptr<TestHosts> TestHosts::Create(int hosts, const std::string& work_dir,
                                             std::string* why) {
  if (hosts < 1 || hosts > kMaxHosts) {
    *why =
        "host count " + std::to_string(hosts) + " is not in [1, " + std::to_string(kMaxHosts) + "]";
    return nullptr;
  }
  if (!Available(why)) return nullptr;
  std::unique_ptr<TestHosts> t(new TestHosts());
  t->work_dir_ = work_dir;
  t->ip_ = FindTool("ip");
  t->tc_ = FindTool("tc");
  t->unshare_ = FindTool("unshare");
  t->nsenter_ = FindTool("nsenter");
  std::error_code ec;
  std::filesystem::create_directories(work_dir, ec);
  if (!t->Setup(hosts, why)) return nullptr;  // the destructor removes what was made
  return t;
}

bool TestHosts::Setup(int hosts, std::string* why) {
  std::error_code ec;
  std::filesystem::create_directories(kSlotLockDir, ec);
  for (int s = 0; s < kSlots && slot_ < 0; ++s) {
    std::string path = std::string(kSlotLockDir) + "/slot-" + std::to_string(s) + ".lock";
    int fd = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      slot_ = s;
      lock_fd_ = fd;
    } else {
      ::close(fd);
    }
  }
  if (slot_ < 0) {
    *why = std::string("no free test-hosts slot in ") + kSlotLockDir;
    return false;
  }
  prefix_ = "rmh" + std::to_string(slot_);
  bridge_ = prefix_ + "br";
  const std::string subnet = "10.213." + std::to_string(slot_) + ".";
  bridge_address_ = subnet + "254";
  RemoveSlotLeftovers();

  if (!Run({ip_, "link", "add", bridge_, "type", "bridge"}, why)) {
    *why = "cannot create network devices here (" + *why + ")";
    return false;
  }
  if (!Run({ip_, "addr", "add", bridge_address_ + "/24", "dev", bridge_}, why) ||
      !Run({ip_, "link", "set", bridge_, "up"}, why))
    return false;
  for (int i = 0; i < hosts; ++i) {
    Host h;
    h.name = prefix_ + "h" + std::to_string(i);
    h.netns = h.name;
    h.veth = prefix_ + "v" + std::to_string(i);
    h.address = subnet + std::to_string(10 + i);
    hosts_.push_back(std::move(h));
    const Host& host = hosts_.back();
    if (!Run({ip_, "netns", "add", host.netns}, why) ||
        !Run({ip_, "link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns",
              host.netns},
             why) ||
        !Run({ip_, "link", "set", host.veth, "master", bridge_}, why) ||
        !Run({ip_, "link", "set", host.veth, "up"}, why) ||
        !Run({ip_, "-n", host.netns, "addr", "add", host.address + "/24", "dev", "eth0"}, why) ||
        !Run({ip_, "-n", host.netns, "link", "set", "eth0", "up"}, why) ||
        !Run({ip_, "-n", host.netns, "link", "set", "lo", "up"}, why))
      return false;
    if (!StartInit(i, why)) return false;
  }
  return true;
}

bool TestHosts::StartInit(int host, std::string* why) {
  Host& h = hosts_.at(host);
  // PID 1 of the host sets its hostname and a private /dev/shm, then sleeps; --kill-child
  // takes it (and so every process of the host) down with unshare.
  const std::string script =
      "hostname " + h.name + " && mount -t tmpfs -o size=256m tmpfs /dev/shm && exec sleep 1000000";
  SubprocessOptions o;
  o.die_with_parent = true;
  h.init = std::make_unique<Subprocess>(
      std::vector<std::string>{ip_, "netns", "exec", h.netns, unshare_, "--pid", "--ipc", "--mount",
                               "--uts", "--fork", "--kill-child", "--mount-proc", "/bin/sh", "-c",
                               script},
      work_dir_ + "/" + h.name + "-init.log", o);
  h.init_pid = -1;
  const std::string children = "/proc/" + std::to_string(h.init->pid()) + "/task/" +
                               std::to_string(h.init->pid()) + "/children";
  bool ready = WaitFor(
      [&] {
        if (!h.init->Running()) return true;
        std::istringstream in(ReadFile(children));
        pid_t child = -1;
        if (!(in >> child) || child <= 0) return false;
        // Ready once PID 1 has set itself up and become `sleep`.
        std::string comm = ReadFile("/proc/" + std::to_string(child) + "/comm");
        if (comm.rfind("sleep", 0) != 0) return false;
        h.init_pid = child;
        return true;
      },
      kCommandTimeout);
  if (!ready || h.init_pid <= 0 || !h.init->Running()) {
    *why = "host " + h.name + " did not start its namespaces:\n" + h.init->Log();
    return false;
  }
  return true;
}

TestHosts::~TestHosts() {
  for (auto& h : hosts_) h.emulator.reset();  // before its devices go
  for (auto& h : hosts_) {
    if (h.init) h.init->Signal(SIGKILL);
  }
  for (auto& h : hosts_) h.init.reset();
  if (!prefix_.empty()) RemoveSlotLeftovers();
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

void TestHosts::RemoveSlotLeftovers() {
  std::string out, ignored;
  Run({ip_, "netns", "list"}, &ignored, &out);
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::string ns = line.substr(0, line.find(' '));
    if (ns.rfind(prefix_ + "h", 0) != 0) continue;
    std::string pids;
    Run({ip_, "netns", "pids", ns}, &ignored, &pids);
    std::istringstream ps(pids);
    pid_t pid;
    while (ps >> pid)
      if (pid > 1) ::kill(pid, SIGKILL);
    Run({ip_, "netns", "del", ns}, &ignored);  // takes the veth pair with it
  }
  for (int i = 0; i < kMaxHosts; ++i) {
    // The host's veth and EmulateLink's bridge-side pair (deleting one end removes both).
    for (const char* kind : {"v", "e"}) {
      const std::string veth = prefix_ + kind + std::to_string(i);
      if (std::filesystem::exists("/sys/class/net/" + veth))
        Run({ip_, "link", "del", veth}, &ignored);
    }
  }
  if (std::filesystem::exists("/sys/class/net/" + bridge_))
    Run({ip_, "link", "del", bridge_}, &ignored);
  // LimitCpu's cgroups: removable once their processes (killed above) have exited.
  const std::string cgroup_root = FindCpuCgroupRoot().dir;
  for (int i = 0; i < kMaxHosts && !cgroup_root.empty(); ++i) {
    const std::string dir = cgroup_root + "/" + prefix_ + "h" + std::to_string(i);
    for (int attempt = 0; attempt < 100 && std::filesystem::exists(dir); ++attempt) {
      if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

bool TestHosts::Run(const std::vector<std::string>& argv, std::string* why, std::string* out) {
  const std::string log = work_dir_ + "/cmd-" + std::to_string(commands_++) + ".log";
  std::optional<int> rc;
  std::string text;
  {
    Subprocess p(argv, log);
    rc = p.Wait(kCommandTimeout);
    text = p.Log();
  }
  std::error_code ec;
  std::filesystem::remove(log, ec);
  if (out) *out = text;
  if (rc && *rc == 0) return true;
  *why = "`" + Joined(argv) + "` " +
         (rc ? "exited with " + std::to_string(*rc) : std::string("timed out")) + ": " + text;
  return false;
}

std::unique_ptr<Subprocess> TestHosts::Spawn(int host, const std::vector<std::string>& argv,
                                             const std::string& log_path) const {
  const Host& h = hosts_.at(host);
  std::vector<std::string> full;
  if (!h.cpu_cgroup.empty()) {
    // The shell joins the cgroup before it becomes nsenter, so the program never runs outside.
    full = {"/bin/sh", "-c", "echo $$ > \"$0/cgroup.procs\" && exec \"$@\"", h.cpu_cgroup};
  }
  full.insert(full.end(), {nsenter_, "--target", std::to_string(h.init_pid), "--net", "--pid",
                           "--ipc", "--mount", "--uts", "--"});
  full.insert(full.end(), argv.begin(), argv.end());
  SubprocessOptions o;
  o.signal_process_group = true;
  return std::make_unique<Subprocess>(full, log_path, o);
}

void TestHosts::KillHost(int host) {
  Host& h = hosts_.at(host);
  if (!h.init) return;
  h.init->Signal(SIGKILL);  // unshare --kill-child: PID 1 dies, the kernel kills the rest
  h.init->Wait(kCommandTimeout);
  h.init_pid = -1;
}

bool TestHosts::RestartHost(int host, std::string* why) {
  KillHost(host);
  return StartInit(host, why);
}

bool TestHosts::alive(int host) const {
  const Host& h = hosts_.at(host);
  return h.init && h.init_pid > 0 && h.init->Running();
}

bool TestHosts::SetLinkUp(int host, bool up, std::string* why) {
  return Run({ip_, "link", "set", hosts_.at(host).veth, up ? "up" : "down"}, why);
}

bool TestHosts::SetPathBlocked(int a, int b, bool blocked, std::string* why) {
  for (const auto& [from, to] : {std::pair<int, int>{a, b}, {b, a}}) {
    if (!Run({ip_, "-n", hosts_.at(from).netns, "route", blocked ? "replace" : "del", "blackhole",
              hosts_.at(to).address + "/32"},
             why))
      return false;
  }
  return true;
}

bool TestHosts::LimitCpu(int host, double cpus, std::string* why) {
  Host& h = hosts_.at(host);
  const CpuCgroupRoot root = FindCpuCgroupRoot();
  if (root.dir.empty()) {
    *why = "no cgroup CPU controller (neither cgroup v2 cpu.max nor v1 cpu.cfs_quota_us)";
    return false;
  }
  constexpr int64_t kPeriodUs = 100000;
  const int64_t quota_us = cpus > 0 ? std::max<int64_t>(1000, std::llround(cpus * kPeriodUs)) : -1;
  if (root.v2) {
    std::string ignored;  // already on, or the root does not let us: cpu.max then fails below
    WriteCgroupFile(root.dir + "/cgroup.subtree_control", "+cpu", &ignored);
  }
  const std::string dir = root.dir + "/" + prefix_ + "h" + std::to_string(host);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    *why = "creating cgroup " + dir + ": " + ec.message();
    return false;
  }
  const bool ok =
      root.v2 ? WriteCgroupFile(dir + "/cpu.max",
                                (quota_us > 0 ? std::to_string(quota_us) : std::string("max")) +
                                    " " + std::to_string(kPeriodUs),
                                why)
              : WriteCgroupFile(dir + "/cpu.cfs_period_us", std::to_string(kPeriodUs), why) &&
                    WriteCgroupFile(dir + "/cpu.cfs_quota_us", std::to_string(quota_us), why);
  if (!ok) return false;
  h.cpu_cgroup = dir;
  return true;
}

bool TestHosts::ShapeLink(int host, int64_t rate_mbit, std::string* why) {
  const Host& h = hosts_.at(host);
  std::vector<std::vector<std::string>> devices = {{tc_, "qdisc"},
                                                   {ip_, "netns", "exec", h.netns, tc_, "qdisc"}};
  const std::vector<std::string> names = {h.veth, "eth0"};
  for (size_t i = 0; i < devices.size(); ++i) {
    std::vector<std::string> argv = devices[i];
    if (rate_mbit <= 0) {
      argv.insert(argv.end(), {"del", "dev", names[i], "root"});
      std::string ignored;
      Run(argv, &ignored);  // absent when never shaped
      continue;
    }
    // Burst: at least one 64 KiB TSO segment and ~1 ms at the rate.
    const int64_t burst = std::max<int64_t>(64 * 1024 + 1514, rate_mbit * 1000 / 8);
    argv.insert(argv.end(), {"replace", "dev", names[i], "root", "tbf", "rate",
                             std::to_string(rate_mbit) + "mbit", "burst", std::to_string(burst),
                             "latency", "50ms"});
    if (!Run(argv, why)) return false;
  }
  return true;
}

}  // namespace retort::testing

namespace retort::testing {

bool TestHosts::EmulateLink(int host, const LinkProfile& profile, std::string* why) {
  Host& h = hosts_.at(host);
  if (std::string invalid = LinkEmulator::Invalid(profile); !invalid.empty()) {
    *why = "link profile for host " + h.name + ": " + invalid;
    return false;
  }
  // bridge <-> e<i> ~ f<i> <-> emulator <-> v<i> ~ eth0 (the host's end)
  const std::string bridge_port = prefix_ + "e" + std::to_string(host);
  const std::string emulator_end = prefix_ + "f" + std::to_string(host);
  if (!h.emulator &&
      (!Run({ip_, "link", "add", bridge_port, "type", "veth", "peer", "name", emulator_end}, why) ||
       !Run({ip_, "link", "set", emulator_end, "up"}, why) ||
       !Run({ip_, "link", "set", h.veth, "nomaster"}, why) ||
       !Run({ip_, "link", "set", bridge_port, "master", bridge_}, why) ||
       !Run({ip_, "link", "set", bridge_port, "up"}, why)))
    return false;
  // With loss, TCP sends one segment per frame towards the emulator (from the host, and from
  // the test namespace through the bridge while any host's link is lossy), so a drop takes one
  // segment as on a real link instead of a super-frame's worth; without, super-frames keep the
  // relay's per-frame work low at high rates.
  if (!Run({ip_, "-n", h.netns, "link", "set", "dev", "eth0", "gso_max_segs",
            profile.loss > 0 ? "1" : "65535"},
           why))
    return false;
  if (h.emulator) {
    h.emulator->SetProfile(profile);
  } else {
    h.emulator = LinkEmulator::Start(h.veth, emulator_end, profile, why);
    if (!h.emulator) return false;
  }
  const bool any_loss = std::any_of(hosts_.begin(), hosts_.end(), [](const Host& other) {
    return other.emulator && other.emulator->profile().loss > 0;
  });
  return Run({ip_, "link", "set", "dev", bridge_, "gso_max_segs", any_loss ? "1" : "65535"}, why);
}

LinkEmulator::Counters TestHosts::link_counters(int host) const {
  const Host& h = hosts_.at(host);
  return h.emulator ? h.emulator->counters() : LinkEmulator::Counters{};
}

}  // namespace retort::testing

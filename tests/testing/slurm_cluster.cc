#include "testing/slurm_cluster.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace retort::testing {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kCommandTimeout{20000};

std::string FindProgram(const std::string& name) {
  for (const char* dir : {"/usr/sbin", "/usr/bin", "/sbin", "/bin"}) {
    const std::string path = std::string(dir) + "/" + name;
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

std::string Tail(const std::string& path, size_t max_bytes = 3000) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  std::string text = s.str();
  if (text.size() > max_bytes) text = "..." + text.substr(text.size() - max_bytes);
  return text;
}

// The value of `field` in one line of `scontrol -o show job` ("JobState=RUNNING Reason=...").
std::string FieldOf(const std::string& line, const std::string& field) {
  const std::string key = field + "=";
  size_t at = 0;
  while ((at = line.find(key, at)) != std::string::npos) {
    if (at == 0 || line[at - 1] == ' ') {
      const size_t begin = at + key.size();
      const size_t end = line.find_first_of(" \n", begin);
      return line.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    }
    at += key.size();
  }
  return "";
}

// Polls `predicate` every 250 ms (each poll starts a Slurm client) until it holds or `timeout`
// passes; returns whether it held.
bool Poll(const std::function<bool()>& predicate, milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (predicate()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    ::usleep(250 * 1000);
  }
}

}  // namespace

bool SlurmCluster::Available(std::string* why) {
  std::string missing;
  for (const char* p : {"slurmctld", "slurmd", "sbatch", "scontrol", "munged"})
    if (FindProgram(p).empty()) missing += std::string(missing.empty() ? "" : ", ") + p;
  if (missing.empty()) return true;
  *why = "not installed: " + missing + " (scripts/setup installs slurm-wlm and munge)";
  return false;
}

std::unique_ptr<SlurmCluster> SlurmCluster::Start(TestHosts* hosts, const std::string& dir,
                                                  const SlurmClusterOptions& options,
                                                  milliseconds timeout, std::string* why) {
  if (!Available(why)) return nullptr;
  if (hosts->size() < 2) {
    *why = "a Slurm cluster needs a controller host and at least one node host";
    return nullptr;
  }
  std::unique_ptr<SlurmCluster> c(new SlurmCluster());
  c->hosts_ = hosts;
  c->dir_ = dir;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!c->WriteConfig(options, why) || !c->StartDaemons(timeout, why)) {
    *why += "\n" + c->Logs();
    return nullptr;
  }
  return c;
}

// slurm.conf, gres.conf, cgroup.conf, the hosts file, the munge key and the GPU devices.
bool SlurmCluster::WriteConfig(const SlurmClusterOptions& o, std::string* why) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const char* sub : {"state", "log", "dev", "munge", "munge-key"})
    fs::create_directories(dir_ + "/" + sub, ec);
  // munged refuses a key others can read and a socket folder others cannot enter.
  ::chmod((dir_ + "/munge-key").c_str(), 0700);
  ::chmod((dir_ + "/munge").c_str(), 0755);
  {
    std::random_device rd;
    std::string key(1024, '\0');
    for (char& ch : key) ch = static_cast<char>(rd());
    std::ofstream(dir_ + "/munge-key/key", std::ios::binary) << key;
    ::chmod((dir_ + "/munge-key/key").c_str(), 0600);
  }
  munge_socket_ = dir_ + "/munge/socket";

  std::ostringstream hosts_file;
  hosts_file << "127.0.0.1 localhost\n";
  for (int h = 0; h < hosts_->size(); ++h)
    hosts_file << hosts_->address(h) << " " << hosts_->name(h) << "\n";
  std::ofstream(dir_ + "/hosts") << hosts_file.str();

  // The GRES gpu files: character devices (Slurm refuses anything else), each a /dev/null.
  std::ostringstream gres;
  for (int g = 0; g < o.gpus_per_node; ++g) {
    const std::string dev = dir_ + "/dev/gpu" + std::to_string(g);
    if (!fs::exists(dev) && ::mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
      *why = "cannot make the stand-in GPU device " + dev + ": " + std::strerror(errno);
      return false;
    }
  }
  for (int h = 1; h < hosts_->size(); ++h)
    gres << "NodeName=" << hosts_->name(h) << " Name=gpu File=" << dir_ << "/dev/gpu[0-"
         << o.gpus_per_node - 1 << "]\n";
  std::ofstream(dir_ + "/gres.conf") << gres.str();
  std::ofstream(dir_ + "/cgroup.conf") << "CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n";

  std::ostringstream c;
  c << "ClusterName=retorttest\n"
    << "SlurmctldHost=" << hosts_->name(0) << "(" << hosts_->address(0) << ")\n"
    << "SlurmUser=root\nSlurmdUser=root\n"
    << "AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket="
    << munge_socket_
    // cred_expire is also how long a requeued job waits before it may start again (120 s by
    // default).
    << ",cred_expire=" << o.cred_expire_s << "\n"
    << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
    << "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"
    << "SwitchType=switch/none\nMpiDefault=none\nMailProg=/bin/true\n"
    << "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
    << "SlurmdParameters=config_overrides\nReturnToService=2\n"
    << "SlurmdTimeout=" << o.slurmd_timeout_s << "\nKillWait=" << o.kill_wait_s << "\n"
    << "MessageTimeout=5\nMinJobAge=300\n"
    << "SchedulerParameters=sched_interval=1\n"
    << "StateSaveLocation=" << dir_ << "/state\n"
    << "SlurmdSpoolDir=" << dir_ << "/spool/%n\n"
    << "SlurmctldPidFile=" << dir_ << "/slurmctld.pid\n"
    << "SlurmdPidFile=" << dir_ << "/slurmd-%n.pid\n"
    << "SlurmctldLogFile=" << dir_ << "/log/slurmctld.log\n"
    << "SlurmdLogFile=" << dir_ << "/log/slurmd-%n.log\n"
    << "GresTypes=gpu\n";
  std::string node_list;
  for (int h = 1; h < hosts_->size(); ++h) {
    fs::create_directories(dir_ + "/spool/" + hosts_->name(h), ec);
    c << "NodeName=" << hosts_->name(h) << " NodeAddr=" << hosts_->address(h)
      << " CPUs=" << o.cpus_per_node << " Gres=gpu:" << o.gpus_per_node << " State=UNKNOWN\n";
    node_list += (node_list.empty() ? "" : ",") + hosts_->name(h);
  }
  c << "PartitionName=test Nodes=" << node_list << " Default=YES MaxTime=INFINITE State=UP\n";
  conf_ = dir_ + "/slurm.conf";
  std::ofstream(conf_) << c.str();
  if (!fs::exists(conf_)) {
    *why = "cannot write " + conf_;
    return false;
  }
  return true;
}

bool SlurmCluster::StartDaemons(milliseconds timeout, std::string* why) {
  munged_ = std::make_unique<Subprocess>(
      std::vector<std::string>{
          FindProgram("munged"), "--foreground", "--force", "--socket=" + munge_socket_,
          "--key-file=" + dir_ + "/munge-key/key", "--pid-file=" + dir_ + "/munge/pid",
          "--log-file=" + dir_ + "/log/munged.log", "--seed-file=" + dir_ + "/munge/seed"},
      dir_ + "/log/munged.out", SubprocessOptions{false, true});
  if (!WaitFor([&] { return std::filesystem::exists(munge_socket_); }, milliseconds(10000))) {
    *why = "munged did not create its socket: " + munged_->Log();
    return false;
  }
  // Every host: the cluster's hosts file over /etc/hosts (its own mount namespace), and a
  // cgroup mount point where slurmd's cgroup plugin looks for one (the hosts' /sys is their
  // own sysfs; with proctrack/linuxproc and task/none nothing is put in a cgroup).
  for (int h = 0; h < hosts_->size(); ++h) {
    auto p = hosts_->Spawn(
        h,
        {"/bin/sh", "-c",
         "mount --bind \"$0\" /etc/hosts && "
         "(mountpoint -q /sys/fs/cgroup || mount -t tmpfs -o size=1m cgroup /sys/fs/cgroup)",
         dir_ + "/hosts"},
        dir_ + "/log/prepare-" + hosts_->name(h) + ".log");
    auto rc = p->Wait(kCommandTimeout);
    if (!rc || *rc != 0) {
      *why = "preparing host " + hosts_->name(h) + " failed: " + p->Log();
      return false;
    }
  }
  const std::string env = conf_env();
  slurmctld_ =
      hosts_->Spawn(0, {"/usr/bin/env", env, FindProgram("slurmctld"), "-D", "-i", "-f", conf_},
                    dir_ + "/log/slurmctld.out");
  for (int h = 1; h < hosts_->size(); ++h)
    slurmd_.push_back(hosts_->Spawn(
        h, {"/usr/bin/env", env, FindProgram("slurmd"), "-D", "-N", hosts_->name(h), "-f", conf_},
        dir_ + "/log/slurmd-" + hosts_->name(h) + ".out"));
  std::string out;
  const bool idle = Poll(
      [&] {
        if (Client({"sinfo", "--noheader", "--Node", "--format=%N %t"}, &out) != 0) return false;
        std::istringstream lines(out);
        int idle_nodes = 0;
        for (std::string name, state; lines >> name >> state;)
          if (state == "idle") ++idle_nodes;
        return idle_nodes == nodes();
      },
      timeout);
  if (!idle) {
    *why = "the Slurm nodes did not all become idle: " + out;
    return false;
  }
  return true;
}

SlurmCluster::~SlurmCluster() {
  for (auto& d : slurmd_) d.reset();
  slurmctld_.reset();
  munged_.reset();
}

int SlurmCluster::Client(const std::vector<std::string>& argv, std::string* out,
                         const std::vector<std::string>& env, milliseconds timeout) const {
  std::vector<std::string> full = {"/usr/bin/env", conf_env()};
  full.insert(full.end(), env.begin(), env.end());
  const std::string program = FindProgram(argv.at(0));
  full.push_back(program.empty() ? argv[0] : program);
  full.insert(full.end(), argv.begin() + 1, argv.end());
  // Not RunCommand: it leaves a temporary folder per call, and tests poll Slurm often.
  const std::string log = dir_ + "/log/client-" + std::to_string(clients_++) + ".out";
  int code;
  {
    Subprocess p(full, log);
    auto rc = p.Wait(timeout);
    code = rc ? *rc : -1;
    if (out) *out = p.Log();
  }
  std::error_code ec;
  std::filesystem::remove(log, ec);
  return code;
}

std::string SlurmCluster::Submit(const std::vector<std::string>& args,
                                 const std::vector<std::string>& env, std::string* why) const {
  std::vector<std::string> argv = {"sbatch", "--parsable"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string out;
  const int rc = Client(argv, &out, env);
  // --parsable prints "ID" or "ID;cluster" as the last line.
  std::string last;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) last = line;
  last = last.substr(0, last.find(';'));
  if (rc != 0 || last.empty() || last.find_first_not_of("0123456789") != std::string::npos) {
    *why = "sbatch failed (" + std::to_string(rc) + "): " + out;
    return "";
  }
  return last;
}

std::string SlurmCluster::JobField(const std::string& job, const std::string& field) const {
  std::string out;
  if (Client({"scontrol", "-o", "show", "job", job}, &out) != 0) return "";
  return FieldOf(out, field);
}

bool SlurmCluster::WaitForJobState(const std::string& job,
                                   const std::function<bool(const std::string&)>& done,
                                   milliseconds timeout, std::string* state) const {
  std::string seen;
  const bool ok = Poll(
      [&] {
        seen = JobField(job, "JobState");
        return done(seen);
      },
      timeout);
  if (state) *state = seen;
  return ok;
}

std::string SlurmCluster::Logs() const {
  std::string text = "--- slurmctld\n" + Tail(dir_ + "/log/slurmctld.log") +
                     Tail(dir_ + "/log/slurmctld.out", 1000);
  for (int h = 1; h < hosts_->size(); ++h)
    text += "--- slurmd " + hosts_->name(h) + "\n" +
            Tail(dir_ + "/log/slurmd-" + hosts_->name(h) + ".log", 1500) +
            Tail(dir_ + "/log/slurmd-" + hosts_->name(h) + ".out", 500);
  return text;
}

}  // namespace retort::testing
